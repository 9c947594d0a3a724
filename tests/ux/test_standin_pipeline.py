"""The real-meter power search inside the pipeline, as a user runs it: `zeus-kfp run` with a plain script on a GPU
that behaves like the measured H200, reached through NVML.

The GPU is the stand-in NVML (zeus_kfp.simulate.nvml_standin): a simulated H200 fitted to a real one's sweep, its
state in a file that outlives every process of the run (the train steps, the script, the next recurrence). So
every figure is SIMULATED, and labelled so; what is real is everything else: the console script, kfp.local, the
components, the store, the runner reading the script's lines, the profiler's search on a real meter. The node's
clock advances only by the script's work, so the outcome does not depend on the machine's load.
"""

from __future__ import annotations

import pandas as pd
import pytest

from ux.cli_process import run_cli
from zeus_kfp.simulate import nvml_standin
from zeus_kfp.store import open_store

JOB = """job_id: standin
batch_sizes: [256]
default_batch_size: 256
target_metric: 0.95
max_epochs: 20
"""


@pytest.mark.slow
def test_the_real_meter_search_runs_in_the_pipeline_is_continued_across_trials_and_reused_across_recurrences(tmp_path):
    # The GPU is found at 300 W, as a trial killed mid-profile before this job might have left it.
    state = nvml_standin.create(tmp_path / "node.json", seed=3, speedup=20.0, limit_w=300.0)
    env = nvml_standin.shim_env(state, tmp_path / "shim")
    (tmp_path / "job.yaml").write_text(JOB)
    command = "{python} -m zeus_kfp.simulate.standin_train --batch-size {batch_size}"
    out = run_cli("run", "--command", command, "--spec", "job.yaml", "-r", "3", "--store", "store", "--runs-dir",
                  "runs", "--plots-dir", "plots", cwd=tmp_path, timeout=900, COLUMNS="160", **env)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    store = open_store(str(tmp_path / "store"))
    trials = store.trials("standin")
    assert list(trials["status"]) == ["reached"] * 3, trials[["status", "reason"]]
    assert (trials["source"] == nvml_standin.SOURCE).all() and trials["simulated"].all()
    assert "figures: simulated (NVML stand-in" in out.stdout
    assert store.get_job("standin").max_power_w == 700.0  # time priced at the stand-in's maximum, as on an H200

    profiles = store.profiles("standin")
    by_trial = {int(t): rows for t, rows in profiles.groupby("trial")}
    assert (profiles["gpu"] == nvml_standin.NAME).all()  # each row names the model that measured it
    first = by_trial[1]
    assert "ended while profiling" in trials.iloc[0]["reason"]  # one trial is too short for the whole search
    # The uncapped draw first (700 W), then nothing between it and the draw (about 307 W): limits above it bind not
    limits = set(first["power_limit_w"])
    assert 700.0 in limits and max(limits - {700.0}) <= 325.0 and len(limits) >= 2
    # The second trial continued the first's search: its stored profile holds the first's windows and more.
    second = by_trial[2]
    pd.testing.assert_frame_equal(second.iloc[: len(first)].reset_index(drop=True)[["power_limit_w", "throughput"]],
                                  first.reset_index(drop=True)[["power_limit_w", "throughput"]])  # fmt: skip
    assert len(second) > len(first)
    # By the third recurrence the search is over: the pick stands on two windows at it (confirmed), and the last
    # trial trained at it, either reusing the stored profile or finishing it.
    last = by_trial[max(by_trial)]
    pick = float(trials.iloc[-1]["power_limit_w"])
    assert (last["power_limit_w"] == pick).sum() >= 2
    assert 200.0 <= pick <= 325.0  # below the uncapped draw (about 307 W), where the curve's cost falls
    node = nvml_standin.Node(state).read()
    assert node["set_calls"][0] == 700.0  # the first act: the stale 300 W back to the default
    assert node["limit_w"] == 700.0  # and the GPU left at it
