"""The components' bodies, called undecorated (`.python_func`) with real artifacts and a real
local store: checks each body's wiring to zeus_kfp.steps without the cost of a pipeline run."""

import json

import pandas as pd
from kfp import dsl

from zeus_kfp.components.artifacts import PowerProfile
from zeus_kfp.components.bandit import bandit
from zeus_kfp.components.feedback import feedback
from zeus_kfp.components.gate import gate
from zeus_kfp.components.preprocess import preprocess
from zeus_kfp.components.train import train
from zeus_kfp.job import JobSpec, TrialResult, TrialStatus
from zeus_kfp.run_settings import RunSettings
from zeus_kfp.steps import NO_THRESHOLD, spec_to_params
from zeus_kfp.store import open_store

SPEC = JobSpec(job_id="comp-job", batch_sizes=(8, 16), default_batch_size=16, target_metric=0.9, max_epochs=2)


def test_preprocess_bandit_feedback_bodies(tmp_path):
    uri = str(tmp_path / "store")
    data = dsl.Dataset(uri=str(tmp_path / "data"), name="data")
    params = spec_to_params(SPEC.with_changes(beta_knob=None))  # the gate takes the settings, preprocess the job
    reads = dict(zeus_aware=False, metric_pattern="", metrics_collector="", keep="")
    run_id = dict(store_uri=uri, run_id="run-1", recurrence_id="")
    assert gate.python_func(**params, **spec_to_params(RunSettings()), **reads, **run_id, owner="me", force=False)
    out = preprocess.python_func(job_id=SPEC.job_id, **run_id, preprocess_ref="", data=data)
    assert JobSpec.from_dict(json.loads(out[0])) == SPEC.with_changes(beta_knob=None)
    assert tuple(out[1:]) == ("run-1", 1)
    assert (tmp_path / "data" / "README.txt").is_file()

    # What bandit and feedback of one attempt both take, as pipelines/dag.py passes it to both.
    trial_key = dict(store_uri=uri, job_id=SPEC.job_id, recurrence_id="run-1", attempt=1)

    def ask_bandit(name: str, reprofile: bool = False):
        reuse = dsl.Dataset(uri=str(tmp_path / name), name=name)
        out = bandit.python_func(
            **trial_key, policy="default", run_id="run-1", reprofile=reprofile, reuse_profile=reuse
        )
        return (*out, pd.read_parquet(reuse.path))

    size, threshold, trial, trial_seed, reuse = ask_bandit("reuse-1")
    assert size == SPEC.default_batch_size and trial == 1
    assert threshold == NO_THRESHOLD  # beta_knob disabled: no early-stop threshold
    assert reuse.empty and isinstance(trial_seed, int)  # nothing stored yet: the trial profiles

    profile = PowerProfile(uri=str(tmp_path / "profile"), name="profile")
    profile_path = tmp_path / "profile"
    pd.DataFrame(
        {
            "phase": ["train"],
            "power_limit_w": [300.0],
            "average_power_w": [250.0],
            "throughput": [10.0],
            "simulated": [True],
        }
    ).to_parquet(profile_path)
    result = TrialResult.build(
        SPEC, batch_size=size, status=TrialStatus.REACHED, time_s=3.0, energy_j=500.0, num_epochs=2, metric=0.95
    )
    reached = feedback.python_func(**trial_key, result_json=json.dumps(result.to_dict()), profile=profile)
    assert reached is True
    stored = open_store(uri).trials(SPEC.job_id)
    assert stored["status"].tolist() == ["reached"] and stored["cost"].iloc[0] == result.cost
    # A retried bandit step gets the same decision and seed; now the store holds batch size 16's
    # profile, so it hands it to train to reuse, unless a re-profile is asked for.
    again = ask_bandit("reuse-2")
    assert again[:4] == (size, threshold, trial, trial_seed)
    assert again[4]["power_limit_w"].tolist() == [300.0] and again[4]["average_power_w"].tolist() == [250.0]
    assert ask_bandit("reuse-3", reprofile=True)[4].empty


def test_train_body_takes_the_collector_spec_as_one_parameter(tmp_path):
    """A Katib-style spec (YAML text, as the KFP UI passes a string parameter) reaches run_trial."""
    script = tmp_path / "plain.py"
    script.write_text("import sys\nopen(sys.argv[1] + '/m.log', 'w').write('step=4 epoch=1 acc=0.95\\n')\n")
    collector = "collector: {kind: File}\nsource:\n  fileSystemPath: {path: '{log_dir}/m.log', kind: File}\n"

    def call(metrics_collector: str):
        artifacts = {
            name: kind(uri=str(tmp_path / name), name=name)
            for name, kind in (
                ("profile", PowerProfile),
                ("metrics", dsl.Metrics),
                ("model", dsl.Model),
                ("trial_log", dsl.Artifact),
            )
        }
        return train.python_func(
            spec_json=json.dumps(SPEC.with_changes(metric_name="acc").to_dict()),
            batch_size=8,
            cost_threshold=NO_THRESHOLD,
            command=["{python}", str(script), "{log_dir}"],
            zeus_aware=False,
            metric_pattern="",
            metrics_collector=metrics_collector,
            trial_backend="script",
            seed=1,
            data=dsl.Dataset(uri=str(tmp_path / "data"), name="data"),
            reuse_profile=dsl.Dataset(uri=str(tmp_path / "none"), name="reuse"),
            **artifacts,
        )

    (result_json,) = call(collector)
    result = TrialResult.from_json(result_json)
    assert (result.status.value, result.reached) == ("reached", True)
    kept = tmp_path / "trial_log"  # the trial's log: what the collector read, the runner's stdout, the result
    assert (kept / "m.log").read_text() == "step=4 epoch=1 acc=0.95\n" and (kept / "result.json").is_file()
    # A spec the step refuses fails the trial, naming the field; the step itself succeeds, so feedback records
    # the trial (no trial is left dispatched) and the recurrence ends.
    (result_json,) = call("collector: {kind: Custom}")
    result = TrialResult.from_json(result_json)
    assert (result.status.value, result.reached) == ("failed", False)
    assert "invalid input, the trial did not run: invalid metrics_collector.kind='Custom'" in result_json
