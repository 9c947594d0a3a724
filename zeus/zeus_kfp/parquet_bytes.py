"""Parquet to and from bytes in memory, with every buffer owned by Arrow, never by Python.

Why not `pq.read_table(pa.BufferReader(data))` or `io.BytesIO`: Arrow's reader hands the file to its
thread pool, and the pool's worker may drop the last reference to it after `read_table` has returned.
Over Python bytes that release needs the GIL (arrow::py::PyBuffer's destructor); when it happens while
the interpreter is finalizing, the worker is made to exit inside that destructor, and the process aborts
("terminate called without an active exception", exit -6) after all its work was done. Seen here: 1 in
18 to 1 in 40 `zeus-kfp run`s at load 6 (core dump: a ParquetFileFragment's BufferReader released on an
Arrow worker during Py_FinalizeEx; the family of apache/arrow#34314). A copy into an Arrow buffer costs a
memcpy of a snapshot (megabytes at most) and leaves nothing for a worker to release under the GIL.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def read_parquet_bytes(data: bytes) -> pa.Table:
    """The table in `data` (Parquet), read from an Arrow-owned copy."""
    owned = pa.BufferOutputStream()
    owned.write(data)
    return pq.read_table(pa.BufferReader(owned.getvalue()))


def parquet_bytes(table: pa.Table, **options: Any) -> bytes:
    """`table` as Parquet bytes (`options` go to pq.write_table), written to an Arrow buffer."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **options)
    return sink.getvalue().to_pybytes()
