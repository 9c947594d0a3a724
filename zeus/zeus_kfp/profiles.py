"""The power-profile table's schema, defined once: what the JIT profiler measures (zeus_kfp.power.profiler),
a trial hands over (zeus_kfp.train.artifacts, the train step's PowerProfile artifact), the store keeps
(zeus_kfp.store: the `profiles` stream, each row keyed by its trial) and every power-limit choice reads.

One row per (phase, power limit): the average power in watts over all the job's GPUs and the
throughput in units of work per second (samples, or epochs for a trace or an epoch counter), and
whether the figures are simulated. Types are given by name so pandas (`astype`) and pyarrow
(`pa.type_for_alias`) read the same declaration.

`PowerProfile` is the one value a profile travels as, between the profiler, the selection, reuse, the
artifacts, the steps and the store: its rows and which trial measured them (batch size, recurrence,
trial), which a reused profile carries through the bandit step's Parquet file (its schema metadata), so
its age is counted from the recurrence that measured it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from zeus_kfp.errors import JobSpecError
from zeus_kfp.files import replace_file
from zeus_kfp.parquet_bytes import parquet_bytes, read_parquet_bytes

PROFILE_SCHEMA: tuple[tuple[str, str], ...] = (
    ("phase", "string"),  # one of PROFILE_PHASES
    ("power_limit_w", "float64"),
    ("average_power_w", "float64"),
    ("throughput", "float64"),
    ("simulated", "bool"),
    ("gpu", "string"),  # the GPU model that measured the row (NVML's name); "" where not recorded (older profiles)
)
PROFILE_COLUMNS = tuple(name for name, _ in PROFILE_SCHEMA)
MAX_GPU_NAME = 200  # characters of a GPU model's name
PROFILE_PHASES = ("train", "eval")  # training steps at each limit; eval at the chosen one
# In a trial's reason when it has no profile because its metrics could not pace the profiler (zeus_kfp.train.progress);
# the report reads it back (zeus_kfp.report.numbers.limit_note), so it is declared here, below both.
UNPROFILED_NOTE = "unprofiled: the script reported nothing that could pace the profiler"
# What a trial stored by an earlier version says instead (a plain script whose lines carried no counter was not
# profiled then); the report reads both.
EARLIER_UNPROFILED_NOTE = "unprofiled: the collected metrics carried no step or epoch counter"
# In the reason of a trial that ended before its power-limit search did (zeus_kfp.power.profiler.partial_note):
# its profile is unfinished, and the next trial at that batch size continues it. The report reads it back.
UNFINISHED_NOTE = "ended while profiling"


def _is_flag(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def _number_rule(low: float, inclusive: bool) -> Callable[[Any], bool]:
    def ok(value: Any) -> bool:
        number = isinstance(value, Real) and not _is_flag(value)
        return number and math.isfinite(value) and (value >= low if inclusive else value > low)

    return ok


# Each column's rule: whether a value is allowed, and the rule in words for the error.
PROFILE_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "phase": (lambda value: isinstance(value, str) and value in PROFILE_PHASES, f"one of {list(PROFILE_PHASES)}"),
    "power_limit_w": (_number_rule(0.0, False), "finite numbers of watts > 0 (the limit the row was measured at)"),
    "average_power_w": (_number_rule(0.0, True), "finite numbers of watts >= 0"),
    "throughput": (
        _number_rule(0.0, False),
        "finite numbers > 0 (work per second: a row that did no work measured nothing)",
    ),
    "simulated": (_is_flag, "true or false"),
    "gpu": (
        lambda value: isinstance(value, str) and len(value) <= MAX_GPU_NAME,
        f'a GPU model\'s name of at most {MAX_GPU_NAME} characters ("" where not known)',
    ),
}
assert set(PROFILE_RULES) == set(PROFILE_COLUMNS)
# Columns a producer may leave out, and what they read as then: profiles written before the column existed.
OPTIONAL_COLUMNS = {"gpu": ""}


def _with_optional(frame: pd.DataFrame) -> pd.DataFrame:
    missing = {name: value for name, value in OPTIONAL_COLUMNS.items() if name not in frame.columns}
    return frame.assign(**missing) if missing else frame


def check_profile(frame: Any) -> pd.DataFrame:
    """`frame` as a clean profile table: PROFILE_COLUMNS in order (extra columns dropped), typed per
    PROFILE_SCHEMA; else JobSpecError naming the column, the first bad value and what is allowed.

    Why here: the store keeps a trial's first profile for good, and every later power-limit choice, reuse
    and report reads it, so a profile is checked where it enters (the store calls this before it writes),
    against the one schema this module declares, and zeus_kfp.profiles stays free of the store.

    The rules keep what the producers make. A JIT profiler row (zeus_kfp.power.profiler) has a positive
    throughput (a window closes only after steps that did work) and a power >= 0: zero only for a
    window whose clock did not move, which PowerProfile.train_rows already skips when choosing,
    so it is kept rather than failing the trial's feedback. A trace's rows (zeus_kfp.simulate.trace_trial) are
    positive. No producer writes a marker row: a trial that measured nothing hands over no rows, and
    callers skip an empty profile, so an empty table is refused. Values are checked as they are, not
    coerced: the text "False" is not a flag, nor "300" a number.
    """
    columns = list(PROFILE_COLUMNS)
    if not isinstance(frame, pd.DataFrame):
        raise JobSpecError("profile", type(frame).__name__, f"a pandas DataFrame with columns {columns}")
    frame = _with_optional(frame)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise JobSpecError("profile", list(frame.columns), f"columns {columns} (missing {missing})")
    doubled = sorted({c for c in frame.columns if c in columns and list(frame.columns).count(c) > 1})
    if doubled:
        raise JobSpecError("profile", list(frame.columns), f"each of the columns {columns} once (twice: {doubled})")
    if frame.empty:
        raise JobSpecError("profile", "no rows", "at least one row (a trial that measured nothing stores no profile)")
    out = frame.loc[:, columns].reset_index(drop=True)
    for column in columns:
        ok, allowed = PROFILE_RULES[column]
        bad = [value for value in out[column].tolist() if not ok(value)]
        if bad:
            raise JobSpecError(column, bad[0], allowed)
    return out.astype(dict(PROFILE_SCHEMA))


IDENTITY_KEY = b"zeus.profile"  # the Parquet schema metadata that holds a profile's batch size, recurrence, trial


@dataclass(frozen=True, eq=False)
class PowerProfile:
    """A power profile: its rows (PROFILE_COLUMNS in PROFILE_SCHEMA's types) and, once the store holds it,
    the batch size, recurrence and trial that measured it (None before: a trial's own measurement)."""

    rows: pd.DataFrame
    batch_size: int | None = None
    recurrence: int | None = None
    trial: int | None = None

    @classmethod
    def of(cls, rows: Iterable[dict] | pd.DataFrame, **identity: int | None) -> PowerProfile:
        """Rows (dicts, or a frame with at least PROFILE_COLUMNS) as a profile, typed per PROFILE_SCHEMA."""
        frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows), columns=list(PROFILE_COLUMNS))
        frame = _with_optional(frame)
        frame = frame.assign(
            **{
                name: frame[name].astype(object).where(frame[name].notna(), value)
                for name, value in OPTIONAL_COLUMNS.items()
            }
        )
        return cls(frame.loc[:, list(PROFILE_COLUMNS)].astype(dict(PROFILE_SCHEMA)).reset_index(drop=True), **identity)

    @classmethod
    def empty(cls) -> PowerProfile:
        """No rows: a trial that measured nothing, or "profile this trial" where a reused one would go."""
        return cls.of([])

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def is_empty(self) -> bool:
        return self.rows.empty

    @property
    def simulated(self) -> bool:
        """Whether any figure came from no real GPU."""
        return bool(self.rows["simulated"].any())

    @property
    def gpu(self) -> str:
        """The GPU model that measured it ("" where not recorded): it is reused only on that model."""
        named = [str(name) for name in self.rows["gpu"].unique() if name]
        return " + ".join(named)

    def train_rows(self) -> np.ndarray:
        """A mask of the valid training rows (power and throughput positive and finite): what a limit is
        chosen from. numpy, not pandas: the simulator asks this for every trial it runs."""
        power = self.rows["average_power_w"].to_numpy(dtype=float)
        throughput = self.rows["throughput"].to_numpy(dtype=float)
        valid = (power > 0) & (throughput > 0) & np.isfinite(power) & np.isfinite(throughput)
        return valid & (self.rows["phase"].to_numpy(dtype=object) == "train")

    def is_usable(self) -> bool:
        """Has at least one valid training row to choose a limit from."""
        return bool(self.train_rows().any())

    def has_eval(self) -> bool:
        return bool((self.rows["phase"] == "eval").any())

    def to_parquet(self, path: str | Path | None = None) -> bytes:
        """The profile as Parquet of PROFILE_SCHEMA, the batch size, recurrence and trial in the schema's
        metadata: the one shape it crosses every file and artifact boundary in (a trial's log dir, the
        profile handed to the training child, a cluster trial's handoff, the KFP artifacts). Written to
        `path` too when given, through a temporary file and a rename: a reader (the runner after a killed
        child, a retried step) sees the old file or the whole new one, never half of one."""
        table = pa.Table.from_pandas(self.rows, preserve_index=False)
        identity = {"batch_size": self.batch_size, "recurrence": self.recurrence, "trial": self.trial}
        metadata = {**table.schema.metadata, IDENTITY_KEY: json.dumps(identity)}
        data = parquet_bytes(table.replace_schema_metadata(metadata))
        if path is not None:
            replace_file(path, data)
        return data

    @classmethod
    def read_parquet(cls, source: str | Path | bytes) -> PowerProfile:
        """`to_parquet`'s file (a path) or bytes as the profile it wrote, identity included. A column of
        OPTIONAL_COLUMNS may be absent (a profile written before it existed); ValueError naming the source
        when it is not Parquet, lacks a column, or holds a column in a type PROFILE_SCHEMA does not allow."""
        where = f"{len(source)} bytes" if isinstance(source, bytes) else str(source)
        try:
            # bytes through an Arrow-owned copy: a reader over Python bytes can abort the process at its exit
            table = read_parquet_bytes(source) if isinstance(source, bytes) else pq.read_table(source)
        except pa.ArrowInvalid as err:
            raise ValueError(f"{where}: not a power profile's Parquet ({err})") from err
        missing = sorted(set(PROFILE_COLUMNS) - set(table.column_names) - set(OPTIONAL_COLUMNS))
        if missing:
            raise ValueError(f"{where}: profile lacks columns {missing}")
        wrong = {
            name: str(table.schema.field(name).type)
            for name, kind in PROFILE_SCHEMA
            if name in table.column_names and not _ARROW_KINDS[kind](table.schema.field(name).type)
        }
        if wrong:
            allowed = {name: kind for name, kind in PROFILE_SCHEMA if name in wrong}
            raise ValueError(f"{where}: profile columns of the wrong type {wrong} (allowed: {allowed})")
        identity = json.loads((table.schema.metadata or {}).get(IDENTITY_KEY, b"{}"))
        return cls.of(table.to_pandas(), **identity)


# Which Arrow types a PROFILE_SCHEMA type is read from: its own, and what an empty or all-null column is stored as.
_ARROW_KINDS: dict[str, Callable[[pa.DataType], bool]] = {
    "string": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t),
    "float64": lambda t: pa.types.is_floating(t) or pa.types.is_integer(t) or pa.types.is_null(t),
    "bool": lambda t: pa.types.is_boolean(t) or pa.types.is_null(t),
}
assert {kind for _, kind in PROFILE_SCHEMA} <= set(_ARROW_KINDS)
