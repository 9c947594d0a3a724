"""The fleet's figure: cumulative energy saved over time, one stacked band per job.

Built on `matplotlib.figure.Figure`, not pyplot (no global state, no GUI backend), as zeus_kfp.report.plots is.
A band rises by a recurrence's saving when that recurrence ends and falls where exploring cost more than the
default configuration: the stack's top is the fleet's cumulative saving at that time, the same figure as the
total row's energy saved at the right edge. Bands are stacked from the time axis up in job order; a negative
band (a job still paying for its exploration) is stacked below zero, apart from the positive ones, so no band
hides another.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from zeus_kfp.fleet.figures import J_PER_KWH, Fleet

PLOT_NAME = "fleet_energy_saved.png"
DIRECTORY_PLOT = "fleet.png"  # what `fleet --plot DIR` writes into DIR


def png_path(target: str | Path) -> Path:
    """Where `fleet --plot TARGET` writes: into a directory (one that exists, or a path ending in a separator) as
    fleet.png; else the file, with ".png" added where its name does not end so (a PNG named like one)."""
    text = str(target)
    path = Path(text)
    if path.is_dir() or text.endswith((os.sep, "/")):
        return path / DIRECTORY_PLOT
    return path if path.suffix.lower() == ".png" else path.with_name(path.name + ".png")


def title_of(fleet: Fleet) -> str:
    """The plot's title: what it shows, the namespace, and whether its figures are simulated (every job's, or
    which jobs'), as every other figure says it in its title: a reader must never take a simulation for a
    measurement."""
    where = f" ({fleet.namespace})" if fleet.namespace else ""
    title = f"Energy saved against the default configuration, per job{where}"
    simulated = [j.job_id for j in fleet.jobs if j.simulated and j.energy_saved_j is not None]
    counted = [j for j in fleet.jobs if j.energy_saved_j is not None]
    if simulated and len(simulated) == len(counted):
        return title + "\nsimulated: no GPU was measured"
    if simulated:
        return title + f"\nsimulated: {', '.join(simulated)}"
    return title


def cumulative_by_job(timeline: pd.DataFrame) -> pd.DataFrame:
    """Per job (columns, in job order), its cumulative energy saved in kWh at each time any job's recurrence
    ended (the index, sorted): 0 before its first, then a step at each of its recurrences."""
    if timeline.empty:
        return pd.DataFrame()
    frame = timeline.assign(at=pd.to_datetime(timeline["at"], utc=True)).sort_values(["at", "job_id", "recurrence"])
    steps = frame.pivot_table(index="at", columns="job_id", values="energy_saved_j", aggfunc="sum", fill_value=0.0)
    return steps.cumsum() / J_PER_KWH


def plot_fleet(fleet: Fleet, path: str | Path) -> Path | None:
    """Write the stacked plot of `fleet` as PNG at `path` (png_path: a directory or a file); None (nothing written)
    when no job has a saving yet."""
    cumulative = cumulative_by_job(fleet.timeline)
    if cumulative.empty:
        return None
    times = cumulative.index.tz_convert(None).to_pydatetime()
    fig = Figure(figsize=(9, 4.5))
    ax = fig.add_subplot()
    up = np.zeros(len(cumulative))
    down = np.zeros(len(cumulative))
    for job in cumulative.columns:
        values = cumulative[job].to_numpy()
        base = np.where(values >= 0, up, down)
        ax.fill_between(times, base, base + values, step="post", label=str(job), alpha=0.8)
        up = np.where(values >= 0, up + values, up)
        down = np.where(values < 0, down + values, down)
    ax.step(times, cumulative.sum(axis=1).to_numpy(), where="post", color="black", linewidth=1.2, label="fleet")
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel("energy saved, cumulative (kWh)")
    title = title_of(fleet)
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small")
    fig.autofmt_xdate()
    fig.tight_layout()
    path = png_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    description = f"total {cumulative.sum(axis=1).iloc[-1]:.6g} kWh"  # what a test (or a tool) reads off the PNG
    metadata = {"Title": title.replace("\n", "; "), "Software": "zeus-kfp", "Description": description}
    fig.savefig(path, format="png", dpi=100, metadata=metadata)
    return path
