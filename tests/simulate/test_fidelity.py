"""zeus-nsdi23 in our simulator against Zeus's own simulator (zeus==0.16.0), on the shipped traces.

Reference: cumulative cost / oracle, mean over seeds 1-20, from Zeus's
`zeus._legacy.simulate.Simulator.simulate_one_job` with PruningGTSBatchSizeOptimizer and
JITPowerLimitOptimizer (eta 0.5, beta 2), as given in the project's issue 2. Ours must be within 2 %.
"""

from __future__ import annotations

import numpy as np
import pytest

from zeus.simulate.runner import build_simulator, simulate_seeds
from zeus.simulate.trace import shipped_trace

ZEUS_REFERENCE = {  # (workload, gpu): (cost / oracle, recurrences)
    ("librispeech", "v100"): (1.039, 210),
    ("librispeech", "a40"): (1.076, 108),
    ("cifar100", "v100"): (1.071, 140),
    ("cifar100", "a40"): (1.057, 180),
    ("imagenet", "v100"): (1.063, 70),
    ("imagenet", "a40"): (1.050, 108),
    ("squad", "v100"): (1.018, 98),
    ("squad", "a40"): (1.026, 126),
    ("sentiment140", "v100"): (1.024, 70),
    ("sentiment140", "a40"): (1.088, 50),
    ("movielens-1m", "v100"): (1.077, 182),
    ("movielens-1m", "a40"): (1.057, 216),
}


@pytest.mark.slow
@pytest.mark.parametrize(("workload", "gpu"), list(ZEUS_REFERENCE))
def test_zeus_policy_matches_zeus_simulator_within_2_percent(workload, gpu):
    reference, n = ZEUS_REFERENCE[(workload, gpu)]
    sim = build_simulator(workload, power_trace=shipped_trace(gpu))
    assert sim.default_num_recurrences() == n
    results = simulate_seeds(sim, "zeus-nsdi23", list(range(1, 21)))
    ours = float(np.mean([r.cost_over_oracle for r in results]))
    assert abs(ours / reference - 1) < 0.02, f"{workload}/{gpu}: ours {ours:.4f} vs Zeus {reference}"
