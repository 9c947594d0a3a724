"""zeus-nsdi23 in our simulator against Zeus's own simulator (zeus==0.16.0), on the shipped traces.

The reference figures and their provenance are in zeus/zeus_kfp/simulate/reference.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from zeus_kfp.simulate.reference import FIDELITY_TOLERANCE, ZEUS_SIMULATOR_REFERENCE
from zeus_kfp.simulate.trace import shipped_trace
from zeus_kfp.simulate.workload_runs import build_simulator, simulate_seeds


@pytest.mark.slow
@pytest.mark.parametrize(("workload", "gpu"), list(ZEUS_SIMULATOR_REFERENCE))
def test_zeus_policy_matches_zeus_simulator_within_2_percent(workload, gpu):
    reference, n = ZEUS_SIMULATOR_REFERENCE[(workload, gpu)]
    sim = build_simulator(workload, power_trace=shipped_trace(gpu))
    assert sim.default_num_recurrences() == n
    results = simulate_seeds(sim, "zeus-nsdi23", list(range(1, 21)))
    ours = float(np.mean([r.cost_over_oracle for r in results]))
    assert abs(ours / reference - 1) < FIDELITY_TOLERANCE, f"{workload}/{gpu}: ours {ours:.4f} vs Zeus {reference}"
