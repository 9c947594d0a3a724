"""A cluster trial's power profiles through the store's handoff: the same Parquet a trial's log dir holds.

Both directions on a real file store: the train step uploads the stored profile to reuse and a pod fetches
it to the file ZEUS_PROFILE_PATH names; rank 0's node publishes the profile the trial measured and the step
reads it back. The store checks each name against keys.HANDOFF_FILES, so a file name the trial side writes
and the store does not take fails here.
"""

from __future__ import annotations

from zeus_kfp.launch.handoff import Handoff
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.train.artifacts import write_profile

ROWS = [
    {"phase": "train", "power_limit_w": 300.0, "average_power_w": 280.0, "throughput": 900.0, "simulated": True,
     "gpu": "SIMULATED-V100"},
    {"phase": "train", "power_limit_w": 250.0, "average_power_w": 230.0, "throughput": 860.0, "simulated": True,
     "gpu": "SIMULATED-V100"},
]  # fmt: skip


def test_the_profile_to_reuse_reaches_the_pod_as_the_parquet_the_training_child_reads(tmp_path):
    handoff = Handoff(str(tmp_path / "store"), "handoff-job", "run-1", 1, "job-1")
    assert handoff.fetch_reuse(tmp_path / "pod") is None  # nothing uploaded: the trial profiles
    stored = PowerProfile.of(ROWS, batch_size=64, recurrence=1, trial=2)
    handoff.upload_reuse(stored)
    path = handoff.fetch_reuse(tmp_path / "pod")
    assert path is not None and path.name == "reuse_profile.parquet"
    assert path.read_bytes() == stored.to_parquet()
    back = PowerProfile.read_parquet(path)  # as the training child reads ZEUS_PROFILE_PATH (zeus_kfp.train.session)
    assert back.rows.to_dict("records") == ROWS and (back.batch_size, back.recurrence, back.trial) == (64, 1, 2)


def test_the_profile_a_pod_measured_comes_back_to_the_step_from_the_log_dirs_file(tmp_path):
    handoff = Handoff(str(tmp_path / "store"), "handoff-job", "run-1", 1, "job-1")
    assert handoff.read_profile().is_empty  # nothing published yet
    log_dir = tmp_path / "pod" / "logs"
    write_profile(log_dir, PowerProfile.of(ROWS))
    (log_dir / "result.json").write_text("{}")
    assert handoff.publish(log_dir) == ["profile.parquet", "result.json"]
    assert handoff.read_profile().rows.to_dict("records") == ROWS
