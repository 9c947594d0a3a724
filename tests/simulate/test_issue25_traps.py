"""Two perturbed jobs (zeus_kfp.simulate.perturb, seed 1: the tuning set) that trapped turning-walk before
issue 25's rules, run whole in the trace simulator. The rules are in zeus/policy/turning_walk.py (3: the
early stop) and zeus/policy/walk.py (a miss at the default size); benchmarks/RESULTS.md has the figures.

Bounds are stated in oracle recurrences (regret) and trial counts, wide enough that a change elsewhere
in the policy does not trip them, far below what the trap cost (hundreds of recurrences).
"""

from __future__ import annotations

from zeus_kfp.job import TrialStatus
from zeus_kfp.policy.turning_walk import TurningWalkPolicy
from zeus_kfp.simulate.perturb import perturbed_job

ISSUE_8_RULES = {"early_stop": "lowest-spend", "default_miss_ends": True}


def test_one_short_run_no_longer_sets_the_early_stop_for_good():
    """Job #217 (movielens-1m/V100, moved minimum), soft-turn margin 0.3: a run of 32 reached the target
    at 0.45x the oracle's mean cost, and beta x the cheapest recurrence then cut most trials of every
    size (3,520 cut trials, regret about 1,586). With beta x the cheapest size's mean cost, a cut-off
    run is the exception."""
    job = perturbed_job(1, 217)
    run = job.simulator().run(TurningWalkPolicy(turn_margin=0.3), 218, None, 1)
    cut = sum(t.status is TrialStatus.COST_EXCEEDED for t in run.history)
    assert cut < 20 and len(run.history) < run.num_recurrences + 20
    assert run.regret() < 20.0


def test_a_miss_at_the_default_size_no_longer_ends_the_walk():
    """Job #232 (cifar100/A40, moved minimum): the default size 1024 misses the target; with issue 8's
    rules the walk ended there (2048 missed too) and the job ran 256 for good, about 100 oracle
    recurrences of regret. Now the walk goes on down from the default."""
    job = perturbed_job(1, 232)
    sim = job.simulator()
    old = sim.run(TurningWalkPolicy(**ISSUE_8_RULES), 233, None, 1)
    new = sim.run(TurningWalkPolicy(), 233, None, 1)
    assert old.history[0].batch_size == job.spec.default_batch_size
    assert old.history[0].status is not TrialStatus.REACHED  # the trap: the default's first run missed
    assert 512 not in {t.batch_size for t in old.history}  # ... and the walk never went below it
    assert 512 in {t.batch_size for t in new.history}
    assert new.regret() < old.regret() / 5
