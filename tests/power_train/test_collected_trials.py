"""Plain scripts whose metrics a collector reads, run as whole trials on the simulated GPU: profiled on
the model clock from the step counter they report, measured but unprofiled without one, failed with
the collector's name when the metric never comes, and stopped early by Zeus's cost rule exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.power_train.scripts import write_script
from zeus_kfp.job import JobSpec, JobSpecError, TrialStatus
from zeus_kfp.power import PowerModel
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.train import run_trial

SPEC = JobSpec(job_id="collect-test", batch_sizes=(8, 16), default_batch_size=8, target_metric=0.9, max_epochs=5)


def plain_trial(tmp_path: Path, body: str, collector, **kw):
    kw.setdefault("cost_threshold", None)
    return run_trial(
        SPEC,
        batch_size=8,
        command=[*write_script(tmp_path, "train.py", body), *kw.pop("args", [])],
        work_dir=tmp_path / "work",
        zeus_aware=False,
        gpu="simulated",
        collector=collector,
        warmup_iters=1,
        profile_iters=2,
        **kw,
    )


def test_a_json_file_with_a_step_counter_is_profiled_on_the_model_clock(tmp_path):
    out = plain_trial(
        tmp_path,
        """
        import json, sys
        with open(sys.argv[1] + "/metrics.jsonl", "w") as f:
            for step in range(1, 41):
                f.write(json.dumps({"metric": "loss", "value": 1 / step, "step": step}) + "\\n")
                if step % 20 == 0:
                    f.write(json.dumps({"metric": "accuracy", "value": step / 40 - 0.05, "epoch": step // 20}) + "\\n")
        """,
        {"kind": "file", "source": {"fileSystemPath": {"path": "{log_dir}/metrics.jsonl", "format": "json"}}},
        args=["{log_dir}"],
    )
    assert out.result.status is TrialStatus.REACHED, out.log_tail
    assert (out.result.num_epochs, out.result.metric) == (2, 0.95)
    # 40 steps of 8 samples on the model clock: 7 limits x (1 + 2) steps = 21 steps profile, then the optimum.
    assert out.result.source == "simulated (GPU model)" and len(out.profile) == 7
    assert out.result.time_s > 0 and "step counter, 8 samples a step" in out.result.reason


def test_a_prometheus_endpoint_on_a_port_the_runner_picks(tmp_path):
    out = plain_trial(
        tmp_path,
        """
        import os, sys, time
        from prometheus_client import CollectorRegistry, Gauge, start_http_server
        registry = CollectorRegistry()
        accuracy = Gauge("accuracy", "validation accuracy", registry=registry)
        accuracy.set(0.95)
        assert sys.argv[1] == os.environ["ZEUS_METRICS_PORT"]
        start_http_server(int(sys.argv[1]), addr="127.0.0.1", registry=registry)
        time.sleep(60)  # the runner stops it once it has scraped the target
        """,
        {"kind": "prometheus", "source": {"httpGet": {"port": 0}}, "intervalSeconds": 0.05},
        args=["{metrics_port}"],
    )
    assert out.result.status is TrialStatus.REACHED and out.result.metric == 0.95, out.log_tail
    # no step or epoch series: each report of the metric is the unit, and the trial is profiled all the same
    assert "throughput from the metric's reports" in out.result.reason and not out.profile.is_empty


def test_a_script_that_never_reports_the_metric_fails_naming_the_collector(tmp_path):
    out = plain_trial(
        tmp_path,
        "import sys\nopen(sys.argv[1] + '/m.log', 'w').write('loss=0.3\\n')\n",
        {"kind": "file", "source": {"fileSystemPath": {"path": "{log_dir}/m.log"}}},
        args=["{log_dir}"],
    )
    assert out.result.status is TrialStatus.FAILED
    assert out.result.reason.startswith("file collector (") and "never reported 'accuracy'" in out.result.reason
    missing = plain_trial(tmp_path, "pass\n", {"kind": "tfEvent", "source": {"fileSystemPath": {"path": "tb"}}})
    assert missing.result.status is TrialStatus.FAILED
    assert "tfEvent collector (" in missing.result.reason and "never created" in missing.result.reason
    with pytest.raises(JobSpecError, match=r"metrics_collector\.kind"):
        plain_trial(tmp_path, "pass\n", {"kind": "none"})


def test_zeus_early_stop_from_collected_values_is_exact_on_the_model_clock(tmp_path):
    """A stored profile holds 250 W from the start, so every step costs the model's step at 250 W:
    10 steps an epoch; a threshold of 15 steps' cost stops the trial before epoch 2 (10 + 10 > 15)."""
    seconds, joules = PowerModel().step(250.0, 8)
    step_cost = SPEC.cost_model.cost(joules, seconds)
    held = PowerProfile.of(  # complete (every limit of the simulated GPU), 250 W by far the cheapest
        [
            {"phase": "train", "power_limit_w": w, "average_power_w": 200.0, "throughput": 1e4 if w == 250 else 1.0,
             "simulated": True, "gpu": PowerModel().name}
            for w in (250.0, 225.0, 200.0, 175.0, 150.0, 125.0, 100.0)
        ]
    )  # fmt: skip
    out = plain_trial(
        tmp_path,
        """
        import time
        for epoch in range(1, 6):
            for step in range(10 * epoch - 9, 10 * epoch + 1):
                print(f"step={step}", flush=True)
            print(f"epoch={epoch} step={10 * epoch} accuracy=0.1", flush=True)
            time.sleep(0.2)  # a stop that came late would see more epochs; the stop rule sees epoch 1 only
        """,
        None,
        cost_threshold=15 * step_cost,
        reuse_profile=held,
    )
    assert out.result.status is TrialStatus.COST_EXCEEDED and out.result.num_epochs == 1, out.log_tail
    assert out.result.time_s == pytest.approx(10 * seconds, rel=1e-12)
    assert out.result.power_limit_w == 250.0 and out.result.cost == pytest.approx(10 * step_cost, rel=1e-12)
    assert f"stopped before epoch 2: predicted cost {20 * step_cost:.1f} would pass the threshold" in out.result.reason
