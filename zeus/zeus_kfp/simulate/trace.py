"""Trace loading: the NSDI'23 train and power traces turned into per-batch-size arrays.

The simulator's inner loop runs tens of thousands of trials per benchmark, so everything it
needs is precomputed here once per workload as small numpy arrays (no pandas in the loop).
Trace files are arguments; the defaults are the copies shipped as package data, and any GPU's
power trace with the same columns works unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

TRAIN_COLUMNS = ("dataset", "network", "batch_size", "optimizer", "run", "target_metric", "target_epoch")
POWER_COLUMNS = ("dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power")
SHIPPED_POWER_TRACES = ("v100", "a40")


def shipped_trace(name: str) -> Path:
    """Path of a shipped trace: 'train' or one of the GPU names in SHIPPED_POWER_TRACES."""
    if name != "train" and name not in SHIPPED_POWER_TRACES:
        raise ValueError(f"invalid trace={name!r}: allowed train, {', '.join(SHIPPED_POWER_TRACES)}")
    filename = "summary_train.csv" if name == "train" else f"summary_power_{name}.csv"
    return Path(str(resources.files("zeus_kfp.simulate") / "traces" / filename))


def read_trace(path: str | Path, columns: tuple[str, ...], what: str) -> pd.DataFrame:
    """Read a trace CSV and check it has the columns the simulator uses."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} trace not found: {path}")
    df = pd.read_csv(path)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"invalid {what} trace {path}: missing columns {missing}; needs {list(columns)}")
    return df


@lru_cache(maxsize=8)
def cached_trace(path: str, what: str) -> pd.DataFrame:
    """`read_trace` of a train ('train') or power trace, read once per process: the simulator and the
    trace backend ask for the same shipped files many times."""
    columns = TRAIN_COLUMNS if what == "train" else POWER_COLUMNS
    return read_trace(path, columns, what)


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: its arrays are not hashable
class SizeTrace:
    """One batch size of one workload on one GPU.

    `target_epochs[r]` is the epoch at which run r first reached the target (NaN: never);
    `time_per_epoch[k]` and `energy_per_epoch[k]` are at `power_limits[k]` (ascending).
    """

    batch_size: int
    target_epochs: np.ndarray
    power_limits: np.ndarray
    time_per_epoch: np.ndarray
    energy_per_epoch: np.ndarray


@dataclass(frozen=True)
class WorkloadTrace:
    """A workload's traces joined on (dataset, network, optimizer, batch size), restricted to one target."""

    sizes: dict[int, SizeTrace]
    power_limits: tuple[float, ...]  # every power limit in the joined trace, ascending
    max_power_w: float  # MAXPOWER in the cost: the largest power limit in the GPU's trace

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(sorted(self.sizes))


def load_workload_trace(
    train: pd.DataFrame,
    power: pd.DataFrame,
    *,
    dataset: str,
    network: str,
    optimizer: str,
    target_metric: float,
) -> WorkloadTrace:
    """Join the traces for one workload; batch sizes are those present in both traces (as Zeus does)."""
    key = ["dataset", "network", "batch_size", "optimizer"]
    t = train[
        (train.dataset == dataset)
        & (train.network == network)
        & (train.optimizer == optimizer)
        & np.isclose(train.target_metric, target_metric)
    ]
    p = power[(power.dataset == dataset) & (power.network == network) & (power.optimizer == optimizer)]
    if t.empty or p.empty:
        which = "train" if t.empty else "power"
        raise ValueError(
            f"no rows in the {which} trace for dataset={dataset!r}, network={network!r}, "
            f"optimizer={optimizer!r}, target_metric={target_metric}"
        )
    common = sorted(set(t.batch_size) & set(p.batch_size))
    if not common:
        raise ValueError(f"the train and power traces share no batch size for dataset={dataset!r}")
    sizes = {}
    for b in common:
        runs = t[t.batch_size == b].drop_duplicates(subset=[*key, "run"], keep="first")
        pw = p[p.batch_size == b].groupby("power_limit", as_index=False)[["time_per_epoch", "average_power"]].mean()
        pw = pw.sort_values("power_limit")
        tpe = pw.time_per_epoch.to_numpy(dtype=float)
        sizes[int(b)] = SizeTrace(
            batch_size=int(b),
            target_epochs=runs.target_epoch.to_numpy(dtype=float),
            power_limits=pw.power_limit.to_numpy(dtype=float),
            time_per_epoch=tpe,
            energy_per_epoch=tpe * pw.average_power.to_numpy(dtype=float),
        )
    limits = tuple(float(x) for x in sorted(set(p[p.batch_size.isin(common)].power_limit)))
    return WorkloadTrace(sizes=sizes, power_limits=limits, max_power_w=float(power.power_limit.max()))
