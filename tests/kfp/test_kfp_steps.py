"""The step logic (zeus_kfp.steps) without kfp, against a real local store and the real policy."""

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from zeus_kfp.job import JobSpec, JobSpecError, TrialResult, TrialStatus
from zeus_kfp.report import arm_frame
from zeus_kfp.run_settings import RunSettings
from zeus_kfp.steps import (
    NO_THRESHOLD,
    PASS_THROUGH_NOTE,
    StepError,
    run_preprocess,
    spec_from_params,
    spec_to_params,
    summarize,
    threshold_from_param,
)
from zeus_kfp.steps.bandit import bandit
from zeus_kfp.steps.feedback import feedback
from zeus_kfp.steps.gate import gate
from zeus_kfp.steps.preprocess import preprocess
from zeus_kfp.store import UnknownTrialError, open_store

POLICY = "zeus-nsdi23"
SPEC = JobSpec(job_id="steps-job", batch_sizes=(8, 16, 32, 64), default_batch_size=16, target_metric=0.9, max_epochs=4)


def _params(spec: JobSpec = SPEC) -> dict:
    return spec_to_params(spec)


def test_spec_params_round_trip_and_kfp_doubles():
    params = _params(SPEC.with_changes(beta_knob=None))
    assert params["beta_knob"] == 0.0
    # protobuf hands list ints over as doubles, the UI hands lists over as JSON text
    params["batch_sizes"] = "[8.0, 16.0, 32.0, 64.0]"
    params["default_batch_size"] = 16.0
    assert spec_from_params(**params) == SPEC.with_changes(beta_knob=None)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"batch_sizes": [8, 16.5]}, "batch_sizes"),
        ({"batch_sizes": "[8, 16"}, "batch_sizes"),
        ({"default_batch_size": 12}, "default_batch_size"),
        ({"eta_knob": 1.5}, "eta_knob"),
        ({"job_id": "Bad_ID"}, "job_id"),
        ({"learning_rate": 0.1}, "learning_rate"),
    ],
)
def test_bad_parameter_names_the_field_and_what_is_allowed(change, field):
    with pytest.raises(JobSpecError) as err:
        spec_from_params(**dict(_params(), **change))
    assert err.value.field == field
    assert "allowed" in str(err.value)


def test_threshold_sentinel():
    assert threshold_from_param(NO_THRESHOLD) is None
    assert threshold_from_param(12.5) == 12.5


def test_preprocess_pass_through_callable_and_command(tmp_path):
    run_preprocess("", tmp_path / "pass")
    assert (tmp_path / "pass" / "README.txt").read_text() == PASS_THROUGH_NOTE
    module = tmp_path / "prep.py"
    module.write_text("from pathlib import Path\ndef make(out):\n    (Path(out) / 'x.txt').write_text('made')\n")
    run_preprocess(f"{module}:make", tmp_path / "func")
    assert (tmp_path / "func" / "x.txt").read_text() == "made"
    script = "import sys, pathlib; pathlib.Path(sys.argv[1], 'y.txt').write_text('cmd')"
    run_preprocess(f'{sys.executable} -c "{script}" {{output}}', tmp_path / "cmd")
    assert (tmp_path / "cmd" / "y.txt").read_text() == "cmd"


def test_preprocess_failures_say_what_failed(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(StepError, match="exited with 3: boom"):
        run_preprocess(f"{sys.executable} {script} {{output}}", tmp_path / "out")
    with pytest.raises(StepError, match="not found"):
        run_preprocess(f"{tmp_path}/missing.py:make", tmp_path / "x")
    with pytest.raises(StepError, match="cannot import"):
        run_preprocess("no_such_module_zeus:make", tmp_path / "y")


def _prepare(store_uri: str, recurrence_id: str, tmp_path: Path, spec: JobSpec = SPEC, run_id: str = "kfp-run-id"):
    """One run's first two steps as the pipeline runs them: the gate (it takes the job's settings and opens the
    recurrence), then preprocess (it takes the job and the recurrence, and reads the spec from the store)."""
    gate(_params(spec), spec_to_params(RunSettings(period_s=0.0, max_running=5)), store_uri=store_uri,
         run_id=run_id, recurrence_id=recurrence_id, owner="tester", force=False)  # fmt: skip
    return preprocess(
        spec.job_id,
        store_uri=store_uri,
        run_id=run_id,
        recurrence_id=recurrence_id,
        data_dir=str(tmp_path / (recurrence_id or run_id)),
        preprocess_ref="",
    )


def test_preprocess_begins_the_recurrence_the_gate_opened_and_hands_on_the_stored_spec(tmp_path):
    uri = str(tmp_path / "store")
    spec_json, rid, number = _prepare(uri, "rec-a", tmp_path)
    assert JobSpec.from_dict(json.loads(spec_json)) == SPEC
    assert (rid, number) == ("rec-a", 1)
    assert _prepare(uri, "rec-a", tmp_path)[2] == 1  # a retried step: same recurrence
    assert _prepare(uri, "rec-b", tmp_path)[2] == 2
    assert open_store(uri).get_job(SPEC.job_id) == SPEC
    # the KFP run id is the recurrence id unless one is given
    assert _prepare(uri, "", tmp_path, run_id="run-uuid")[1] == "run-uuid"


def test_preprocess_hands_on_the_spec_its_recurrence_opened_under_not_its_own_idea_of_it(tmp_path):
    """The gate may replace the job's spec (no trial has reached yet): what the trials get is the store's."""
    uri = str(tmp_path / "store")
    _prepare(uri, "rec-a", tmp_path)
    open_store(uri).end_recurrence(SPEC.job_id, "rec-a", "ended by the test")
    changed = SPEC.with_changes(target_metric=0.95)
    spec_json, _, number = _prepare(uri, "rec-b", tmp_path, changed)
    assert (JobSpec.from_dict(json.loads(spec_json)), number) == (changed, 2)


def test_preprocess_refuses_a_recurrence_the_gate_did_not_open(tmp_path):
    uri = str(tmp_path / "store")
    _prepare(uri, "rec-a", tmp_path)  # still running: a run whose cap is 1 finds no free slot
    skipped = dict(store_uri=uri, run_id="r", data_dir=str(tmp_path / "d"), preprocess_ref="")
    gate(_params(), spec_to_params(RunSettings(period_s=0.0, max_running=1)), store_uri=uri, run_id="rec-z",
         recurrence_id="", owner="", force=False)  # fmt: skip
    with pytest.raises(UnknownTrialError, match="skipped by the recurrence gate"):
        preprocess(SPEC.job_id, recurrence_id="rec-z", **skipped)


def _finish(uri: str, rid: str, attempt: int, batch_size: int, status: TrialStatus, energy: float, tmp_path: Path):
    result = TrialResult.build(
        SPEC, batch_size=batch_size, status=status, time_s=10.0, energy_j=energy, num_epochs=2, power_limit_w=200.0
    )
    profile = pd.DataFrame(
        {
            "phase": ["train", "train"],
            "power_limit_w": [300.0, 200.0],
            "average_power_w": [280.0, 190.0],
            "throughput": [100.0, 90.0],
            "simulated": [True, True],
        }
    )
    path = tmp_path / f"{rid}-{attempt}.parquet"
    profile.to_parquet(path)
    return feedback(
        store_uri=uri,
        job_id=SPEC.job_id,
        recurrence_id=rid,
        attempt=attempt,
        result_json=result.to_json(),
        profile_path=str(path),
    )


def test_bandit_is_the_policy_and_feedback_records_everything(tmp_path):
    uri = str(tmp_path / "store")
    _prepare(uri, "rec-a", tmp_path)
    store = open_store(uri)
    outcomes = {8: TrialStatus.REACHED, 16: TrialStatus.NOT_REACHED, 32: TrialStatus.REACHED, 64: TrialStatus.REACHED}
    # Zeus's pruning walk, worked by hand: from b0 = 16 down (16 misses, which ends that direction),
    # then up: 32, then 64.
    walk = {1: 16, 2: 32, 3: 64}
    for attempt in (1, 2, 3):
        choice = bandit(store_uri=uri, job_id=SPEC.job_id, recurrence_id="rec-a", attempt=attempt, policy=POLICY)
        assert (choice.batch_size, choice.decision.stage) == (walk[attempt], "exploration")
        assert choice.trial == attempt
        again = bandit(store_uri=uri, job_id=SPEC.job_id, recurrence_id="rec-a", attempt=attempt, policy=POLICY)
        assert again == choice, "a retried bandit step must hand out the recorded decision"
        status = outcomes[choice.batch_size]
        reached = _finish(uri, "rec-a", attempt, choice.batch_size, status, 1000.0 * attempt, tmp_path)
        assert reached is (status is TrialStatus.REACHED)
        # feedback is safe to retry
        assert _finish(uri, "rec-a", attempt, choice.batch_size, status, 1000.0 * attempt, tmp_path) is reached
    trials = store.trials(SPEC.job_id)
    assert list(trials["attempt"]) == [1, 2, 3]
    assert trials["finished"].all()
    assert len(store.profiles(SPEC.job_id)) == 3 * 2
    # The bandit's state is the policy's view of what the steps recorded (nothing derived is stored): the
    # walk above, one round done: 16 missed and 8 was never walked to (pruned), 32 and 64 survive it.
    state = arm_frame(SPEC, store.history(SPEC.job_id), POLICY).set_index("batch_size")
    assert state.index.tolist() == list(SPEC.batch_sizes)
    assert state["stage"].to_dict() == {8: "pruned", 16: "pruned", 32: "exploration", 64: "exploration"}
    assert state["num_observations"].to_dict() == {8: 0, 16: 1, 32: 1, 64: 1}
    summary = summarize(trials, SPEC.job_id, "rec-a", wall_s=1.0)
    assert summary.recurrence == 1 and summary.batch_sizes == list(trials["batch_size"])
    assert summary.energy_j == pytest.approx(6000.0)
    assert summary.simulated is False  # simulated is a property of the result, which said False


def test_a_twin_bandit_step_that_dispatched_first_has_its_decision_handed_out(tmp_path, monkeypatch):
    """Two steps of one attempt (a step KFP started twice) both find no dispatch and decide: the store keeps
    the first dispatch, and the second step must hand out that one, not its own, or train would run a trial
    the store does not hold."""
    from zeus_kfp.policy.base import Decision
    from zeus_kfp.store import Store

    uri = str(tmp_path / "store")
    _prepare(uri, "rec-a", tmp_path)
    twin = Decision(64, None, "exploration", "the twin's decision")
    open_store(uri).dispatch_trial(SPEC.job_id, "rec-a", 1, twin)
    monkeypatch.setattr(Store, "get_dispatch", lambda *args, **kwargs: None)  # looked before the twin wrote
    choice = bandit(store_uri=uri, job_id=SPEC.job_id, recurrence_id="rec-a", attempt=1, policy=POLICY)
    assert choice.decision == twin and choice.batch_size == 64 and choice.trial == 1
    assert open_store(uri).trials(SPEC.job_id)["batch_size"].tolist() == [64]
