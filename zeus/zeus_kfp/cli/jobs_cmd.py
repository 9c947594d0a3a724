"""`zeus-kfp jobs` and `zeus-kfp show`: what the store holds, for people (and with --json, for machines).

Read-only views over zeus_kfp.store; the numbers (per-recurrence totals, the default
configuration's cost, the saving) come from zeus_kfp.report so the terminal, the KFP UI report
and the notebook always agree. Tables fit the terminal (zeus_kfp.cli.tables); --wide shows every
column, --json prints the same data as one JSON document.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from zeus_kfp.cli.application import app
from zeus_kfp.cli.stores import open_for_reading
from zeus_kfp.cli.tables import Column, console, print_table
from zeus_kfp.cli.trial_view import missing, print_bandit_state, print_trials
from zeus_kfp.errors import FieldError
from zeus_kfp.report.units import COST_UNIT, duration, si
from zeus_kfp.run_settings import NO_DRIFT
from zeus_kfp.trials import trial_columns, trials_of

if TYPE_CHECKING:
    import pandas as pd

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store", help="Store URI: a directory, file:///path or s3://bucket/prefix (default: $ZEUS_KFP_STORE)."
    ),
]
WideOpt = Annotated[bool, typer.Option("--wide", help="Every column at full width, however wide the lines get.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the data as one JSON document instead of tables.")]

# The trial columns `show` prints, most important first (keys of zeus_kfp.cli.trial_view.trial_fields()).
SHOW_TRIAL_FIELDS = trial_columns(
    "recurrence", "attempt", "batch_size", "power_limit_w", "cost", "status",
    "energy_j", "time_s", "metric", "num_epochs", "trial", "recurrence_id",
)  # fmt: skip


def _cell(value: Any) -> str:
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    import pandas as pd

    if missing(value):
        return "-"
    if isinstance(value, pd.Timestamp):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, (list, tuple)):
        return ",".join(str(int(v)) for v in value)
    if isinstance(value, (bool,)):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _json_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: timestamps as ISO 8601, NaN/NA as null (pandas' own JSON writer)."""
    return json.loads(frame.to_json(orient="records", date_format="iso")) if not frame.empty else []


def _target(row: Any) -> str:
    return f"{row['metric_name']} {'>=' if row['higher_is_better'] else '<='} {row['target_metric']:g}"


JOB_COLUMNS = [
    Column("job", keep=True, justify="left"),
    Column("phase", keep=True, justify="left"),
    Column("default batch size", keep=True),
    Column("target", justify="left"),
    Column("batch sizes", justify="left"),
    Column("owner", justify="left"),
    Column("created", justify="left"),
    Column("eta"),
]


@app.command()
def jobs(
    phase: Annotated[str | None, typer.Option(help="Only jobs in this phase: running or completed.")] = None,
    owner: Annotated[str | None, typer.Option(help="Only this owner's jobs.")] = None,
    store: StoreOpt = None,
    wide: WideOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """List the jobs in the store. phase: running while a recurrence is in flight, completed when
    none is (also after one was interrupted)."""
    opened = open_for_reading(store)
    frame = opened.list_jobs(phase=phase, owner=owner, in_force=True)
    if as_json:
        typer.echo(json.dumps({"store": opened.uri, "jobs": _json_records(frame)}, indent=2))
        return
    out = console(wide=wide)
    if frame.empty:
        out.print(f"no jobs in {opened.uri}" + (f" with phase={phase}" if phase else ""), soft_wrap=True)
        return
    rows = [
        [r["job_id"], r["phase"], str(r["default_batch_size"]), _target(r), _cell(r["batch_sizes"]),
         r["owner"] or "-", _cell(r["created_at"]), f"{r['eta_knob']:g}"]
        for r in frame.to_dict("records")
    ]  # fmt: skip
    print_table(out, f"jobs in {opened.uri}", JOB_COLUMNS, rows, wide=wide)


def _title(what: str, total: int, last: int) -> str:
    return what if total <= last else f"{what} (last {last} of {total}; --last to see more)"


OUTCOME_WORDS = {
    "reached": "yes",
    "missed": "no",
    "failed": "failed",
}  # zeus_kfp.report.numbers: a recurrence's outcome
RECURRENCE_COLUMNS = [
    Column("recurrence", keep=True),
    Column("reached", keep=True, justify="left"),
    Column("batch sizes", keep=True, justify="left"),
    Column("cost (J)", keep=True),
    Column("energy"),
    Column("time"),
    Column("recurrence id", justify="left"),
]
GATE_COLUMNS = [  # each run the recurrence gate answered (zeus_kfp.steps.gate), with the drift statistic it stored
    Column("recurrence", keep=True),
    Column("gate", keep=True, justify="left"),
    Column("drift", keep=True, justify="left"),
    Column("asked at", justify="left"),
    Column("run id", justify="left"),
]


def _gate_rows(runs: pd.DataFrame) -> list[list[str]]:
    import pandas as pd  # deferred: `zeus-kfp --help` loads no pandas; show has loaded it already

    rows = []
    for r in runs.to_dict("records"):
        stat = r["drift_stat"]
        drift = "-" if r["drift_detector"] in (None, NO_DRIFT) else (
            f"{r['drift_detector']} {'n/a' if pd.isna(stat) else f'{stat:.4g}'} (threshold {r['drift_threshold']:g})"
        )  # fmt: skip
        gate = ("opened: " if r["opened"] else "skipped: ") + r["why"] + (" (forced)" if r["forced"] else "")
        number = "-" if pd.isna(r["recurrence"]) else str(r["recurrence"])
        rows.append([number, gate, drift, f"{r['at']:%Y-%m-%d %H:%M:%S}", r["recurrence_id"]])
    return rows


PROFILE_TABLE = [  # the columns `show` prints of the profiles (zeus_kfp.profiles has the stored ones)
    Column("batch size", keep=True),
    Column("phase", keep=True, justify="left"),
    Column("power limit", keep=True),
    Column("average power", keep=True),
    Column("throughput (/s)"),
    Column("trial"),
]


def saved_rows(saved: Any) -> list[dict[str, Any]]:
    """Per recurrence, its saving against the default config (null without a baseline, or for a recurrence
    whose every trial failed) and the energy its failed trials wasted."""
    rows = saved.recurrences[["recurrence", "saving", "failed_energy_j"]].astype({"recurrence": int})
    return [
        {"recurrence": r, "saving": None if s != s else s, "failed_energy_j": float(w)}
        for r, s, w in rows.itertuples(index=False)
    ]


def saving_of_job(saved: Any) -> dict[str, Any]:
    """The cumulative saving, each recurrence's, and how many trials met the target at once (then no saving)."""
    return {"cumulative": saved.cumulative, "per_recurrence": saved_rows(saved), "met_at_once": saved.met_at_once}


def failed_totals(saved: Any) -> dict[str, Any]:
    """The job's failed trials, apart from the saving: how many, their energy, cost and time, and the recurrences
    left out (every trial of them failed)."""
    from zeus_kfp.report.numbers import FAILED

    rec = saved.recurrences
    return {
        "trials": int(rec["failed_trials"].sum()),
        "energy_j": float(rec["failed_energy_j"].sum()),
        "cost": float(rec["failed_cost"].sum()),
        "time_s": float(rec["failed_time_s"].sum()),
        "recurrences_left_out": [int(r) for r in rec.loc[rec["outcome"] == FAILED, "recurrence"]],
    }


def spec_lines(opened: Any, spec: Any) -> list[str]:
    """What `show` says under the spec: each spec a run replaced and the trials left out with it, and how the job's
    script reports (its latest recurrence's record)."""
    from zeus_kfp.report.numbers import finished_trials
    from zeus_kfp.steps.gate import describe_reads
    from zeus_kfp.store.errors import changes_text

    lines = []
    history = opened.spec_history(spec.job_id)
    if len(history) > 1:
        left = opened.replaced_trials(spec.job_id)
        done = finished_trials(left)
        figures = f"cost {si(float(done['cost'].sum()), COST_UNIT)}, energy {si(float(done['energy_j'].sum()), 'J')}, "
        figures += f"time {duration(float(done['time_s'].sum()))}"
        for (_, old), (number, new) in itertools.pairwise(history):
            lines.append(f"spec replaced at recurrence {number} ({changes_text(old.diff(new))})")
        lines.append(
            f"  left out: the {len(left)} trial(s) of {left['recurrence'].nunique()} recurrence(s) under an earlier "
            f"spec, {int(left['reached'].sum()) or 'none'} reached ({figures}); `show --json` lists them as "
            "replaced_trials"
        )
    reads = opened.reads(spec.job_id)
    if reads is not None:
        lines.append(f"{describe_reads(spec.metric_name, reads)} (as recurrence {reads['recurrence']} did)")
    return lines


def _show_json(opened: Any, spec: Any, trials: pd.DataFrame, profiles: pd.DataFrame, state: pd.DataFrame) -> str:
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.report import per_recurrence, savings_of

    saved = savings_of(trials, profiles, spec) if not trials.empty else None
    baseline = saved.baseline if saved is not None else None
    data = {
        "store": opened.uri,
        "job": spec.to_dict(),
        "trials": _json_records(trials),
        "recurrences": _json_records(per_recurrence(trials)) if not trials.empty else [],
        "runs": _json_records(opened.recurrences(spec.job_id)),  # the recurrence gate's answers, drift statistics
        "default_config_cost": None if baseline is None else {"cost": baseline.cost, "how": baseline.how},
        "saving": None if saved is None else saving_of_job(saved),
        "saved": None if saved is None or saved.saved() is None else saved.saved().to_dict(),  # J, J, s (as fleet)
        "failed": None if saved is None else failed_totals(saved),
        "cost_unit": COST_UNIT,
        "spec_history": [{"recurrence": n, "spec": s.to_dict()} for n, s in opened.spec_history(spec.job_id)],
        "replaced_trials": _json_records(opened.replaced_trials(spec.job_id)),
        "reads": opened.reads(spec.job_id),
        "profiles": _json_records(profiles),
        "bandit_state": _json_records(state),
    }
    return json.dumps(data, indent=2)


@app.command()
def show(
    job: Annotated[str, typer.Argument(help="The job id.")],
    store: StoreOpt = None,
    plots: Annotated[Path | None, typer.Option(help="Write the job's figures as PNG into this directory.")] = None,
    last: Annotated[int, typer.Option(min=1, help="Show the last N trials and recurrences.")] = 50,
    wide: WideOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """One job: its spec, trials, per-recurrence cost against the default config, power profile
    and bandit state; --plots writes the figures. Long histories show their last --last rows
    (the totals and the plots always use all of them). Costs are in joules (docs/reference.md: glossary).
    The bandit state is the default policy's view of the history: the store does not record
    which policy a run used (a run parameter)."""
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.report import arm_frame, per_recurrence, savings_of, write_plots
    from zeus_kfp.report.numbers import profile_states, spent
    from zeus_kfp.store import UnknownJobError

    opened = open_for_reading(store)
    try:
        spec = opened.get_job(job)
    except UnknownJobError as err:
        raise UnknownJobError(f"{err} (`zeus-kfp jobs --store {opened.uri}` lists the jobs)") from None
    trials, profiles = opened.trials(job), opened.profiles(job)
    state = arm_frame(spec, opened.history(job))
    if as_json:
        typer.echo(_show_json(opened, spec, trials, profiles, state))
        return
    out = console(wide=wide)
    out.print(f"[bold]{spec.job_id}[/bold] in {opened.uri}", soft_wrap=True)
    out.print(", ".join(f"{k}={_cell(v)}" for k, v in spec.to_dict().items() if k != "job_id"), markup=False)
    for line in spec_lines(opened, spec):
        out.print(line, markup=False, soft_wrap=True)
    if trials.empty:
        out.print("no trials yet")
    else:
        shown = trials_of(trials.tail(last))
        print_trials(out, _title("trials", len(trials), last), shown, SHOW_TRIAL_FIELDS, wide=wide)
        rec = per_recurrence(trials).tail(last)
        rows = [
            [str(r["recurrence"]), OUTCOME_WORDS[r["outcome"]], r["batch_sizes"], si(cost, ""), si(energy, "J"),
             duration(time_s), r["recurrence_id"]]
            for r in rec.to_dict("records")
            for cost, energy, time_s in [spent(r)]  # the failed trials' too: what the trials table reads
        ]  # fmt: skip
        print_table(out, _title("recurrences", len(per_recurrence(trials)), last), RECURRENCE_COLUMNS, rows, wide=wide)
        for line in savings_of(trials, profiles, spec).lines():  # the lines `run` prints, from the same numbers
            if line:
                out.print(line, markup=False)
    runs = opened.recurrences(job)
    if (runs["why"] != "plain").any():  # runs the recurrence gate answered: opened or skipped, and why
        print_table(out, _title("runs (recurrence gate)", len(runs), last), GATE_COLUMNS, _gate_rows(runs.tail(last)),
                    wide=wide)  # fmt: skip
    if not profiles.empty:
        latest = profiles[profiles["trial"] == profiles.groupby("batch_size")["trial"].transform("max")]
        rows = [
            [str(r["batch_size"]), r["phase"], f"{r['power_limit_w']:.0f} W", f"{r['average_power_w']:.1f} W",
             f"{r['throughput']:.4g}", str(r["trial"])]
            for r in latest.to_dict("records")
        ]  # fmt: skip
        print_table(out, "power profile (latest per batch size)", PROFILE_TABLE, rows, wide=wide)
        for batch_size, state_text in profile_states(trials, profiles).items():
            out.print(f"power profile, batch size {batch_size}: {state_text}", markup=False)
    if not state.empty:
        print_bandit_state(out, state, wide=wide)
    if plots is not None:
        for path in write_plots(trials, profiles, state, spec, plots):
            out.print(f"wrote {path}", soft_wrap=True)


@app.command()
def compact(
    job: Annotated[str, typer.Argument(help="The job id.")],
    store: StoreOpt = None,
) -> None:
    """Write the job's log as one snapshot, so reads fetch one object instead of every event, and remove
    the snapshots it supersedes where the store allows deletes. The report step does this after every
    recurrence; run it by hand after importing or repairing a store. Safe while the job runs."""
    opened = open_for_reading(store)
    opened.get_job(job)  # an unknown job is an error, not an empty compaction
    result = opened.compact(job)
    if result.written is None:
        typer.echo(f"{job}: already compact (slots 1..{result.upto} in {opened.uri})")
    else:
        typer.echo(f"{job}: wrote a snapshot of slots 1..{result.upto} ({result.written})")
    if result.deleted:
        typer.echo(f"removed {result.deleted} superseded object(s)")
    if result.delete_refused:
        typer.echo(
            "the store refused deletes (DeleteObject not granted): superseded snapshots are kept, nothing is lost"
        )


@app.command()
def delete(
    job: Annotated[str, typer.Argument(help="The job id.")],
    store: StoreOpt = None,
    yes: Annotated[bool, typer.Option("--yes", help="Delete without asking (for scripts).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Delete a job whose phase is running.")] = False,
) -> None:
    """Delete a job and its whole history from the store (a junk job: a typo'd id, a test). The bandit
    forgets everything it learnt for the job; nothing else in the store changes. A job whose phase is running
    is refused unless --force (a recurrence of it may be in flight)."""
    from zeus_kfp.store import StoreError

    opened = open_for_reading(store)
    try:
        opened.get_job(job)  # an unknown job is an error naming the store
    except StoreError as exc:  # a damaged spec: the job is still deleted, whatever it holds
        typer.echo(f"warning: {exc}", err=True)
    phases = opened.list_jobs()
    running = not phases.empty and (phases.loc[phases["job_id"] == job, "phase"] == "running").any()
    if running and not force:
        raise FieldError("job", job, "a job that is not running (its phase is running; --force deletes it anyway)")
    try:
        trials: int | str = len(opened.trials(job))
    except StoreError:
        trials = "an unreadable number of"
    if not yes:
        typer.confirm(f"delete job {job} and its {trials} trial(s) from {opened.uri}?", abort=True)
    removed = opened.delete_job(job)
    typer.echo(f"deleted job {job}: {trials} trial(s), {removed} object(s) from {opened.uri}")
