"""The bandit step reacts to a drift the store records, against a real local store and policy.

Recurrence 2 is opened by the real gate's rule (`Store.open_recurrence` with a drift statistic above its
threshold), so `Store.drift_recurrences` lists it as the store records it.

Zeus's walk from b0 = 16 (tests/kfp/test_kfp_steps.py): recurrence 1 runs 16, which reaches; recurrence 2
then explores down, 8, unless it forgets recurrence 1 and starts the walk again at 16."""

from __future__ import annotations

import pytest

from tests.kfp.test_kfp_steps import POLICY, SPEC, _finish, _prepare
from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.steps.bandit import bandit
from zeus_kfp.store import open_store
from zeus_kfp.store.gating import GateRequest


def second_recurrence_size(uri: str, tmp_path, spec: JobSpec, *, drift: bool = False) -> int:
    """Recurrence 1 runs the default 16 and reaches; the batch size recurrence 2's first attempt gets."""
    _prepare(uri, "rec-a", tmp_path, spec)
    first = bandit(store_uri=uri, job_id=spec.job_id, recurrence_id="rec-a", attempt=1, policy=POLICY)
    assert first.batch_size == 16
    _finish(uri, "rec-a", 1, 16, TrialStatus.REACHED, 1000.0, tmp_path)
    if drift:  # the gate opens rec-b on drift: the detector's statistic is above its threshold
        request = GateRequest(period_s=3600.0, max_running=1, max_attempts=spec.max_attempts, timeout_s=86400.0,
                              drift_detector="ks", drift_stat=0.4, drift_threshold=0.1)  # fmt: skip
        assert open_store(uri).open_recurrence(spec.job_id, "rec-b", request).why == "drift"
    _prepare(uri, "rec-b", tmp_path, spec)
    return bandit(store_uri=uri, job_id=spec.job_id, recurrence_id="rec-b", attempt=1, policy=POLICY).batch_size


def test_without_drift_the_walk_goes_on_down_from_the_default(tmp_path):
    uri = str(tmp_path / "store")
    assert second_recurrence_size(uri, tmp_path, SPEC) == 8
    assert open_store(uri).drift_recurrences(SPEC.job_id) == []


@pytest.mark.parametrize(("reaction", "expected"), [("window", 16), ("reexplore", 16), ("none", 8)])
def test_a_drift_at_the_new_recurrence_is_what_the_reaction_says(tmp_path, reaction, expected):
    """window forgets recurrence 1; reexplore too, restarting at the size cheapest before it (16, the only
    one); none goes on down."""
    spec = SPEC.with_changes(drift_reaction=reaction)
    uri = str(tmp_path / "store")
    assert second_recurrence_size(uri, tmp_path, spec, drift=True) == expected
    assert open_store(uri).drift_recurrences(SPEC.job_id) == [2]
    assert open_store(uri).get_job(SPEC.job_id).drift_reaction == reaction
