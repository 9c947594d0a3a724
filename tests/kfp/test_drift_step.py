"""The bandit step reacts to a drift the store records (issue 24), against a real local store and policy.

The store method that lists the recurrences drift opened (`Store.drift_recurrences`) comes with the
gate; until it lands, the drift tests add it to the real Store class, as the gate will.

Zeus's walk from b0 = 16 (tests/kfp/test_kfp_steps.py): recurrence 1 runs 16, which reaches; recurrence 2
then explores down, 8, unless it forgets recurrence 1 and starts the walk again at 16."""

from __future__ import annotations

import pytest

from tests.kfp.test_kfp_steps import POLICY, SPEC, _finish, _prepare
from zeus.job import JobSpec, TrialStatus
from zeus.steps import bandit
from zeus.steps.trial import drift_recurrences
from zeus.store import Store, open_store


def second_recurrence_size(uri: str, tmp_path, spec: JobSpec) -> int:
    """Recurrence 1 runs the default 16 and reaches; the batch size recurrence 2's first attempt gets."""
    _prepare(uri, "rec-a", tmp_path, spec)
    first = bandit(store_uri=uri, job_id=spec.job_id, recurrence_id="rec-a", attempt=1, policy=POLICY)
    assert first.batch_size == 16
    _finish(uri, "rec-a", 1, 16, TrialStatus.REACHED, 1000.0, tmp_path)
    _prepare(uri, "rec-b", tmp_path, spec)
    return bandit(store_uri=uri, job_id=spec.job_id, recurrence_id="rec-b", attempt=1, policy=POLICY).batch_size


def test_without_drift_the_walk_goes_on_down_from_the_default(tmp_path):
    uri = str(tmp_path / "store")
    assert second_recurrence_size(uri, tmp_path, SPEC) == 8
    assert drift_recurrences(open_store(uri), SPEC.job_id) == ()


@pytest.mark.parametrize(("reaction", "expected"), [("window", 16), ("reexplore", 16), ("none", 8)])
def test_a_drift_at_the_new_recurrence_is_what_the_reaction_says(tmp_path, monkeypatch, reaction, expected):
    """window forgets recurrence 1; reexplore too, restarting at the size cheapest before it (16, the only
    one); none goes on down."""
    monkeypatch.setattr(Store, "drift_recurrences", lambda self, job_id: [2], raising=False)
    spec = SPEC.with_changes(drift_reaction=reaction)
    uri = str(tmp_path / "store")
    assert second_recurrence_size(uri, tmp_path, spec) == expected
    assert open_store(uri).get_job(SPEC.job_id).drift_reaction == reaction
