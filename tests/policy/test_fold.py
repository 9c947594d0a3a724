"""The kept fold (zeus.policy.fold) against the full replay (zeus.policy.history.fold_history).

A generated history is played out as store events: each trial's dispatch, then (if it finished) its
result, in an arbitrary order that keeps a result after its dispatch (dispatches may come out of trial
order, as racing claimers make them). The events are cut into arbitrary chunks. After each chunk the
kept fold goes through its stored form (JSON, as the store keeps it), takes the chunk, and must equal
the full replay of the history so far: every field of the tally and both policies' decisions. When a
chunk cannot extend it (`advance` is None), the fold is rebuilt from everything, as the steps do.
"""

from __future__ import annotations

import json
import math
from dataclasses import astuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.policy.helpers import make_spec, record
from tests.policy.test_properties import FAST, histories, specs
from zeus.job import TrialRecord, TrialStatus
from zeus.policy import POLICY_NAMES, NoFeasibleBatchSizeError, get_policy
from zeus.policy.fold import GAP_WAIT, Entry, Fold
from zeus.policy.history import HistoryView, fold_history
from zeus.policy.tally import Tally
from zeus.store.tallies import decode_tally, encode_tally


def _dispatched(r: TrialRecord) -> Entry:
    name = f"r{r.recurrence}.{r.trial:04d}"
    return Entry(name, (r.trial, r.recurrence, f"r{r.recurrence}", r.trial), TrialRecord(r.recurrence, r.trial,
                 r.batch_size, TrialStatus.DISPATCHED), started_at=1000 + r.trial)  # fmt: skip


def _stored(fold: Fold) -> tuple[dict, dict]:
    """The fold's parts as the store keeps and gives them back (zeus.store.tallies, through bytes)."""
    record, arrays = fold.to_parts()
    decoded = decode_tally("tally", encode_tally({"fold": record}, arrays))
    assert decoded is not None
    return decoded[0]["fold"], decoded[1]


def _fields(tally: Tally) -> str:
    """Everything a tally holds, as text (NaN-safe: json writes NaN as NaN)."""
    fields = {
        "arms": [arm.values() for arm in tally.arms],
        "recurrences": {k: v.tolist() for k, v in tally.recurrences.arrays().items()},
        "best_spend": tally.recurrences.best_spend(),
        "scalars": [tally.num_records, tally.min_oom, tally.best_cost, tally.best_size, tally.max_trial],
        "windows": [list(w) for w in tally.windows],
        "walks": {k: w.state() for k, w in sorted(tally.walks.items())},
        "in_flight": [astuple(r) for r in tally.in_flight],
    }
    return json.dumps(fields, default=str)


def _decisions(spec, view: HistoryView | None, seed: int) -> list:
    if view is None:
        return ["no feasible size"]
    return [get_policy(name).decide_from(spec, view, seed) for name in POLICY_NAMES] + [
        get_policy(name).arm_states_from(spec, view) for name in POLICY_NAMES
    ]


def _view(fold_or_tally) -> HistoryView | None:
    try:
        return fold_or_tally.view() if isinstance(fold_or_tally, Fold) else HistoryView.of(fold_or_tally)
    except NoFeasibleBatchSizeError:
        return None


def _view_tally(fold: Fold) -> Tally:
    tally = fold.tally.copy()
    for entry in fold.tail:
        tally.add(entry.record)
    return tally


@st.composite
def played(draw, spec):
    """(history, its events in an arbitrary order, chunk boundaries)."""
    history = draw(histories(spec))
    events = [("d", i) for i in range(len(history))] + [
        ("f", i) for i, r in enumerate(history) if r.status is not TrialStatus.DISPATCHED
    ]
    order = list(draw(st.permutations(events)))
    for i in range(len(history)):  # a result comes after its dispatch: swap the two if not
        if ("f", i) in order and order.index(("f", i)) < order.index(("d", i)):
            a, b = order.index(("f", i)), order.index(("d", i))
            order[a], order[b] = order[b], order[a]
    cuts = sorted(draw(st.lists(st.integers(0, len(order)), max_size=6)))
    return history, order, cuts


@FAST
@given(data=st.data())
def test_folding_in_chunks_equals_the_full_replay(data):
    spec = data.draw(specs())
    history, order, cuts = data.draw(played(spec))
    seed = data.draw(st.integers(0, 2**31 - 1))
    fold, seen, dispatched = Fold.empty(spec), [], set()
    for start, stop in zip([0, *cuts], [*cuts, len(order)], strict=True):
        new, results = [], {}
        for kind, i in order[start:stop]:
            r = history[i]
            if kind == "d":
                dispatched.add(i)
                new.append(_dispatched(r))
            else:
                results[_dispatched(r).name] = (r.status, r.cost, r.time_s, r.energy_j)
        kept = Fold.from_parts(spec, *_stored(fold))
        advanced = kept.advance(new, results)
        seen += order[start:stop]
        now = [history[i] if ("f", i) in seen else _dispatched(history[i]).record for i in sorted(dispatched)]
        if advanced is None:  # a trial sorted into the prefix: the steps fold everything again
            assert any(e.key <= kept.last_key for e in new)
            advanced = Fold.empty(spec).advance([_dispatched(history[i]) for i in sorted(dispatched)], {
                _dispatched(history[i]).name: (history[i].status, history[i].cost, history[i].time_s,
                                               history[i].energy_j)
                for kind, i in seen if kind == "f"
            })  # fmt: skip
        fold = advanced
        full = fold_history(spec, now)
        assert _fields(_view_tally(fold)) == _fields(full)
        assert _decisions(spec, _view(fold), seed) == _decisions(spec, _view(full), seed)
        # The prefix is all finished; it stops at a trial in flight, or waits at a number not seen yet.
        last = fold.last_key[0] if fold.last_key is not None else 0
        assert not fold.tail or fold.tail[0].record.status is TrialStatus.DISPATCHED or fold.tail[0].key[0] > last + 1


def test_a_trial_dispatched_after_a_later_one_finished_is_folded_in_order():
    """Trial 2 claimed its number before trial 3, but its dispatch shows up after trial 3 finished: the
    prefix waits at number 2, so trial 2 arrives in the tail and both are folded in order."""
    spec = make_spec()
    one, two, three = (
        record(1, 1, 128, "reached", 20.0),
        record(2, 2, 32, "dispatched"),
        record(1, 3, 64, "reached", 10.0),
    )
    results = {_dispatched(r).name: (r.status, r.cost, r.time_s, r.energy_j) for r in (one, three)}
    fold = Fold.empty(spec).advance([_dispatched(one), _dispatched(three)], results)
    assert fold is not None and fold.last_key == (1, 1, "r1", 1) and [e.record.trial for e in fold.tail] == [3]
    later = fold.advance([_dispatched(two)], {_dispatched(two).name: (TrialStatus.REACHED, 15.0, 0.15, 15.0)})
    assert later is not None and later.tail == [] and later.last_key == (3, 1, "r1", 3)
    assert later.tally.num_records == 3 and later.tally.arm(32).total == 15.0


def test_a_number_skipped_for_good_is_passed_once_many_trials_wait_behind_it():
    """Number 1 is never dispatched (its claimer died): the prefix waits at it while at most GAP_WAIT
    trials are behind it, then passes it; a trial 1 that shows up after that is refused (fold again)."""
    spec = make_spec()
    behind = [record(1, n, 64, "reached", 10.0) for n in range(2, GAP_WAIT + 3)]
    results = {_dispatched(r).name: (r.status, r.cost, r.time_s, r.energy_j) for r in behind}
    waiting = Fold.empty(spec).advance([_dispatched(r) for r in behind[:-1]], {})
    assert waiting is not None
    waiting = waiting.advance([], {n: v for n, v in results.items() if n != _dispatched(behind[-1]).name})
    assert waiting is not None and waiting.last_key is None and len(waiting.tail) == GAP_WAIT
    passed = waiting.advance([_dispatched(behind[-1])], results)
    assert passed is not None and passed.tail == [] and passed.tally.num_records == GAP_WAIT + 1
    assert passed.advance([_dispatched(record(1, 1, 32, "dispatched"))], {}) is None


def test_the_prefix_stops_at_the_first_trial_in_flight():
    """Hand-worked: trials 1 (reached), 2 (in flight), 3 (reached): only trial 1 is folded for good."""
    spec = make_spec()
    one, two, three = (
        record(1, 1, 128, "reached", 20.0),
        record(2, 2, 64, "dispatched"),
        record(3, 3, 32, "reached", 9.0),
    )
    results = {_dispatched(r).name: (r.status, r.cost, r.time_s, r.energy_j) for r in (one, three)}
    fold = Fold.empty(spec).advance([_dispatched(r) for r in (one, two, three)], results)
    assert fold.tally.num_records == 1 and fold.tally.arm(128).total == 20.0
    assert [e.record.trial for e in fold.tail] == [2, 3] and [e.record.trial for e in fold.in_flight()] == [2]
    view = fold.view()
    assert view.num_records == 3 and view.tally.best_cost == 9.0 and [r.trial for r in view.dispatched] == [2]
    later = fold.advance([], {_dispatched(two).name: (TrialStatus.REACHED, 15.0, 0.15, 15.0)})
    assert later.tally.num_records == 3 and later.tail == [] and later.last_key == (3, 3, "r3", 3)
    assert later.tally.arm(64).total == 15.0 and not math.isnan(later.tally.arm(32).first_cost)


def test_a_stored_fold_under_other_spec_fields_is_refused():
    spec = make_spec()
    stored = _stored(Fold.empty(spec).advance([_dispatched(record(1, 1, 64, "reached", 5.0))], {}))
    with pytest.raises(ValueError, match="another spec"):
        Fold.from_parts(make_spec(window_size=3), *stored)
