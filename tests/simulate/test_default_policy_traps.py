"""Generated jobs (zeus_kfp.simulate.perturb, seed 1: the tuning set) whose noise or curve can leave a walk on a
local minimum for good, or an early stop cutting every run, run whole in the trace simulator with the default
policy. The truth is the job's trace (`run_costs`: each size's expected run cost), not the policy.

Bounds are in oracle recurrences (regret) and trial counts, wide enough that a change elsewhere in the policy
does not trip them, far below what each trap cost a walk without probes or an early stop at beta x the
cheapest single run (300 to 1,600 recurrences of regret; benchmarks/HISTORY.md has the traced runs).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from zeus_kfp.job import TrialStatus
from zeus_kfp.policy import Policy, get_policy
from zeus_kfp.policy.turning_walk import DEFAULT, TurningWalkPolicy
from zeus_kfp.simulate.perturb import perturbed_job, run_costs


def _run(index: int, policy: Policy | None = None):
    job = perturbed_job(1, index)
    run = job.simulator().run(policy or get_policy("default"), index + 1, None, 1)
    return job, run, dict(zip(job.trace.batch_sizes, run_costs(job.spec, job.trace), strict=True))


@pytest.mark.parametrize("index", [3, 154, 172, 37])
def test_probes_lead_past_a_turn_that_noise_or_a_plateau_put_short_of_the_minimum(index: int):
    """A skip read off one noisy first run (3), turns read off noisy first runs (154, 172), a plateau (37): the
    walk alone stays on a size at 1.3x the cheapest or more for good. The probes find a size within 1.2x."""
    _, run, costs = _run(index)
    assert any("probing" in t.decision_reason for t in run.trials)
    assert costs[run.trials[-1].batch_size] <= 1.2 * min(costs.values())
    assert run.regret() < 100.0


def test_one_short_run_does_not_set_the_early_stop_for_good():
    """A run far below its size's mean (a few epochs among many) sets an early stop at beta x the cheapest run
    that cuts most runs of every size; beta x the cheapest size's mean does not. A soft turn at 1.3x (not the
    default 1.2x) walks this job to the size whose one short run (0.45x the oracle's mean) set that trap."""
    _, run, _ = _run(217, TurningWalkPolicy(replace(DEFAULT, soft_turn=1.3)))
    cut = sum(t.status is TrialStatus.COST_EXCEEDED for t in run.history)
    assert cut < 20 and len(run.history) < run.num_recurrences + 20
    assert run.regret() < 20.0


def test_a_miss_at_the_default_size_does_not_end_the_walk():
    """The default size 1024 misses the target on its first run; the walk goes on down from it and finds 512."""
    job, run, _ = _run(232)
    assert run.history[0].batch_size == job.spec.default_batch_size
    assert run.history[0].status is not TrialStatus.REACHED
    assert 512 in {t.batch_size for t in run.history}
    assert run.regret() < 20.0
