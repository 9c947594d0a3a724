"""The gate and the cap in the simulator (zeus_kfp.simulate.recurrence_gate): runs arrive on a period and open a
recurrence only when a slot is free. On the tiny trace of test_drift every trial takes at least 2 s
(two epochs of at least 1 s), so runs arriving a nanosecond apart all find the first recurrence running."""

from __future__ import annotations

import pytest

from zeus_kfp.policy import get_policy
from zeus_kfp.simulate.engine import Simulator
from zeus_kfp.simulate.recurrence_gate import simulate_gated

from .test_drift import BEFORE, SPEC


def key(result) -> list[tuple]:
    return [(t.recurrence, t.trial, t.batch_size, t.status, t.cost) for t in result.trials]


@pytest.mark.parametrize("policy", ["zeus-nsdi23", "turning-walk"])
def test_runs_that_find_no_free_slot_are_skipped(policy):
    sim = Simulator(SPEC, BEFORE)
    for cap in (1, 2, 3):
        gated = simulate_gated(sim, get_policy(policy), 1, arrivals=10, period_s=1e-9, cap=cap)
        assert (gated.skipped, gated.opened) == (10 - cap, cap)
        assert gated.result.num_recurrences == cap and len(gated.result.rows) == cap
    spaced = simulate_gated(sim, get_policy(policy), 1, arrivals=10, period_s=1e9, cap=1)
    assert (spaced.skipped, spaced.opened) == (0, 10)


@pytest.mark.parametrize("period_s", [1e9, 2.0, 1.0, 0.5])
def test_with_cap_one_the_opened_recurrences_are_those_of_a_sequential_run(period_s):
    sim = Simulator(SPEC, BEFORE)
    chosen = get_policy("turning-walk")
    gated = simulate_gated(sim, chosen, 4, arrivals=30, period_s=period_s, cap=1)
    assert gated.opened > 1 and (gated.skipped > 0) == (period_s < 2.5)  # a trial takes 2 s or more
    assert key(gated.result) == key(sim.run(chosen, 4, gated.opened))
    assert gated.result.regret() == pytest.approx(sim.run(chosen, 4, gated.opened).regret())


def test_bad_gate_inputs_name_what_is_wrong():
    sim = Simulator(SPEC, BEFORE)
    with pytest.raises(ValueError, match="invalid cap=0: allowed a positive integer"):
        simulate_gated(sim, get_policy("turning-walk"), 1, arrivals=3, period_s=1.0, cap=0)
    with pytest.raises(ValueError, match=r"invalid period_s=-1\.0"):
        simulate_gated(sim, get_policy("turning-walk"), 1, arrivals=3, period_s=-1.0)
