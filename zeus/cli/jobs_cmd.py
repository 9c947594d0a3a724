"""`zeus-kfp jobs` and `zeus-kfp show`: what the store holds, for people.

Read-only views over zeus.store; the numbers (per-recurrence totals, the default
configuration's cost, the saving) come from zeus.report so the terminal, the KFP UI report
and the notebook always agree.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from zeus.cli.app import app

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store", help="Store URI: a directory, file:///path or s3://bucket/prefix (default: $ZEUS_KFP_STORE)."
    ),
]
JOB_COLUMNS = [
    "job_id",
    "owner",
    "phase",
    "created_at",
    "batch_sizes",
    "default_batch_size",
    "target_metric",
    "eta_knob",
]
TRIAL_COLUMNS = [
    "recurrence", "recurrence_id", "attempt", "trial", "batch_size", "power_limit_w", "status",
    "num_epochs", "metric", "time_s", "energy_j", "cost", "reason",
]  # fmt: skip
PROFILE_COLUMNS = ["trial", "batch_size", "phase", "power_limit_w", "average_power_w", "throughput"]
STATE_COLUMNS = ["batch_size", "stage", "num_observations", "posterior_mean", "posterior_precision", "pruned"]


def _format(value: Any) -> str:
    if value is None or value is pd.NA or value is pd.NaT:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, pd.Timestamp):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def frame_table(frame: pd.DataFrame, columns: list[str], title: str) -> Table:
    """A rich Table of the `columns` of `frame` that exist, numbers right-aligned."""
    cols = [c for c in columns if c in frame.columns]
    table = Table(title=title, title_justify="left")
    for col in cols:
        numeric = pd.api.types.is_numeric_dtype(frame[col]) and not pd.api.types.is_bool_dtype(frame[col])
        table.add_column(col, justify="right" if numeric else "left")
    for row in frame[cols].itertuples(index=False):
        table.add_row(*(_format(v) for v in row))
    return table


# What a bad --store, --phase or job id raises: the store's errors name the field and what is allowed.
USER_ERRORS = (ValueError, LookupError)


def _fail(err: Exception, hint: str = "") -> typer.Exit:
    typer.echo(f"error: {err}{hint}", err=True)
    return typer.Exit(2)


def _open(store: str | None) -> Any:
    """The store, or a clean exit naming the bad --store value."""
    from zeus.store import StoreError, open_store

    try:
        return open_store(store)
    except (StoreError, *USER_ERRORS) as err:
        raise _fail(err) from None


@app.command()
def jobs(
    phase: Annotated[str | None, typer.Option(help="Only jobs in this phase: running or completed.")] = None,
    owner: Annotated[str | None, typer.Option(help="Only this owner's jobs.")] = None,
    store: StoreOpt = None,
) -> None:
    """List the jobs in the store."""
    from zeus.store import StoreError

    opened = _open(store)
    try:
        frame = opened.list_jobs(phase=phase, owner=owner)
    except (StoreError, *USER_ERRORS) as err:
        raise _fail(err) from None
    console = Console()
    if frame.empty:
        console.print(f"no jobs in {opened.uri}" + (f" with phase={phase}" if phase else ""))
        return
    console.print(frame_table(frame, JOB_COLUMNS, f"jobs in {opened.uri}"))


def _title(what: str, total: int, last: int) -> str:
    return what if total <= last else f"{what} (last {last} of {total}; --last to see more)"


@app.command()
def show(
    job: Annotated[str, typer.Argument(help="The job id.")],
    store: StoreOpt = None,
    plots: Annotated[Path | None, typer.Option(help="Write the job's figures as PNG into this directory.")] = None,
    last: Annotated[int, typer.Option(min=1, help="Show the last N trials and recurrences.")] = 50,
) -> None:
    """One job: its spec, trials, per-recurrence cost against the default config, power profile
    and bandit state; --plots writes the figures. Long histories show their last --last rows
    (the totals and the plots always use all of them)."""
    from zeus.report import default_config_cost, per_recurrence, write_plots
    from zeus.report.frames import is_simulated
    from zeus.store import StoreError

    opened = _open(store)
    try:
        spec = opened.get_job(job)
        trials, profiles, state = opened.trials(job), opened.profiles(job), opened.bandit_state(job)
    except (StoreError, *USER_ERRORS) as err:
        raise _fail(err, f" (`zeus-kfp jobs --store {opened.uri}` lists the jobs)") from None
    console = Console()
    console.print(f"[bold]{spec.job_id}[/bold] in {opened.uri}")
    console.print(", ".join(f"{k}={_format(v)}" for k, v in spec.to_dict().items() if k != "job_id"))
    if trials.empty:
        console.print("no trials yet")
    else:
        console.print(frame_table(trials.tail(last), TRIAL_COLUMNS, _title("trials", len(trials), last)))
        rec = per_recurrence(trials)
        console.print(frame_table(rec.tail(last), list(rec.columns), _title("recurrences", len(rec), last)))
        baseline = default_config_cost(trials, profiles, spec)
        if baseline.cost is None:
            console.print(f"default config cost: unknown ({baseline.how})")
        elif not rec.empty:
            saving = 1.0 - rec["cost"].iloc[-1] / baseline.cost
            console.print(
                f"default config cost ~ {baseline.cost:,.1f} ({baseline.how}); latest recurrence saved {saving:.1%}"
            )
    if not profiles.empty:
        latest = profiles[profiles["trial"] == profiles.groupby("batch_size")["trial"].transform("max")]
        console.print(frame_table(latest, PROFILE_COLUMNS, "power profile (latest per batch size)"))
    if not state.empty:
        console.print(frame_table(state, STATE_COLUMNS, "bandit state (latest snapshot)"))
    if is_simulated(trials, profiles):
        console.print("[yellow]note: measurements come from a simulated GPU[/yellow]")
    if plots is not None:
        for path in write_plots(trials, profiles, state, spec, plots):
            console.print(f"wrote {path}")
