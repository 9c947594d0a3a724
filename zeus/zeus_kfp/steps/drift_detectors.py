"""Drift detectors: did the job's input data change since the last recurrence enough to train again?

The gate (zeus_kfp.steps.gate) asks the run's detector (RunSettings.drift_detector) for one statistic, compares
it with the run's threshold, and stores it with the recurrence's begin entry (zeus_kfp.store.gating), so `show`
lists it and the policies can tell which recurrences drift opened. Built-ins, each over `drift_data` (a
Parquet or CSV file, or a directory of them):
- fingerprint: 1 if the data's bytes changed (SHA-256 over its files' names and bytes), else 0;
- rows: the relative change of the row count, |n - n_last| / n_last;
- psi: the largest per-column Population Stability Index, over ten bins at the last data's deciles;
- ks: the largest per-column two-sample Kolmogorov-Smirnov statistic (scipy.stats.ks_2samp);
- module:function: the user's function(current: DataFrame, previous: DataFrame) -> float, `previous` being
  the last recurrence's stored sample (one column per numeric column, NaN-padded).

What is compared with is not the last data itself but its summary, stored as Parquet under the job
(Store.put_drift_summary): each numeric column's values, or an evenly spaced sample of its sorted values
when there are more than MAX_SAMPLE (a quantile sketch: PSI and KS only need the distribution), with the
row count and fingerprint in its metadata. The first recurrence, or one after a recurrence with no summary,
has nothing to compare with: no statistic (None), so drift never opens it (time does).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from zeus_kfp.errors import FieldError
from zeus_kfp.parquet_bytes import parquet_bytes, read_parquet_bytes
from zeus_kfp.run_settings import NO_DRIFT, RunSettings

MAX_SAMPLE = 10_000  # values kept per column: KS and PSI on a quantile sketch this fine differ by < 1e-4
PSI_BINS = 10
PSI_FLOOR = 1e-4  # an empty bin's share, so that ln(a / e) stays finite (the usual PSI convention)
DATA_SUFFIXES = (".parquet", ".csv")


@dataclass(frozen=True)
class DataSummary:
    """What is kept of one recurrence's input data: its row count, fingerprint and per-column samples."""

    rows: int
    fingerprint: str
    samples: dict[str, np.ndarray]

    def to_parquet(self) -> bytes:
        longest = max((len(v) for v in self.samples.values()), default=0)
        columns = {name: np.pad(v.astype(float), (0, longest - len(v)), constant_values=np.nan)
                   for name, v in self.samples.items()}  # fmt: skip
        table = pa.table(columns) if columns else pa.table({"_": pa.array([], pa.float64())})
        meta = {b"zeus.rows": str(self.rows).encode(), b"zeus.fingerprint": self.fingerprint.encode()}
        return parquet_bytes(table.replace_schema_metadata(meta))

    @classmethod
    def from_parquet(cls, data: bytes) -> DataSummary:
        table = read_parquet_bytes(data)
        meta = table.schema.metadata or {}
        samples = {name: _finite(table.column(name).to_numpy()) for name in table.column_names if name != "_"}
        return cls(int(meta[b"zeus.rows"]), meta[b"zeus.fingerprint"].decode(), samples)

    def frame(self) -> pd.DataFrame:
        """The samples as one frame (shorter columns NaN-padded): what a user's detector gets as `previous`."""
        return pd.DataFrame({name: pd.Series(values) for name, values in self.samples.items()})


def data_files(path: str | Path) -> list[Path]:
    """The data files at `path`: the file itself, or a directory's Parquet and CSV files (recursively, sorted)."""
    root = Path(path)
    if root.is_file():
        found = [root]
    elif root.is_dir():
        found = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in DATA_SUFFIXES)
    else:
        found = []
    if not found or any(p.suffix.lower() not in DATA_SUFFIXES for p in found):
        raise FieldError("drift_data", str(path), "a Parquet or CSV file, or a directory holding some")
    return found


def load_data(path: str | Path) -> pd.DataFrame:
    frames = [pd.read_parquet(p) if p.suffix.lower() == ".parquet" else pd.read_csv(p) for p in data_files(path)]
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def fingerprint(path: str | Path) -> str:
    root = Path(path)
    digest = hashlib.sha256()
    for p in data_files(root):
        digest.update(str(p.relative_to(root) if root.is_dir() else p.name).encode() + b"\0")
        digest.update(p.read_bytes())
    return digest.hexdigest()


def _finite(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    return values[np.isfinite(values)]


def summarize(frame: pd.DataFrame, print_: str) -> DataSummary:
    """The summary of one recurrence's data (`print_`: its fingerprint)."""
    samples = {}
    for name in frame.columns:
        column = frame[name]
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            values = np.sort(_finite(column.to_numpy(dtype=float, na_value=np.nan)))
            if len(values) > MAX_SAMPLE:
                values = values[np.linspace(0, len(values) - 1, MAX_SAMPLE).round().astype(int)]
            samples[str(name)] = values
    return DataSummary(len(frame), print_, samples)


def psi(expected: np.ndarray, actual: np.ndarray, bins: int = PSI_BINS) -> float:
    """Population Stability Index of `actual` against `expected`: sum over bins of (a - e) ln(a / e), the bins
    cut at `expected`'s quantiles (open at both ends), shares floored at PSI_FLOOR. NaN if either is empty."""
    if not len(expected) or not len(actual):
        return math.nan
    inner = np.unique(np.quantile(expected, np.linspace(0, 1, bins + 1))[1:-1])
    edges = np.concatenate([[-np.inf], inner, [np.inf]])
    e = np.maximum(np.histogram(expected, edges)[0] / len(expected), PSI_FLOOR)
    a = np.maximum(np.histogram(actual, edges)[0] / len(actual), PSI_FLOOR)
    return float(np.sum((a - e) * np.log(a / e)))


def ks(expected: np.ndarray, actual: np.ndarray) -> float:
    from scipy.stats import ks_2samp  # scipy loads in ~0.3 s: only a gate with this detector pays for it

    if not len(expected) or not len(actual):
        return math.nan
    return float(ks_2samp(expected, actual).statistic)


def _per_column(test, previous: DataSummary, current: DataSummary) -> float | None:
    values = [test(previous.samples[c], current.samples[c]) for c in previous.samples if c in current.samples]
    values = [v for v in values if not math.isnan(v)]
    return max(values) if values else None


def statistic(detector: str, current: DataSummary, frame: pd.DataFrame, previous: DataSummary) -> float | None:
    """The detector's statistic for the current data (its summary, and the data) against the last summary."""
    if detector == "fingerprint":
        return 0.0 if current.fingerprint == previous.fingerprint else 1.0
    if detector == "rows":
        return abs(current.rows - previous.rows) / max(previous.rows, 1)
    if detector == "psi":
        return _per_column(psi, previous, current)
    if detector == "ks":
        return _per_column(ks, previous, current)
    from zeus_kfp.steps.preprocess import load_callable  # a user's module:function, loaded as preprocess loads one

    value = load_callable(detector, what="drift detector")(frame, previous.frame())
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FieldError("drift_detector", detector, f"a function returning a finite number (it returned {value!r})")
    return float(value)


def measure(run: RunSettings, previous: bytes | None) -> tuple[float | None, bytes]:
    """The drift statistic of `run`'s detector against `previous` (the last recurrence's summary; None: none
    stored) and this data's summary to store. None when the detector is "none" or there is nothing to compare
    with."""
    if run.drift_detector == NO_DRIFT:
        return None, b""
    frame = load_data(run.drift_data)
    current = summarize(frame, fingerprint(run.drift_data))
    if previous is None:
        return None, current.to_parquet()
    return statistic(run.drift_detector, current, frame, DataSummary.from_parquet(previous)), current.to_parquet()
