"""Each collector against a real producer (a subprocess), yielding what the producer emitted.

Producers that must not outrun the collector (a file rotated away before it was read, a
Prometheus value overwritten before it was scraped) wait for the test's acknowledgement
(`ack<n>` files) before going on, so what is collected never depends on timing. The expected
observations are written out by hand beside each producer.
"""

from __future__ import annotations

import json
import socket
import textwrap
import time
from pathlib import Path

import pytest

from tests.power_train.scripts import write_script
from zeus_kfp.train.collectors import (
    CollectorError,
    CollectorSpec,
    CollectorSpecError,
    Observation,
    StdoutCollector,
    text_observations,
)
from zeus_kfp.train.collectors.file import FileCollector
from zeus_kfp.train.collectors.prometheus import PrometheusCollector
from zeus_kfp.train.collectors.tfevent import TFEventCollector
from zeus_kfp.train.process import CapturedProcess

KATIB = CollectorSpec().patterns()
HANG_S = 60.0  # only a hung producer makes a test wait this long; outcomes never depend on it


ACK_WAIT = """
import pathlib, sys, time
def wait_ack(n):
    deadline = time.monotonic() + 60
    while not pathlib.Path(sys.argv[-1], f"ack{n}").exists():
        if time.monotonic() > deadline:
            sys.exit("no ack")
        time.sleep(0.005)
"""


def collect_with_acks(collector, proc: CapturedProcess, ack_dir: Path, ack_after: list[int]) -> list[Observation]:
    """Poll until the producer exits; write ack<n> once ack_after[n] observations have been collected."""
    got: list[Observation] = []
    deadline = time.monotonic() + HANG_S
    while proc.poll() is None and time.monotonic() < deadline:
        got += collector.poll()
        while (
            len(list(ack_dir.glob("ack*"))) < len(ack_after) and len(got) >= ack_after[len(list(ack_dir.glob("ack*")))]
        ):
            (ack_dir / f"ack{len(list(ack_dir.glob('ack*')))}").touch()
        time.sleep(0.005)
    assert proc.wait(5) == 0, proc.tail_text()
    return got + collector.finish()


def keys(observations: list[Observation]) -> list[tuple]:
    return [o.key() for o in observations]


def test_stdout_collector_reads_katib_lines_json_records_and_only_rank_0(tmp_path):
    command = write_script(
        tmp_path,
        "printer.py",
        """
        print("epoch=1 step=10 accuracy=0.5")
        print('{"metric": "accuracy", "value": 0.75, "epoch": 2, "step": 20}')
        print("[default1]:accuracy=0.99")
        print("[default0]:loss=0.25")
        print("no metrics here")
        print('{"accuracy": "0.9", "step": 30, "timestamp": 1700000000.5}')
        """,
    )
    collector = StdoutCollector(KATIB)
    proc = CapturedProcess(command, cwd=tmp_path, env={}, on_line=collector.feed)
    assert proc.wait(HANG_S) == 0
    proc.join_output()
    got = collector.finish()
    assert keys(got) == [
        ("epoch", 1.0, 1, 10), ("step", 10.0, 1, 10), ("accuracy", 0.5, 1, 10),
        ("accuracy", 0.75, 2, 20),
        ("loss", 0.25, 2, 20),  # no counter of its own: the last ones the script named
        ("accuracy", 0.9, 2, 30), ("step", 30.0, 2, 30),
    ]  # fmt: skip
    assert got[-1].time == 1700000000.5


def test_stdout_collector_reads_stderr_too_as_one_source_in_arrival_order(tmp_path):
    """Keras's epoch line on stdout, the metric through Python's logging on stderr (its default stream): one
    source, so the epoch carries to the metric. The script waits for the test to have read the epoch line
    before it logs, so the order the lines arrive in is the order they were written."""
    command = write_script(
        tmp_path,
        "two_streams.py",
        ACK_WAIT
        + """
        import logging
        logging.basicConfig(level=logging.INFO)  # stderr, `INFO:root:...`
        print("Epoch 1/2", flush=True)
        wait_ack(0)
        logging.info("val_acc=0.61")
        """.replace("\n        ", "\n"),
    )
    collector = StdoutCollector(KATIB)
    proc = CapturedProcess([*command, str(tmp_path)], cwd=tmp_path, env={}, on_line=collector.feed)
    got = collect_with_acks(collector, proc, tmp_path, ack_after=[1])
    assert keys(got) == [("epoch", 1.0, 1, None), ("val_acc", 0.61, 1, None)]
    proc.join_output()
    assert (tmp_path / "stderr.log").read_text() == "INFO:root:val_acc=0.61\n"  # each stream's log as it was
    assert (tmp_path / "stdout.log").read_text() == "Epoch 1/2\n"


def test_file_collector_tails_a_log_through_rotation(tmp_path):
    log = tmp_path / "metrics.log"
    command = write_script(
        tmp_path,
        "rotating.py",
        ACK_WAIT
        + """
        import logging, logging.handlers
        # 25-byte lines, 76 bytes a file: three lines per file, then RotatingFileHandler renames it away.
        handler = logging.handlers.RotatingFileHandler(sys.argv[1], maxBytes=76, backupCount=9)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log = logging.getLogger("metrics")
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        for batch in range(5):  # two lines a batch: at most one rotation between two reads
            for i in (2 * batch + 1, 2 * batch + 2):
                log.info(f"step={i:03d} accuracy=0.{i:03d}")
            if batch < 4:
                wait_ack(batch)
        """.replace("\n        ", "\n"),
    )
    proc = CapturedProcess([*command, str(log), str(tmp_path)], cwd=tmp_path, env={})
    got = collect_with_acks(FileCollector(log, "text", KATIB), proc, tmp_path, ack_after=[4, 8, 12, 16])
    assert keys(got) == [
        obs for i in range(1, 11) for obs in (("step", float(i), None, i), ("accuracy", i / 1000, None, i))
    ]
    assert len(list(tmp_path.glob("metrics.log.*"))) == 3  # it really rotated: lines 1-3, 4-6, 7-9; 10 is current


def test_file_collector_reads_katib_json_lines_and_waits_for_a_partial_line(tmp_path):
    path = tmp_path / "metrics.json"
    command = write_script(
        tmp_path,
        "json_writer.py",
        ACK_WAIT
        + """
        with open(sys.argv[1], "a") as out:
            out.write('{"loss": "0.5", "epoch": 0, "timestamp": "2021-12-02T14:27:51.000037459+09:00"}\\n')
            out.write('{"metric": "accuracy", "value": 0.25, "ep')
            out.flush()
            wait_ack(0)
            out.write('och": 1, "step": 7}\\n\\n{"metric": "accuracy", "value": "high"}\\n')
        """.replace("\n        ", "\n"),
    )
    proc = CapturedProcess([*command, str(path), str(tmp_path)], cwd=tmp_path, env={})
    got = collect_with_acks(FileCollector(path, "json", KATIB), proc, tmp_path, ack_after=[2])
    assert keys(got) == [("loss", 0.5, 0, None), ("epoch", 0.0, 0, None), ("accuracy", 0.25, 1, 7)]
    assert got[0].time == pytest.approx(1638422871.000037)  # 14:27:51 at +09:00


def test_a_json_file_with_a_malformed_line_fails_naming_the_line_as_katib_does(tmp_path):
    """Katib's JSON parser fails the whole file (errParseJson) at a line that is not a JSON object; so does
    this collector, naming the line: a JSON metrics file with a broken line is a bug the user must see."""
    path = tmp_path / "metrics.json"
    path.write_text('{"accuracy": "0.5", "epoch": 0}\n\nnot json\n{"accuracy": "0.9", "epoch": 1}\n')
    collector = FileCollector(path, "json", KATIB)
    with pytest.raises(CollectorError, match=r"metrics.json, json\): line 3 is not a JSON object: 'not json'"):
        collector.poll()
    text = FileCollector(path, "text", KATIB)  # the same file as text: lines are filtered, never refused
    assert [o.key() for o in text.poll()] == [
        ("accuracy", 0.5, 0, None), ("epoch", 0.0, 0, None), ("accuracy", 0.9, 1, None), ("epoch", 1.0, 1, None)
    ]  # fmt: skip
    path.write_text("2021-12-02T14:27:51.5+09:00 accuracy=0.5\nnot-a-time accuracy=0.75\n")
    first, second = FileCollector(path, "text", KATIB).finish()
    assert (first.key(), first.time) == (("accuracy", 0.5, None, None), pytest.approx(1638422871.5))
    assert second.key() == ("accuracy", 0.75, None, None) and second.time > 1.7e9  # no timestamp: read time


def test_tfevent_collector_reads_scalars_written_by_torch_summary_writer(tmp_path):
    logdir = tmp_path / "tb"
    command = write_script(
        tmp_path,
        "tb_writer.py",
        ACK_WAIT
        + """
        from torch.utils.tensorboard import SummaryWriter
        root, train = SummaryWriter(sys.argv[1]), SummaryWriter(sys.argv[1] + "/train")
        for step, acc in ((1, 0.5), (2, 0.625)):
            root.add_scalar("accuracy", acc, step)
        # On disk before the other writer's events: each writer's thread writes its file when it likes, and a read
        # that saw train/loss at step 2 first would take accuracy's step 1 for the epoch index (a coarser axis).
        root.flush()
        for step, acc in ((1, 0.5), (2, 0.625)):
            train.add_scalar("loss", 1 - acc, step)
        root.add_text("note", "text is not a scalar", 0)
        root.flush(); train.flush()
        wait_ack(0)
        root.add_scalar("accuracy", 0.75, 3)
        root.add_scalar("epoch", 1, 3)
        root.close(); train.close()
        """.replace("\n        ", "\n"),
    )
    proc = CapturedProcess([*command, str(logdir), str(tmp_path)], cwd=tmp_path, env={})
    got = collect_with_acks(TFEventCollector(logdir, "accuracy"), proc, tmp_path, ack_after=[4])
    assert sorted(keys(got), key=lambda k: (k[0], k[1])) == [
        ("accuracy", 0.5, None, 1), ("accuracy", 0.625, None, 2), ("accuracy", 0.75, None, 3),
        ("epoch", 1.0, 1, 3),
        ("train/loss", 0.375, None, None), ("train/loss", 0.5, None, None),  # not the job's metric: no step
    ]  # fmt: skip
    assert all(o.time is not None and o.time > 1.6e9 for o in got)  # the events' own wall times


def test_tfevent_progress_comes_from_the_job_metrics_own_tag_only(tmp_path):
    """As most scripts log: the loss at the global step, the validation accuracy at the epoch index. Only the
    job's metric's steps are progress; the loss's steps would take one counter back and forth. They tell the
    metric's axis: logged below a step the loss has reached, the metric is at the epoch index, read as epochs."""
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tmp_path / "tb")) as writer:
        for epoch in range(2):
            for step in range(epoch * 3, epoch * 3 + 3):
                writer.add_scalar("Loss/train", 1.0 / (step + 1), step)
            writer.add_scalar("Accuracy/val", 0.5 + epoch / 4, epoch)
    got = TFEventCollector(tmp_path / "tb", "Accuracy/val").finish()
    assert [k for k in keys(got) if k[2] is not None or k[3] is not None] == [
        ("Accuracy/val", 0.5, 0, None),
        ("Accuracy/val", 0.75, 1, None),
    ]
    assert sorted(round(k[1], 4) for k in keys(got) if k[0] == "Loss/train") == [0.1667, 0.2, 0.25, 0.3333, 0.5, 1.0]
    at_global_step = TFEventCollector(tmp_path / "tb", "Loss/train").finish()  # the same files, the loss the metric
    assert sorted(o.step for o in at_global_step if o.step is not None) == [0, 1, 2, 3, 4, 5]


def test_tfevent_metric_is_found_in_every_subdirectory_unless_named_with_one_as_in_katib(tmp_path):
    """Katib's TFEvent parser matches the metric `accuracy` in every subdirectory and `train/accuracy` only under
    a directory `train`; tags must equal the name here (Katib's prefix test would take `accuracy_top5` too)."""
    from torch.utils.tensorboard import SummaryWriter

    for sub, acc in (("train", 0.5), ("test", 0.25)):
        with SummaryWriter(str(tmp_path / "tb" / sub)) as writer:
            writer.add_scalar("accuracy", acc, 1)
            writer.add_scalar("accuracy_top5", 0.99, 1)
            writer.add_scalar("epoch", 1, 1)

    def names(metric_name: str) -> list[tuple[str, float]]:  # float32 in the files: 4 decimals are exact enough
        found = TFEventCollector(tmp_path / "tb", metric_name).finish()
        return sorted((o.metric, round(o.value, 4)) for o in found)

    assert names("accuracy") == [
        ("accuracy", 0.25), ("accuracy", 0.5), ("epoch", 1.0), ("epoch", 1.0),
        ("test/accuracy_top5", 0.99), ("train/accuracy_top5", 0.99),
    ]  # fmt: skip
    assert names("train/accuracy") == [
        ("epoch", 1.0), ("epoch", 1.0), ("test/accuracy", 0.25),
        ("test/accuracy_top5", 0.99), ("train/accuracy", 0.5), ("train/accuracy_top5", 0.99),
    ]  # fmt: skip


def test_a_source_that_outlives_its_trial_is_claimed_before_and_kept_after(tmp_path):
    """An absolute path is shared by consecutive trials: an earlier file is moved aside (Katib's trial pod starts
    with none), earlier event files are never read, and what a trial read is copied into its log."""
    log_dir, shared = tmp_path / "trial" / "logs", tmp_path / "var" / "log" / "katib"
    shared.mkdir(parents=True)
    (shared / "metrics.log").write_text("accuracy=0.99\n")  # the previous trial's last line
    collector = FileCollector(shared / "metrics.log", "text", KATIB)
    (note,) = collector.claim(log_dir)
    assert "existed before the trial" in note and not (shared / "metrics.log").exists()
    assert (log_dir / "metrics.log.before-trial").read_text() == "accuracy=0.99\n"  # nothing lost
    (shared / "metrics.log").write_text("accuracy=0.5\n")
    assert [o.key() for o in collector.finish()] == [("accuracy", 0.5, None, None)]
    collector.keep(log_dir)
    assert (log_dir / "collected" / "metrics.log").read_text() == "accuracy=0.5\n"

    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(shared / "tb")) as writer:
        writer.add_scalar("accuracy", 0.99, 1)
    tfevent = TFEventCollector(shared / "tb", "accuracy")
    assert "1 event file(s)" in tfevent.claim(log_dir)[0]
    with SummaryWriter(str(shared / "tb")) as writer:
        writer.add_scalar("accuracy", 0.5, 1)
    assert [o.key() for o in tfevent.finish()] == [("accuracy", 0.5, None, 1)]
    tfevent.keep(log_dir)
    assert len(list((log_dir / "collected" / "tfevents").glob("*tfevents*"))) == 1


def test_prometheus_collector_scrapes_a_prometheus_client_server(tmp_path):
    command = write_script(
        tmp_path,
        "exporter.py",
        """
        import sys, time
        from prometheus_client import start_http_server
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        from prometheus_client.registry import CollectorRegistry

        STATES = [(10, 1, 0.5), (20, 1, 0.5), (30, 2, 0.5), (40, 2, 0.75)]  # (step, epoch, accuracy) per scrape

        class Training:
            scrapes = 0
            def describe(self):
                return []
            def collect(self):
                step, epoch, accuracy = STATES[min(self.scrapes, len(STATES) - 1)]
                self.scrapes += 1
                yield CounterMetricFamily("step", "steps done", value=step)
                yield GaugeMetricFamily("epoch", "epoch", value=epoch)
                yield GaugeMetricFamily("accuracy", "validation accuracy", value=accuracy)

        registry = CollectorRegistry(auto_describe=False)
        registry.register(Training())
        server, _ = start_http_server(0, addr="127.0.0.1", registry=registry)
        print(f"port={server.server_port}", flush=True)
        time.sleep(60)
        """,
    )
    ports: list[str] = []
    proc = CapturedProcess(command, cwd=tmp_path, env={}, on_line=ports.append)
    try:
        deadline = time.monotonic() + HANG_S
        while not ports and time.monotonic() < deadline:
            time.sleep(0.01)
        collector = PrometheusCollector(int(ports[0].split("=")[1]))
        scrapes = [keys(collector.scrape()) for _ in range(5)]
    finally:
        proc.stop(0.5)
    assert scrapes == [
        [("step", 10.0, 1, 10), ("epoch", 1.0, 1, 10), ("accuracy", 0.5, 1, 10)],
        [("step", 20.0, 1, 20)],  # accuracy unchanged in the same epoch: nothing new
        [("step", 30.0, 2, 30), ("epoch", 2.0, 2, 30), ("accuracy", 0.5, 2, 30)],  # same value, new epoch
        [("step", 40.0, 2, 40), ("accuracy", 0.75, 2, 40)],
        [],
    ]
    assert collector.finish() == []  # the server is gone; it had answered, so no error


# -- bad input: each error names the collector and its source -------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_bad_sources_name_the_collector_and_the_source(tmp_path):
    with pytest.raises(
        CollectorSpecError, match=r"stdOut collector \(the script's stdout and stderr\).*metricsFormat.*'\(acc'"
    ):
        CollectorSpec.parse({"source": {"filter": {"metricsFormat": ["(acc"]}}})
    with pytest.raises(CollectorError, match=r"file collector \(.*missing.log, text\): the file was never created"):
        FileCollector(tmp_path / "missing.log", "text", KATIB).finish()
    port = free_port()
    unreachable = PrometheusCollector(port)
    assert unreachable.poll() == []  # while the script starts, a refused connection is normal
    with pytest.raises(
        CollectorError, match=rf"prometheus collector \(http://127.0.0.1:{port}/metrics\): .*never answered"
    ):
        unreachable.finish()
    with pytest.raises(CollectorError, match=r"tfEvent collector \(.*nodir\): the directory was never created"):
        TFEventCollector(tmp_path / "nodir").finish()
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path / "text_only"))
    writer.add_event(Event(step=1, wall_time=1.0, file_version="brain.Event:2"))
    writer.close()
    with pytest.raises(CollectorError, match=r"tfEvent collector \(.*text_only\): no scalar events in 1 event file"):
        TFEventCollector(tmp_path / "text_only").finish()


def test_katib_metrics_collector_spec_is_accepted_as_is():
    katib_yaml = """
    apiVersion: kubeflow.org/v1beta1
    kind: Experiment
    spec:
      metricsCollectorSpec:
        collector:
          kind: File
        source:
          fileSystemPath:
            path: /var/log/katib/metrics.log
            kind: File
            format: TEXT
          filter:
            metricsFormat:
              - "{metricName: ([\\\\w|-]+), metricValue: ((-?\\\\d+)(\\\\.\\\\d+)?)}"
    """
    spec = CollectorSpec.parse(textwrap.dedent(katib_yaml))
    assert (spec.kind, spec.path, spec.file_format) == ("file", "/var/log/katib/metrics.log", "text")
    found = text_observations("{metricName: accuracy, metricValue: 0.8}", spec.patterns())
    pairs = [(o.metric, o.value) for o in found]
    assert pairs == [("accuracy", 0.8)]
    assert CollectorSpec.parse({"collector": {"kind": "TensorFlowEvent"}}).path == "/var/log/katib/tfevent/"
    prom = CollectorSpec.parse(json.dumps({"metricsCollectorSpec": {"collector": {"kind": "PrometheusMetric"}}}))
    assert (prom.kind, prom.http_port, prom.http_path) == ("prometheus", 8080, "/metrics")
    for each in (
        CollectorSpec(),
        spec,
        prom,
        CollectorSpec.parse({"kind": "tfEvent", "source": {"fileSystemPath": {"path": "{log_dir}/tb"}}}),
    ):
        assert CollectorSpec.parse(each.to_json()) == each


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"collector": {"kind": "Custom", "customCollector": {}}}, "collector.customCollector"),
        ({"kind": "Custom"}, "metrics_collector.kind"),
        ({"kind": "file", "source": {"fileSystemPath": {"kind": "Directory"}}}, "fileSystemPath.kind"),
        ({"kind": "stdOut", "source": {"httpGet": {"port": 80}}}, "source.httpGet"),
        ({"kind": "prometheus", "source": {"httpGet": {"port": "metrics"}}}, "httpGet.port"),
        ({"kind": "prometheus", "source": {"httpGet": {"host": "10.0.0.1"}}}, "httpGet.host"),
        ({"kind": "tfEvent", "source": {"filter": {"metricsFormat": ["(a)=(b)"]}}}, "metricsFormat"),
        ({"source": {"filter": {"metricsFormat": ["no groups"]}}}, "metricsFormat"),
        ({"kidn": "file"}, "metrics_collector.kidn"),
        # Katib's webhook refuses these two (validateMetricsCollector), so does this parser:
        ({"kind": "prometheus", "source": {"httpGet": {"path": "not/valid/path"}}}, "source.httpGet.path"),
        ({"kind": "file", "source": {"fileSystemPath": {"path": "/m.json", "format": "JSON"}, "filter": {}}}, "filter"),
        ("kind: [", "metrics_collector"),
    ],
)
def test_bad_specs_name_the_field_and_what_is_allowed(value, field):
    with pytest.raises(CollectorSpecError, match="allowed") as err:
        CollectorSpec.parse(value)
    assert field in str(err.value)


# -- through run_trial: the collector spec drives a plain trial -----------------------------------
