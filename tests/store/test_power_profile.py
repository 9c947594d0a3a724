"""A power profile keeps which trial measured it, from the store through the bandit step's file to train.

A reused profile's age is counted from the recurrence that measured it (zeus_kfp.power.reuse), and the
trial number says which one it is; before PowerProfile, the bandit step's Parquet handed train only
rows, and train made the recurrence and trial up as zeros.
"""

from __future__ import annotations

import pandas as pd
import pytest

from zeus_kfp.job import Decision
from zeus_kfp.power.reuse import ProfileBook
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.steps.train import _read_reuse

ROWS = [
    {"phase": "train", "power_limit_w": 300.0, "average_power_w": 280.0, "throughput": 900.0, "simulated": True},
    {"phase": "train", "power_limit_w": 250.0, "average_power_w": 230.0, "throughput": 860.0, "simulated": True},
    {"phase": "eval", "power_limit_w": 250.0, "average_power_w": 200.0, "throughput": 2400.0, "simulated": True},
]


def test_a_profile_written_as_parquet_reads_back_with_its_rows_and_the_trial_that_measured_it(tmp_path):
    profile = PowerProfile.of(ROWS, batch_size=64, recurrence=3, trial=7)
    profile.to_parquet(tmp_path / "p.parquet")
    back = PowerProfile.read_parquet(tmp_path / "p.parquet")
    assert (back.batch_size, back.recurrence, back.trial) == (64, 3, 7)
    # rows that name no GPU model (written before profiles named theirs) read back with gpu ""
    expected = pd.DataFrame(ROWS).assign(gpu="")
    pd.testing.assert_frame_equal(back.rows, expected.astype(back.rows.dtypes.to_dict()))
    empty = PowerProfile.empty()
    empty.to_parquet(tmp_path / "e.parquet")
    again = PowerProfile.read_parquet(tmp_path / "e.parquet")
    assert again.is_empty and (again.batch_size, again.recurrence, again.trial) == (None, None, None)


def test_a_profile_crosses_as_the_same_parquet_bytes_through_a_file_or_a_handoff(tmp_path):
    """The log dir's file, the KFP artifact and the handoff's bytes are one encoding: to_parquet returns what it
    writes, and read_parquet reads a path or those bytes to the same profile."""
    profile = PowerProfile.of([{**row, "gpu": "NVIDIA H200"} for row in ROWS], batch_size=32, recurrence=2, trial=5)
    data = profile.to_parquet(tmp_path / "profile.parquet")
    assert (tmp_path / "profile.parquet").read_bytes() == data
    assert [p.name for p in tmp_path.iterdir()] == ["profile.parquet"]  # no temporary file left beside it
    from_bytes, from_path = PowerProfile.read_parquet(data), PowerProfile.read_parquet(tmp_path / "profile.parquet")
    for back in (from_bytes, from_path):
        assert (back.batch_size, back.recurrence, back.trial) == (32, 2, 5)
        assert back.rows.to_dict("records") == [{**row, "gpu": "NVIDIA H200"} for row in ROWS]


def test_a_parquet_profile_without_the_gpu_column_reads_with_gpu_blank_and_a_bad_one_is_refused_by_name(tmp_path):
    """Written by hand with pyarrow (no PowerProfile): the optional column may be absent; a missing required
    column, a column of another type or a file that is not Parquet raises ValueError naming the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    bare = pd.DataFrame(ROWS)
    pq.write_table(pa.Table.from_pandas(bare, preserve_index=False), tmp_path / "bare.parquet")
    back = PowerProfile.read_parquet(tmp_path / "bare.parquet")
    assert back.rows["gpu"].tolist() == ["", "", ""] and back.rows["throughput"].tolist() == [900.0, 860.0, 2400.0]
    assert (back.batch_size, back.recurrence, back.trial) == (None, None, None)

    pq.write_table(pa.Table.from_pandas(bare.drop(columns=["throughput"])), tmp_path / "short.parquet")
    with pytest.raises(ValueError, match=r"short\.parquet: profile lacks columns \['throughput'\]"):
        PowerProfile.read_parquet(tmp_path / "short.parquet")
    texts = bare.assign(power_limit_w=bare["power_limit_w"].astype(str))  # "300.0": a text, not a number of watts
    pq.write_table(pa.Table.from_pandas(texts), tmp_path / "texts.parquet")
    wrong = r"texts\.parquet: profile columns of the wrong type \{'power_limit_w': '\w*string'\} "
    with pytest.raises(ValueError, match=wrong + r"\(allowed: \{'power_limit_w': 'float64'\}\)"):
        PowerProfile.read_parquet(tmp_path / "texts.parquet")
    (tmp_path / "profile.csv").write_text(bare.to_csv(index=False))  # what an older trial dir held
    with pytest.raises(ValueError, match=r"profile\.csv: not a power profile's Parquet"):
        PowerProfile.read_parquet(tmp_path / "profile.csv")
    with pytest.raises(ValueError, match=r"3 bytes: not a power profile's Parquet"):
        PowerProfile.read_parquet(b"abc")


def test_a_profile_written_over_a_folder_fails_and_leaves_no_temporary_file(tmp_path):
    """The write goes through a temporary file and a rename: when the rename fails, what was there stays and the
    temporary file is removed."""
    (tmp_path / "profile.parquet").mkdir()
    with pytest.raises(OSError):
        PowerProfile.of(ROWS).to_parquet(tmp_path / "profile.parquet")
    assert [p.name for p in tmp_path.iterdir()] == ["profile.parquet"] and (tmp_path / "profile.parquet").is_dir()


def test_the_profile_the_bandit_step_hands_train_is_the_stored_one_with_its_recurrence_and_trial(store, spec, tmp_path):
    """Recurrence 1's second trial measures batch size 64's profile; recurrence 2 reuses it."""
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    for attempt, batch_size in ((1, 128), (2, 64)):
        decision = Decision(batch_size=batch_size, cost_threshold=None, stage="exploration", reason="test")
        store.dispatch_trial(spec.job_id, "run-a", attempt, decision)
    store.write_profile(spec.job_id, "run-a", 2, PowerProfile.of(ROWS))
    store.begin_recurrence(spec.job_id, "run-b")

    reuse = ProfileBook.from_frame(store.profiles(spec.job_id)).to_reuse(64, 2, reprofile_after=0)
    assert reuse is not None
    reuse.to_parquet(tmp_path / "reuse.parquet")  # what the bandit step writes for train
    handed = _read_reuse(str(tmp_path / "reuse.parquet"))
    assert (handed.batch_size, handed.recurrence, handed.trial) == (64, 1, 2)
    assert handed.rows["average_power_w"].tolist() == [280.0, 230.0, 200.0]


def test_the_book_holds_each_sizes_latest_usable_profile_and_skips_a_void_one():
    """ProfileBook.from_frame builds only the profiles it keeps (it once built every one, 3.5 ms each): each batch
    size's latest trial with a valid training row; a later trial whose rows are all void (the meter never
    ticked: zero power) does not displace it."""

    def rows(trial: int, batch_size: int, power: float) -> list[dict]:
        return [
            {"recurrence": trial, "trial": trial, "batch_size": batch_size, "phase": "train",
             "power_limit_w": float(limit), "average_power_w": power, "throughput": 100.0, "simulated": True}
            for limit in (250, 200)
        ]  # fmt: skip

    frame = pd.DataFrame([*rows(1, 64, 150.0), *rows(2, 128, 150.0), *rows(3, 64, 140.0), *rows(4, 64, 0.0)])
    book = ProfileBook.from_frame(frame)
    assert {size: (p.trial, p.recurrence, len(p)) for size, p in book.latest.items()} == {64: (3, 3, 2), 128: (2, 2, 2)}
    assert book.latest[64].rows["average_power_w"].tolist() == [140.0, 140.0]
