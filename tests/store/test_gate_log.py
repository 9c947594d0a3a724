"""The recurrence gate's rule as the log settles it (zeus/zeus_kfp/store/gating.py), on both backends: when a running
recurrence ends, what a plain begin does, and snapshots written before the gate's columns existed."""

from __future__ import annotations

import pytest

from zeus_kfp.job import Decision, TrialResult
from zeus_kfp.store import GateRequest, UnknownTrialError


def request(spec, **changes) -> GateRequest:
    fields = dict(period_s=0.0, max_running=1, max_attempts=2, timeout_s=86400.0) | changes
    return GateRequest(**fields)


def miss(store, spec, rid: str, attempt: int) -> None:
    store.dispatch_trial(spec.job_id, rid, attempt, Decision(spec.batch_sizes[0], None, "exploration", "test"))
    result = TrialResult.build(spec, batch_size=spec.batch_sizes[0], status="not_reached", time_s=1.0, energy_j=1.0,
                               num_epochs=1)  # fmt: skip
    store.finish_trial(spec.job_id, rid, attempt, result)


def test_a_recurrence_runs_until_its_attempts_are_spent(store, spec):
    store.ensure_job(spec)
    assert store.open_recurrence(spec.job_id, "r1", request(spec)).why == "first"
    miss(store, spec, "r1", 1)  # one of its two attempts missed: it goes on
    assert store.open_recurrence(spec.job_id, "r2", request(spec)).why == "no free slot"
    miss(store, spec, "r1", 2)  # both missed: it ended without reaching the target
    third = store.open_recurrence(spec.job_id, "r3", request(spec))
    assert (third.opened, third.why, third.recurrence) == (True, "time", 2)
    with pytest.raises(UnknownTrialError, match="skipped by the recurrence gate"):
        store.begin_recurrence(spec.job_id, "r2")  # preprocess of a skipped run would be refused
    assert store.open_recurrence(spec.job_id, "r2", request(spec)).why == "no free slot"  # the first ask stands


def test_an_end_entry_frees_the_slot_and_a_plain_begin_always_opens(store, spec):
    store.ensure_job(spec)
    assert store.begin_recurrence(spec.job_id, "plain-1") == 1  # no request: as before the gate
    assert store.begin_recurrence(spec.job_id, "plain-2") == 2  # and it takes no slot from anyone's rule
    assert store.open_recurrence(spec.job_id, "gated", request(spec, max_running=2)).why == "no free slot"
    store.end_recurrence(spec.job_id, "plain-1", "its run failed before any trial")
    assert store.open_recurrence(spec.job_id, "gated-2", request(spec, max_running=2)).recurrence == 3
    assert store.recurrences(spec.job_id)["why"].tolist() == ["plain", "plain", "no free slot", "time"]


def test_no_cap_not_due_and_drift_above_the_threshold(store, spec):
    """max_running 0 is no cap; a period not passed skips, naming the detector's verdict when one is set."""
    cap = 0
    store.ensure_job(spec)
    outcomes = [store.open_recurrence(spec.job_id, f"r{i}", request(spec, max_running=cap)) for i in range(4)]
    assert [o.recurrence for o in outcomes] == [1, 2, 3, 4]
    later = store.open_recurrence(spec.job_id, "late", request(spec, max_running=cap, period_s=1e9))
    assert (later.opened, later.why) == (False, "not due")
    drift = dict(period_s=1e9, drift_detector="rows", drift_threshold=0.1)
    calm = store.open_recurrence(spec.job_id, "calm", request(spec, max_running=cap, drift_stat=0.1, **drift))
    moved = store.open_recurrence(spec.job_id, "moved", request(spec, max_running=cap, drift_stat=0.11, **drift))
    assert (calm.why, moved.why, moved.recurrence) == ("no drift", "drift", 5)  # above the threshold, not at it
    assert store.drift_recurrences(spec.job_id) == [5]
