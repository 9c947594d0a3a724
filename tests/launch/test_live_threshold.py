"""The mid-trial early stop, live: the train step runs a real Zeus-aware script (ZeusDataLoader, torch, the
simulated GPU's model clock) against a real store, and a result another recurrence writes to that store
while the trial runs stops the trial at its next epoch end.

No sleep is a synchronisation: the script itself writes the concurrent result at the end of its first epoch
(a hook of the test's script), then waits until the live threshold file it was handed (ZEUS_THRESHOLD_FILE)
shows a threshold, which the step's feed writes once it has read the result; only then does it end the
epoch. So the second epoch's check always sees it.
"""

from __future__ import annotations

import json
import socket
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from zeus_kfp.job import Decision, JobSpec, TrialResult, TrialStatus
from zeus_kfp.steps.request import TrialRequest
from zeus_kfp.steps.threshold_feed import ThresholdFeed
from zeus_kfp.steps.train import train
from zeus_kfp.store import open_store
from zeus_kfp.train.live_threshold import current_threshold, read_live_threshold, write_live_threshold

# beta 2; the target (0.99) is never met (the script reports 0.1), so without an early stop the trial runs
# its 3 epochs; with no reached recurrence when it is dispatched, it has no threshold (a first-wave trial).
SPEC = JobSpec("live", (8, 16), 8, 0.99, max_epochs=3, beta_knob=2.0, max_power_w=250.0, metric_name="accuracy")
# The concurrent recurrence's trial: 0.5 x 0.002 J + 0.5 x 250 W x 0.000004 s = 0.0015 spent, so the
# threshold becomes 2 x 0.0015 = 0.003, below any epoch of the script.
CONCURRENT = {"energy_j": 0.002, "time_s": 0.000004}

SCRIPT = """
import dataclasses, json, os, sys, time
from pathlib import Path
import torch
from torch.utils.data import TensorDataset
from zeus_kfp.job import Decision, JobSpec, TrialResult, TrialStatus
from zeus_kfp.store import open_store
from zeus_kfp.train import TrialEnv
from zeus_kfp.train.dataloader import ZeusDataLoader

store_dir, spec_json, concurrent = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
wait = sys.argv[4:5] != ["no-wait"]  # for the threshold file after writing the concurrent result
env = dataclasses.replace(TrialEnv.from_env(), use_optimal_limit=False)
g = torch.Generator().manual_seed(0)
data = TensorDataset(torch.randn(64, 4, generator=g), torch.randint(0, 2, (64,), generator=g))
loader = ZeusDataLoader(data, env=env, shuffle=False)
for epoch in loader.epochs():
    sum(1 for _ in loader)
    if epoch == 0 and concurrent:
        spec = JobSpec.from_dict(json.loads(spec_json))
        store = open_store(store_dir)
        store.begin_recurrence(spec.job_id, "concurrent")
        store.dispatch_trial(spec.job_id, "concurrent", 1, Decision(16, None, "exploration", ""))
        result = TrialResult.build(spec, batch_size=16, status=TrialStatus.REACHED, num_epochs=1,
                                   power_limit_w=250.0, simulated=True, **concurrent)
        store.finish_trial(spec.job_id, "concurrent", 1, result)
        path = Path(os.environ["ZEUS_THRESHOLD_FILE"])
        for _ in range(6000):  # the feed's write, not a time, ends this wait (a 10-minute bound: then fail)
            if path.exists() or not wait:
                break
            time.sleep(0.1)
        else:
            sys.exit("the live threshold file never came")
    loader.report_metric(0.1)
"""


@dataclass
class Artifact:
    path: str
    metadata: dict = field(default_factory=dict)


class Metrics:
    def log_metric(self, metric: str, value: float) -> None:
        pass


def _train_step(tmp_path: Path, store_uri: str, concurrent: dict, *script_args: str, **launch) -> TrialResult:
    """The train step of recurrence "running", attempt 1, dispatched with no threshold into `tmp_path/store`, its
    script given the `concurrent` result to write and `script_args`; `launch`: the request's launch fields."""
    store = open_store(str(tmp_path / "store"))
    store.ensure_job(SPEC)
    store.begin_recurrence(SPEC.job_id, "running")
    store.dispatch_trial(SPEC.job_id, "running", 1, Decision(8, None, "exploration", "the first wave"))
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    spec_json = json.dumps(SPEC.to_dict())
    request = TrialRequest(
        spec_json=spec_json,
        batch_size=8,
        cost_threshold=-1.0,  # none
        command=[
            sys.executable,
            str(script),
            str(tmp_path / "store"),
            spec_json,
            json.dumps(concurrent or None),
            *script_args,
        ],
        zeus_aware=True,
        metric_pattern="",
        metrics_collector="",
        trial_backend="script",
        seed=0,
        store_uri=store_uri,
        recurrence_id="running",
        attempt=1,
        **launch,
    )
    artifacts = {name: Artifact(str(tmp_path / name)) for name in ("profile.parquet", "model")}
    return train(
        request,
        data_dir="",
        profile=artifacts["profile.parquet"],
        metrics=Metrics(),
        model=artifacts["model"],
        gpu="simulated",
    )


def test_a_result_written_by_another_recurrence_during_the_trial_stops_it_at_the_next_epoch_end(tmp_path):
    result = _train_step(tmp_path, str(tmp_path / "store"), CONCURRENT)
    assert result.status is TrialStatus.COST_EXCEEDED, result.reason
    assert result.num_epochs == 1  # epoch 1 ran; the check before epoch 2 read the new threshold
    assert "the threshold 0.0 (the job's early stop, moved since dispatch)" in result.reason


def test_without_a_concurrent_result_the_same_trial_runs_its_epochs(tmp_path):
    result = _train_step(tmp_path, str(tmp_path / "store"), {})
    assert (result.status, result.num_epochs) == (TrialStatus.NOT_REACHED, 3)


def test_a_store_the_step_cannot_reach_never_stops_the_trial(tmp_path, monkeypatch):
    with socket.socket() as sock:  # a port nobody listens on: every read of the store is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for name, value in {
        "ZEUS_S3_ENDPOINT": f"127.0.0.1:{port}",
        "ZEUS_S3_ACCESS_KEY": "nobody",
        "ZEUS_S3_SECRET_KEY": "nothing",
        "ZEUS_S3_MAX_ATTEMPTS": "1",
        "ZEUS_S3_RETRY_BUDGET_S": "1",
    }.items():
        monkeypatch.setenv(name, value)
    result = _train_step(tmp_path, "s3://unreachable-store/zeus", {})
    assert (result.status, result.num_epochs) == (TrialStatus.NOT_REACHED, 3)


def test_the_feed_writes_only_a_lower_threshold_and_the_reader_keeps_the_dispatched_one_otherwise(tmp_path):
    store = open_store(str(tmp_path / "store"))
    store.ensure_job(SPEC)
    path = tmp_path / "live.json"
    feed = ThresholdFeed(store.uri, SPEC, 0.01, path)
    assert feed.update(store) is None and not path.exists()  # nothing has reached
    store.begin_recurrence(SPEC.job_id, "done")
    store.dispatch_trial(SPEC.job_id, "done", 1, Decision(16, None, "exploration", ""))
    result = TrialResult.build(
        SPEC, batch_size=16, status=TrialStatus.REACHED, num_epochs=1, power_limit_w=250.0, simulated=True, **CONCURRENT
    )
    store.finish_trial(SPEC.job_id, "done", 1, result)
    assert feed.update(store) == pytest.approx(0.003)
    assert read_live_threshold(path) == pytest.approx(0.003)
    assert current_threshold(None, path) == pytest.approx(0.003) and current_threshold(0.001, path) == 0.001
    assert ThresholdFeed(store.uri, SPEC, 0.002, tmp_path / "not-lower.json").update(store) == pytest.approx(0.003)
    assert not (tmp_path / "not-lower.json").exists()  # 0.003 is above the dispatched 0.002: nothing to say
    for junk in ("", "{", '{"threshold": "x"}', '{"threshold": -1}', '{"threshold": Infinity}', "[]"):
        path.write_text(junk)
        assert current_threshold(5.0, path) == 5.0 and current_threshold(None, path) is None, junk
    write_live_threshold(path, 4.0)
    assert current_threshold(5.0, path) == 4.0 and current_threshold(None, tmp_path / "missing.json") is None


@pytest.mark.parametrize("any_store_uri", ["local", "least-privilege", "ignored"], indirect=True)
@pytest.mark.parametrize(("policy", "expected"), [("zeus-nsdi23", 2 * 0.0015), ("turning-walk", 2 * 0.00225)])
def test_the_feed_follows_the_policys_own_early_stop_rule(tmp_path, any_store_uri, policy, expected):
    """Two recurrences reached at bs 16, spending 0.0015 and 0.003 (energy 0.002 and 0.005 J, same time).
    zeus-nsdi23 stops at beta x the cheapest recurrence, 2 x 0.0015; turning-walk at beta x the size's mean,
    2 x 0.00225. A running trial under turning-walk must not be cut by Zeus's lower rule. On a local store and
    on S3 as Kubeflow ships it (1.11's namespaced key, 1.10's MinIO that ignores conditions): one read of the
    log per poll, which a read-only, namespaced key allows."""
    store = open_store(any_store_uri)
    store.ensure_job(SPEC)
    for rid, energy in (("one", 0.002), ("two", 0.005)):
        store.begin_recurrence(SPEC.job_id, rid)
        store.dispatch_trial(SPEC.job_id, rid, 1, Decision(16, None, "exploration", ""))
        result = TrialResult.build(
            SPEC, batch_size=16, status=TrialStatus.REACHED, num_epochs=1, power_limit_w=250.0, simulated=True,
            energy_j=energy, time_s=0.000004,
        )  # fmt: skip
        store.finish_trial(SPEC.job_id, rid, 1, result)
    path = tmp_path / f"{policy}.json"
    assert ThresholdFeed(store.uri, SPEC, None, path, policy=policy).update(store) == pytest.approx(expected)
    assert read_live_threshold(path) == pytest.approx(expected)
