"""The store's one merge (zeus.store.conflicts.merge_cut, rule 5) on hand-built tables, and compaction
committing exactly a whole read's cut (never a cursor's part of it)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from zeus.job import TrialResult
from zeus.policy.base import Decision
from zeus.store import keys
from zeus.store.compaction import compact_stream
from zeus.store.conflicts import merge_cut
from zeus.store.schemas import snapshot_schema
from zeus.store.streams import read_stream


def finished_rows(*trials: tuple[str, float]) -> pa.Table:
    """Finished-stream rows in snapshot form: (event name, energy) each, the rest fixed."""
    schema = snapshot_schema("finished")
    rows = []
    for name, energy in trials:
        rid, attempt = keys.parse_event_name(name)
        rows.append({"job_id": "j", "recurrence_id": rid, "attempt": attempt, "batch_size": 8, "status": "reached",
                     "energy_j": energy, "_event": name})  # fmt: skip
    return pa.Table.from_pylist(rows, schema=schema)


def test_a_record_decides_over_the_base_copy_of_its_trial_and_the_rest_is_kept_in_order() -> None:
    base = finished_rows(("r1.0001", 10.0), ("r1.0002", 20.0), ("r2.0001", 30.0))
    records = finished_rows(("r1.0002", 99.0), ("r3.0001", 40.0))
    merged = merge_cut(base, records)
    assert list(zip(merged.column("_event").to_pylist(), merged.column("energy_j").to_pylist(), strict=True)) == [
        ("r1.0001", 10.0),
        ("r2.0001", 30.0),
        ("r1.0002", 99.0),
        ("r3.0001", 40.0),
    ]
    assert merge_cut(None, records).equals(records) and merge_cut(base, records.slice(0, 0)).equals(base)


def test_compaction_commits_the_reads_cut_and_refuses_a_cursors_read(store, spec) -> None:
    store.ensure_job(spec)
    for rid in ("run-a", "run-b"):
        store.begin_recurrence(spec.job_id, rid)
        store.dispatch_trial(spec.job_id, rid, 1, Decision(64, None, "exploration", "test"))
        result = TrialResult.build(spec, batch_size=64, status="reached", time_s=1.0, energy_j=5.0, num_epochs=1)
        store.finish_trial(spec.job_id, rid, 1, result)
    whole = read_stream(store.backend, spec.job_id, "finished")
    assert compact_stream(store.backend, spec.job_id, "finished", read=whole).merged == 2
    again = read_stream(store.backend, spec.job_id, "finished")
    assert again.loose == 0 and again.table.equals(whole.table)  # the snapshot is exactly the read's cut
    part = read_stream(store.backend, spec.job_id, "finished", after=again.position)
    with pytest.raises(ValueError, match="whole cut"):
        compact_stream(store.backend, spec.job_id, "finished", read=part)
