"""TensorBoard across recurrences: one event file per recurrence in one log directory per job.

The report step appends the recurrence's scalars (step = recurrence number) to the job's log
directory in the store (`Store.tensorboard_logs`): cost, energy, time, trials, reached, the
batch size and power limit of the recurrence's final trial (the one that reached, else the last;
`power_limit_profiled` 0 when profiling did not choose it: unprofiled or measure only),
the default configuration's cost and the saving when known, `simulated` (1: the figures come from
a simulated GPU), and the bandit's posterior mean cost per batch size after the recurrence: the
run's policy's arm states from the history up to the recurrence's last trial (zeus_kfp.report.arms),
the statistics of that prefix per report step.
`zeus-kfp tensorboard JOB` syncs the directory from any store and serves it on 127.0.0.1.

Why one file per recurrence, not one growing file: the store is append-only with immutable
objects. TensorBoard reads every event file of a run directory in name order, and the names
carry the zero-padded recurrence number, so one run shows the whole job in recurrence order.

Why the bytes are built here (TensorBoard's protos in TFRecord framing, what torch.utils.tensorboard's
SummaryWriter writes) rather than through SummaryWriter: the file's content is then a function of the store
alone (wall times are the recurrence's end), so a retried report step writes the same object again, and the
report step does not import torch (about 2 s a step). The framing is written here with google-crc32c's CRC
rather than through TensorBoard's `RecordWriter`, whose import loads TensorBoard's TensorFlow stand-in and,
through it, boto3 and fsspec where installed: 0.45 s of every report step's CPU, for four struct fields.
tests/ux/test_tensorboard.py checks the bytes against RecordWriter's.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

import google_crc32c
import pandas as pd

from zeus_kfp.job import JobSpec
from zeus_kfp.policy.history import History
from zeus_kfp.report.arms import DEFAULT_POLICY, arm_frame, history_through
from zeus_kfp.report.numbers import finished_trials, is_simulated, limit_note, select_recurrence
from zeus_kfp.report.recurrence import recurrence_metrics

TAG = "recurrence/"
POSTERIOR_TAG = "posterior_mean/batch_size_"
FILE_VERSION = "brain.Event:2"
DEFAULT_PORT = 6006  # TensorBoard's


def event_file_name(recurrence: int, recurrence_id: str) -> str:
    """Sorts in recurrence order; 'tfevents' in the name is how TensorBoard recognizes an event file."""
    return f"events.out.tfevents.{recurrence:012d}.{recurrence_id}"


def recurrence_scalars(
    trials: pd.DataFrame, profiles: pd.DataFrame, arms: pd.DataFrame, spec, recurrence: int
) -> dict[str, float]:
    """Tag -> value for one recurrence (see the module docstring). `arms`: the bandit's arm states after
    the recurrence (zeus_kfp.report.arms.arm_frame of the history through it)."""
    scalars = {TAG + name: value for name, value in recurrence_metrics(trials, profiles, spec, recurrence).items()}
    done = finished_trials(trials)
    mine = done[done["recurrence"] == recurrence].sort_values("trial")
    if not mine.empty:
        reached = mine[mine["status"] == "reached"]
        final = (reached if not reached.empty else mine).iloc[-1]
        scalars[TAG + "batch_size"] = float(final["batch_size"])
        if pd.notna(final["power_limit_w"]):
            scalars[TAG + "power_limit_w"] = float(final["power_limit_w"])
            # 0: the limit was in force, not chosen (unprofiled, measure only: zeus_kfp.report.numbers.limit_note)
            scalars[TAG + "power_limit_profiled"] = 0.0 if limit_note(final.get("reason")) else 1.0
        scalars[TAG + "simulated"] = 1.0 if is_simulated(mine) else 0.0
    for row in arms.itertuples(index=False):  # arms without a posterior mean are left out
        if row.posterior_mean is not None and not math.isnan(float(row.posterior_mean)):
            scalars[f"{POSTERIOR_TAG}{int(row.batch_size)}"] = float(row.posterior_mean)
    return scalars


def event_file(scalars: dict[str, float], step: int, wall_time: float) -> bytes:
    """An event file holding `scalars` at `step`: the same input gives the same bytes."""
    # deferred: only the report step writes event files
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary

    values = [Summary.Value(tag=tag, simple_value=value) for tag, value in sorted(scalars.items())]
    events = [
        Event(wall_time=wall_time, file_version=FILE_VERSION),
        Event(wall_time=wall_time, step=step, summary=Summary(value=values)),
    ]
    return b"".join(tf_record(event.SerializeToString()) for event in events)


def tf_record(data: bytes) -> bytes:
    """`data` framed as one TFRecord, as TensorBoard reads an event file: its length (uint64), the length's
    masked CRC-32C, the data, the data's masked CRC-32C, little-endian."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", _masked_crc32c(length)) + data + struct.pack("<I", _masked_crc32c(data))


def _masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C: the checksum rotated right by 15 bits plus a constant, so that a CRC of data
    that holds CRCs stays well distributed."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def recurrence_event(
    spec: JobSpec,
    trials: pd.DataFrame,
    profiles: pd.DataFrame,
    history: History,
    recurrence_id: str,
    policy: str = DEFAULT_POLICY,
) -> tuple[str, bytes]:
    """The recurrence's event file: (its name in the job's log directory, its bytes). The posterior is
    `policy`'s (the run's: the store does not record it). The report step stores it
    (zeus_kfp.steps.report.append_recurrence)."""
    number = int(select_recurrence(trials, recurrence_id)["recurrence"].iloc[0])
    arms = arm_frame(spec, history_through(history, number), policy)
    scalars = recurrence_scalars(trials, profiles, arms, spec, number)
    mine = trials[trials["recurrence"] == number]
    ended = pd.to_datetime(mine["ended_at"]).max() if "ended_at" in mine else pd.NaT
    wall_time = float(ended.timestamp()) if pd.notna(ended) else 0.0
    return event_file_name(number, recurrence_id), event_file(scalars, number, wall_time)


def markdown_section(log_dir: str, store_uri: str, job_id: str) -> str:
    """The report's link to the job's TensorBoard log directory `log_dir` (a URI), and how to view it."""
    return (
        "\n### TensorBoard\n\n"
        f"Every recurrence of this job, as TensorBoard scalars (step = recurrence): [{log_dir}]({log_dir}). "
        f"View them with `zeus-kfp tensorboard {job_id} --store {store_uri}`.\n"
    )


def tensorboard_argv(logdir: Path, port: int = DEFAULT_PORT) -> list[str]:
    """TensorBoard's command line: 127.0.0.1 only; the directory is read once, before serving (it was just
    synced and does not change), so every scalar is there when the URL is printed."""
    return [
        "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port),
        "--reload_interval", "0", "--reload_task", "blocking", "--load_fast", "false",
    ]  # fmt: skip
