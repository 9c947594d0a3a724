"""End to end through kfp.local (SubprocessRunner) against the S3 server: the real components,
the real store on S3, the real policy and real torch training of the example."""

import sys
from pathlib import Path

import pytest

from zeus_kfp.job import Decision, TrialResult, TrialStatus
from zeus_kfp.pipelines.local import LocalRunError, TrialFailed, run_local
from zeus_kfp.power import PowerModel, SimulatedGPU, candidate_limits
from zeus_kfp.power.selection import choose_limit
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.report import arm_frame
from zeus_kfp.store import JobSpecMismatchError, keys, open_store
from zeus_kfp.train import example_spec

# Batch size 1024 cannot reach 0.85 accuracy in 3 epochs, 128 can: the default config misses the
# target, so the first recurrence needs the retry loop, and the bandit must learn to avoid 1024.
SPEC = example_spec("e2e-job").with_changes(batch_sizes=(128, 1024), default_batch_size=1024, max_epochs=3)


@pytest.mark.slow
def test_three_recurrences_retry_loop_and_store(s3_store_uri, tmp_path):
    seen = []
    summaries = run_local(
        SPEC, recurrences=3, store=s3_store_uri, attempts=3, runs_dir=tmp_path, on_recurrence=seen.append
    )
    assert seen == summaries and [s.recurrence for s in summaries] == [1, 2, 3]
    # Worked by hand: 1024 (the default) misses and is retried at 128, the one other size, which reaches.
    # From then on the policy exploits 128, the only size that ever reached the target (a miss at 1024
    # looks cheap, cut off at max_epochs, but it is never exploited while another size has reached).
    assert [s.batch_sizes for s in summaries] == [[1024, 128], [128], [128]]
    assert [t.status for t in summaries[0].trials] == [TrialStatus.NOT_REACHED.value, TrialStatus.REACHED.value]
    assert all(s.reached for s in summaries)

    store = open_store(s3_store_uri)
    spec = store.get_job(SPEC.job_id)
    assert spec == SPEC.with_changes(max_attempts=3)
    assert SPEC.job_id in set(store.list_jobs(phase="completed")["job_id"]), "the report step completes the job"
    assert SPEC.job_id not in set(store.list_jobs(phase="running")["job_id"])
    trials = store.trials(SPEC.job_id)
    assert trials["finished"].all() and len(trials) == sum(len(s.trials) for s in summaries)
    assert trials["simulated"].all(), "no GPU here: every figure is from the simulated GPU"
    profiles = store.profiles(SPEC.job_id)
    # Recurrence 1's trials ended mid-sweep (1024 after 3 of 7 limits, 128 after 6): recurrence 2's trial at 128
    # continues 128's profile, measures its last limit and stores it grown (7 limits); recurrence 3 trains at
    # that complete profile's optimum and stores none.
    assert set(profiles["trial"]) == {1, 2, 3} and profiles["simulated"].all()
    assert profiles.groupby("trial")["phase"].apply(lambda p: int((p == "train").sum())).to_dict() == {1: 3, 2: 6, 3: 7}
    assert trials["power_limit_w"].iloc[2:].tolist() == [trials["power_limit_w"].iloc[1]] * 2
    # Each profiling trial ran at the simulated GPU's exhaustive optimum for its batch size among the limits
    # it measured, from the top (the model's own curves, not the profiler: trial 1 stopped after 3 of 7),
    # and its stored profile chooses that limit too (what the report's plot stars).
    limits, ran_at = candidate_limits(SimulatedGPU()), trials.set_index("trial")["power_limit_w"]
    for trial, rows in profiles.groupby("trial"):
        measured = limits[: int((rows["phase"] == "train").sum())]
        batch = int(trials.set_index("trial").loc[trial, "batch_size"])
        assert ran_at[trial] == PowerModel().optimal_limit(measured, spec.cost_model.cost, samples=batch), trial
        assert choose_limit(PowerProfile.of(rows), spec.cost_model.rate) == ran_at[trial], trial
    # Where the bandit stands, from the history (run_local's policy is the default): exploiting 128,
    # the only size that reached; 1024 pruned.
    state = arm_frame(spec, store.history(SPEC.job_id)).set_index("batch_size")
    assert state["stage"].to_dict() == {128: "exploitation", 1024: "pruned"}
    assert state["num_observations"].to_dict() == {128: 3, 1024: 1}

    # the report step wrote each recurrence's Markdown and Metrics from the store, once, after its last attempt
    for s in summaries:
        reports = sorted((tmp_path / SPEC.job_id / s.recurrence_id).rglob("report-after-attempt-*/markdown"))
        assert [p.parent.name for p in reports] == [f"report-after-attempt-{len(s.trials)}"]
        assert "simulated" in reports[0].read_text().lower()
        assert keys.tensorboard_dir(SPEC.job_id) in reports[0].read_text()

    # TensorBoard across recurrences, synced from the S3 store: one step per recurrence, its cost.
    from zeus_kfp.cli.tensorboard_cmd import sync_logs
    from zeus_kfp.train.collectors.tfevent import TFEventCollector

    run_dir = sync_logs(store, SPEC.job_id, tmp_path / "tb")
    cost_tag = "recurrence/cost"  # read as the job's metric: its own tag carries its steps
    costs = sorted((o.step, o.value) for o in TFEventCollector(run_dir, cost_tag).finish() if o.metric == cost_tag)
    assert [step for step, _ in costs] == [1, 2, 3]
    assert [cost for _, cost in costs] == pytest.approx([s.cost for s in summaries], rel=1e-6)  # float32 in events


@pytest.mark.slow
def test_failing_training_script_is_recorded_not_lost(tmp_path):
    script = tmp_path / "crash.py"
    script.write_text("import sys\nprint('loading', flush=True)\nsys.exit('CUDA kernel exploded (test)')\n")
    store_uri = str(tmp_path / "store")
    with pytest.raises(TrialFailed) as failed:  # the script's own failure: not retried, and the run stops
        run_local(
            SPEC.with_changes(job_id="e2e-crash"),
            recurrences=2,
            store=store_uri,
            command=[sys.executable, str(script)],
            preprocess="",
            attempts=2,
            runs_dir=tmp_path / "runs",
        )
    (summary,) = failed.value.summaries
    assert not summary.reached and [t.status for t in summary.trials] == ["failed"]
    assert "CUDA kernel exploded (test)" in failed.value.trial.reason
    assert (Path(failed.value.log) / "stderr.log").read_text() == "CUDA kernel exploded (test)\n"  # its log, kept
    trials = open_store(store_uri).trials("e2e-crash")
    assert list(trials["status"]) == ["failed"]


def test_a_changed_spec_of_a_settled_job_is_refused_before_any_step(tmp_path):
    """A trial reached the target under the stored spec: a changed one is refused in this process, before kfp.local
    runs a step (a job whose trials never reached takes it instead: tests/ux/test_first_week.py)."""
    store_uri = str(tmp_path / "store")
    stored = SPEC.with_changes(max_attempts=3)
    store = open_store(store_uri)
    store.ensure_job(stored)
    store.begin_recurrence(SPEC.job_id, "r1")
    store.dispatch_trial(SPEC.job_id, "r1", 1, Decision(128, None, "exploration", "test"))
    store.finish_trial(SPEC.job_id, "r1", 1, TrialResult.build(stored, batch_size=128, status="reached", time_s=1.0,
                                                               energy_j=1.0, num_epochs=2))  # fmt: skip
    with pytest.raises(JobSpecMismatchError, match=r"target_metric: 0\.85 -> 0\.9.*zeus-kfp delete e2e-job"):
        run_local(SPEC.with_changes(target_metric=0.9), store=store_uri, attempts=3, runs_dir=tmp_path)
    assert len(open_store(store_uri).trials(SPEC.job_id)) == 1 and not (tmp_path / SPEC.job_id).exists()


def test_a_failing_step_raises_with_its_message(tmp_path):
    """A preprocess that cannot run fails the recurrence with the step's own error, not just 'task failed'."""
    with pytest.raises(LocalRunError, match="cannot import preprocess module 'no_such_zeus_module'"):
        run_local(
            SPEC.with_changes(job_id="e2e-badprep"),
            recurrences=1,
            store=str(tmp_path / "store"),
            preprocess="no_such_zeus_module:make",
            attempts=1,
            runs_dir=tmp_path / "runs",
        )


def test_bad_arguments_name_the_field(tmp_path):
    with pytest.raises(ValueError, match="invalid recurrences=0"):
        run_local(SPEC, recurrences=0, store=str(tmp_path))
    with pytest.raises(ValueError, match="invalid policy='greedy'"):
        run_local(SPEC, policy="greedy", store=str(tmp_path))


def test_interpreter_path_travels_as_a_token():
    """kfp.local rewrites 'python3' inside step arguments; our own interpreter becomes {python}."""
    from zeus_kfp.pipelines.local import portable_command

    assert portable_command([sys.executable, "/opt/train.py", "--x"]) == ["{python}", "/opt/train.py", "--x"]
    with pytest.raises(ValueError, match=r"invalid command=.*'python3'"):
        portable_command(["/usr/bin/python3", "train.py"])
