"""TensorBoard across recurrences: the report step appends each recurrence's scalars to the job's
log directory in the store, and `zeus-kfp tensorboard example` syncs and serves them.

The store holds the hand-built three recurrences of ux/frames.py (numbers worked out there and in
test_report.py); they are read back with the tfEvent collector's reader (TensorBoard's own), and
once through a real TensorBoard server that the command starts on 127.0.0.1, port 0.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ux.frames import SPEC
from ux.store_data import populate
from zeus_kfp.cli.application import app
from zeus_kfp.steps.report import report
from zeus_kfp.store import keys, open_store
from zeus_kfp.train.collectors.tfevent import TFEventCollector

EXAMPLE = SPEC.with_changes(job_id="example")
BASELINE = 25000.0 * 2.9 / 2.75  # test_report.py: the default config's cost, scaled to max power


class Sink:
    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def log_metric(self, metric: str, value: float) -> None:
        self.values[metric] = value


@pytest.fixture(scope="module")
def three_reports(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store with three recurrences of job "example", each reported by the report step (shared: read only)."""
    tmp_path = tmp_path_factory.mktemp("reports")
    uri = str(tmp_path / "store")
    populate(open_store(uri), spec=EXAMPLE)
    for rid in ("run-1", "run-2", "run-3", "run-1"):  # run-1 twice: a retried report step
        report(
            store_uri=uri,
            job_id="example",
            recurrence_id=rid,
            reached=True,
            markdown_path=str(tmp_path / rid),
            metrics=Sink(),
        )
    return uri


def by_tag(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Each tag's (step, value) points, read as Katib's collector reads a job's metric (only the job's metric's
    own tag carries its steps)."""
    tags = {obs.metric for obs in TFEventCollector(run_dir).finish()}
    return {
        tag: sorted((obs.step, obs.value) for obs in TFEventCollector(run_dir, tag).finish() if obs.metric == tag)
        for tag in tags
    }


def test_three_recurrences_synced_by_zeus_kfp_tensorboard(three_reports, tmp_path):
    store = open_store(three_reports)
    assert len(store.tensorboard_logs("example")) == 3  # the retried report step added nothing
    result = CliRunner().invoke(
        app, ["tensorboard", "example", "--store", three_reports, "--logdir", str(tmp_path / "tb"), "--no-serve"]
    )
    assert result.exit_code == 0, result.output
    assert "synced 3 recurrence(s) of example" in result.output
    tags = by_tag(tmp_path / "tb" / "example")
    assert tags["recurrence/cost"] == [(1, 25000.0), (2, 22000.0), (3, 13750.0)]
    assert tags["recurrence/energy_j"] == [(1, 20000.0), (2, 17000.0), (3, 11000.0)]
    assert tags["recurrence/time_s"] == [(1, 100.0), (2, 90.0), (3, 55.0)]
    assert tags["recurrence/trials"] == [(1, 1.0), (2, 2.0), (3, 1.0)]
    assert tags["recurrence/reached"] == [(1, 1.0), (2, 1.0), (3, 1.0)]
    assert tags["recurrence/batch_size"] == [(1, 128.0), (2, 256.0), (3, 256.0)]  # the trial that reached
    assert tags["recurrence/power_limit_w"] == [(1, 200.0), (2, 200.0), (3, 200.0)]
    assert tags["recurrence/simulated"] == [(1, 1.0), (2, 1.0), (3, 1.0)]
    assert [step for step, _ in tags["recurrence/default_cost"]] == [1, 2, 3]
    assert [value for _, value in tags["recurrence/default_cost"]] == pytest.approx([BASELINE] * 3, rel=1e-6)
    # The default policy's posterior after each recurrence, from the history through its last trial: 128
    # from recurrence 1; 64's miss charged the retry at 256 it forced (7,000 + 15,000 J) and 256 from 2;
    # 256 twice in 3, (15,000 + 13,750) / 2.
    assert tags["posterior_mean/batch_size_128"] == [(1, 25000.0), (2, 25000.0), (3, 25000.0)]
    assert tags["posterior_mean/batch_size_64"] == [(2, 22000.0), (3, 22000.0)]
    assert tags["posterior_mean/batch_size_256"] == [(2, 15000.0), (3, 14375.0)]
    assert not any(tag.endswith("_32") for tag in tags)  # an arm without a posterior mean is left out
    report = (Path(three_reports).parent / "run-3").read_text()
    assert f"{store.uri}/{keys.tensorboard_dir('example')}" in report and "zeus-kfp tensorboard example" in report


def test_each_stored_event_file_is_the_bytes_tensorboards_own_record_writer_frames(three_reports):
    """The report step frames its events itself (zeus_kfp.report.tensorboard.tf_record): the bytes of every stored
    file are those TensorBoard's RecordWriter writes for the same events, CRCs and all."""
    import io

    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.summary.writer.record_writer import RecordWriter

    files = open_store(three_reports).tensorboard_logs("example")
    assert len(files) == 3
    for name, data in files.items():
        path = Path(three_reports).parent / name
        path.write_bytes(data)
        events = list(RawEventFileLoader(str(path)).Load())  # TensorBoard's reader, which checks each CRC
        assert len(events) == 2, name
        framed = io.BytesIO()
        writer = RecordWriter(framed)
        for event in events:
            writer.write(event)
        assert framed.getvalue() == data, name


def test_unknown_job_and_a_job_without_logs_say_so(tmp_path):
    uri = str(tmp_path / "store")
    populate(open_store(uri), spec=EXAMPLE)
    runner = CliRunner()
    result = runner.invoke(app, ["tensorboard", "example", "--store", uri, "--logdir", str(tmp_path), "--no-serve"])
    assert result.exit_code == 2 and "has no TensorBoard logs" in result.output
    result = runner.invoke(app, ["tensorboard", "nope", "--store", uri, "--logdir", str(tmp_path), "--no-serve"])
    assert result.exit_code == 2 and "zeus-kfp jobs --store" in result.output


@pytest.mark.slow
def test_zeus_kfp_tensorboard_serves_the_scalars_on_127_0_0_1(three_reports, tmp_path):
    command = [str(Path(sys.executable).parent / "zeus-kfp"), "tensorboard", "example", "--store", three_reports]
    proc = subprocess.Popen(
        [*command, "--logdir", str(tmp_path / "tb"), "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url, seen = None, []
        deadline = time.monotonic() + 120  # only a hung server waits this long
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            found = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
            url = found.group(1) if found else None
        assert url, "".join(seen)
        query = "data/plugin/scalars/scalars?run=example&tag=recurrence/cost"
        with urllib.request.urlopen(url + query, timeout=30) as response:
            points = json.loads(response.read())
    finally:
        proc.terminate()
        proc.wait(10)
    assert [(step, value) for _wall, step, value in points] == [(1, 25000.0), (2, 22000.0), (3, 13750.0)]
