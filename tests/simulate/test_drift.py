"""A job whose costs shift at a known recurrence (zeus_kfp.simulate.shifted_job), on traces worked out by hand.

The tiny trace: sizes 16, 32, 64; every run reaches the target at epoch 2; at either power limit (100 W,
200 W; MAXPOWER 200 W) a size's epoch takes t seconds, using 100 t J at 100 W and 200 t J at 200 W. eta 0.5
prices an epoch at 0.5 E + 0.5 x 200 x t: 150 t at 100 W, 200 t at 200 W, so every size trains at 100 W
and a run costs 2 x 150 t. Before the shift t is 1, 2, 4 for 16, 32, 64 (16 is the cheapest); after it 4, 2, 1
(64 is). The job starts at 32 (its default).
"""

from __future__ import annotations

import numpy as np
import pytest

from zeus_kfp.job import JobSpec
from zeus_kfp.policy import get_policy
from zeus_kfp.simulate.engine import Simulator, expected_figures, oracle_batch_size
from zeus_kfp.simulate.perturb import run_costs
from zeus_kfp.simulate.shifted_job import DriftJob, ShiftedSimulator, drift_cell, run_drift, scaled
from zeus_kfp.simulate.trace import SizeTrace, WorkloadTrace

LIMITS = np.array([100.0, 200.0])
SPEC = JobSpec("tiny", (16, 32, 64), 32, 0.5, max_epochs=4, max_attempts=3, max_power_w=200.0)


def tiny(seconds: dict[int, float]) -> WorkloadTrace:
    sizes = {
        b: SizeTrace(b, np.array([2.0, 2.0]), LIMITS, np.array([t, t]), np.array([100.0 * t, 200.0 * t]))
        for b, t in seconds.items()
    }
    return WorkloadTrace(sizes, (100.0, 200.0), 200.0)


BEFORE, AFTER = tiny({16: 1.0, 32: 2.0, 64: 4.0}), tiny({16: 4.0, 32: 2.0, 64: 1.0})
JOB = DriftJob("tiny", SPEC, BEFORE, AFTER, shift_at=21, num_recurrences=40, source="simulated (tiny)")


def test_the_oracle_moves_with_the_shift():
    sim = JOB.simulator()
    assert oracle_batch_size(SPEC, BEFORE) == 16 and oracle_batch_size(SPEC, AFTER) == 64
    assert sim.oracle.cost == pytest.approx(2 * 150.0 * 1.0)
    assert sim.after_oracle.cost == pytest.approx(2 * 150.0 * 1.0)


def test_recurrences_from_the_shift_on_train_on_the_shifted_trace():
    """The shifted trace here is the trace with every epoch's time and energy doubled: a recurrence before
    the shift costs what the plain simulator's does, one from it on exactly twice that."""
    script = get_policy("zeus-nsdi23")
    plain = Simulator(SPEC, BEFORE).run(script, 3, 12)
    shifted = ShiftedSimulator(SPEC, BEFORE, scaled(BEFORE, 2.0), 7, "simulated (tiny)").run(script, 3, 12)
    assert [(t.recurrence, t.batch_size, t.status) for t in shifted.trials] == [
        (t.recurrence, t.batch_size, t.status) for t in plain.trials
    ]
    for mine, theirs in zip(shifted.trials, plain.trials, strict=True):
        assert mine.cost == (2.0 * theirs.cost if mine.recurrence >= 7 else theirs.cost)


@pytest.mark.parametrize("policy", ["zeus-nsdi23", "turning-walk"])
def test_without_a_reaction_the_policy_keeps_the_stale_best_with_the_window_it_finds_the_new_one(policy):
    """zeus-nsdi23 told nothing keeps 16 for good: the old observations outweigh the new. turning-walk told
    nothing gets to 64 only through the probe past the skipped up direction, due once 16's mean has
    risen past the default's run it was compared with: later than a reaction gets there."""
    chosen = get_policy(policy)
    late, first_64 = {}, {}
    for reaction in ("none", "window", "reexplore"):
        result = JOB.simulator(reaction).run(chosen, 1, JOB.num_recurrences, drifts=(JOB.shift_at,))
        late[reaction] = {t.batch_size for t in result.trials if t.recurrence > 30}
        first_64[reaction] = min((t.recurrence for t in result.trials if t.batch_size == 64), default=None)
    if policy == "zeus-nsdi23":
        assert 64 not in late["none"]
    else:
        assert first_64["none"] > max(first_64["window"], first_64["reexplore"]) > JOB.shift_at
    assert late["window"] == {64} and late["reexplore"] == {64}
    # Told nothing, the reaction does nothing: the same run as `none`.
    silent = run_drift(JOB, chosen, 1, signal=False, reaction="window")
    assert silent.regret == run_drift(JOB, chosen, 1, signal=True, reaction="none").regret


def test_after_shift_regret_is_the_post_shift_cost_over_the_new_oracle():
    result = run_drift(JOB, get_policy("turning-walk"), 1, signal=True, reaction="window")
    assert result.num_recurrences == 20
    assert result.regret == pytest.approx(result.cost / 300.0 - 20)
    assert result.regret > 0


def test_a_drift_cell_moves_the_minimum_of_a_measured_trace_and_keeps_its_level():
    job = drift_cell("sentiment140", "v100", 0.5, 1)
    assert job is not None and job.shift_at == job.num_recurrences // 2 + 1
    before, after = expected_figures(job.spec, job.before)[1], expected_figures(job.spec, job.after)[1]
    assert oracle_batch_size(job.spec, job.after) != oracle_batch_size(job.spec, job.before)
    assert after.cost == pytest.approx(before.cost, rel=1e-9)
    # The curve keeps its shape: read from its minimum, the same ratios, shifted along the sizes.
    old, new = run_costs(job.spec, job.before), run_costs(job.spec, job.after)
    shift = int(np.argmin(new)) - int(np.argmin(old))
    for j in range(len(new)):
        if 0 <= j - shift < len(old):
            assert new[j] / new.min() == pytest.approx(old[j - shift] / old.min(), rel=1e-9)
    assert job.false_alarm().after is job.before
