"""`zeus-kfp run`: the project's main job, locally through kfp.local, the same pipeline a cluster runs.

By default it runs a trace-backed job (trial backend "trace:<workload>/<gpu>", the measured Zeus
NSDI'23 traces; every figure simulated and labelled so) for enough recurrences that the bandit pays
off, prints each recurrence's trials, and ends with the job's cumulative cost, energy and time against
the default configuration and the oracle, with the simulator's figures for the same seed beside them
(and whether the simulator produced the very same trials). `--script zeus|plain` runs the real-torch
example instead, on this machine's GPU or the simulated one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from zeus.cli.app import app
from zeus.report.units import COST_UNIT, duration, si

DEFAULT_TRACE = "cifar100/v100"  # Zeus's own example: b0 = 1024 is far from the optimum, so tuning pays off fast
DEFAULT_RECURRENCES = 10  # enough for the bandit to pay off on the default trace (benchmarks/RESULTS.md)
EXAMPLE_JOB = "example"


def _recurrence_table(summary):
    from rich.table import Table

    table = Table(
        title=f"recurrence {summary.recurrence}: {'reached' if summary.reached else 'did NOT reach'} the target "
        f"in {len(summary.trials)} trial(s)",
        title_justify="left",
    )
    for col in ("attempt", "batch size", "power limit", f"cost ({COST_UNIT})", "energy", "time", "status"):
        table.add_column(col, justify="right")
    for t in summary.trials:
        limit = "-" if t.power_limit_w is None else f"{t.power_limit_w:.0f} W"
        cost, energy = si(t.cost, ""), si(t.energy_j, "J")
        table.add_row(str(t.attempt), str(t.batch_size), limit, cost, energy, duration(t.time_s), t.status)
    return table


def _failure_notes(summary) -> list[str]:
    """Why each failed trial failed (the script's own error), one line each: the table stays readable."""
    notes = []
    for t in summary.trials:
        if t.status == "failed" and t.reason:
            lines = [ln for ln in t.reason.strip().splitlines() if ln.strip()]
            notes.append(f"  attempt {t.attempt} failed: {lines[-1][:300] if lines else t.reason[:300]}")
    return notes


def _comparison_lines(comparison, policy: str, seed: int) -> list[str]:
    """The job's cumulative figures against the default config, the oracle and the simulator."""
    c = comparison
    rows = [
        ("this job (kfp.local)", c.live),
        (f"simulator, seed {seed}", c.simulated),
        ("default config", c.default),
        ("oracle", c.oracle),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"cumulative over {c.num_recurrences} recurrence(s), policy {policy}:"]
    lines.append(f"  {'':{width}}  {'cost (J)':>10}  {'energy':>10}  {'time':>9}")
    for name, fig in rows:
        lines.append(
            f"  {name:{width}}  {si(fig.cost, ''):>10}  {si(fig.energy_j, 'J'):>10}  {duration(fig.time_s):>9}"
        )
    saving = 1.0 - c.live.cost / c.default.cost
    lines.append(
        f"saving vs the default config: {saving:+.1%} of its cost; {c.live.cost / c.oracle.cost:.3f}x the oracle's cost"
    )
    if saving < 0:
        lines.append("  (negative while the bandit is still exploring: each new batch size costs a profiling epoch)")
    if c.identical:
        lines.append("the simulator produced the same trials, trial by trial (batch size, power limit, status, cost)")
    else:
        lines.append(f"the simulator parts ways at {c.first_difference}")
    return lines


def _bandit_table(state):
    from rich.table import Table

    table = Table(title="where the bandit stands (latest snapshot)", title_justify="left")
    for col in ("batch size", "stage", "observations", f"posterior mean cost ({COST_UNIT})", "pruned"):
        table.add_column(col, justify="right")
    for row in state.sort_values("batch_size").itertuples(index=False):
        mean = None if row.posterior_mean is None else float(row.posterior_mean)
        table.add_row(
            str(int(row.batch_size)),
            str(row.stage),
            str(int(row.num_observations)),
            si(mean, ""),
            "yes" if row.pruned else "no",
        )
    return table


def _saving_lines(store, spec, summaries) -> list[str]:
    """A script job's saving against the default configuration's cost, estimated from the store."""
    from zeus.report import default_config_cost

    baseline = default_config_cost(store.trials(spec.job_id), store.profiles(spec.job_id), spec)
    if not baseline.cost:
        return [f"saving vs the default config: not known yet ({baseline.how})"]
    lines = [
        f"default config (batch size {spec.default_batch_size}, max power): "
        f"cost {si(baseline.cost, 'J')} ({baseline.how})"
    ]
    for s in summaries:
        lines.append(
            f"  recurrence {s.recurrence}: cost {si(s.cost, 'J')} -> saving {1.0 - s.cost / baseline.cost:+.1%}"
        )
    return lines


RUN_HELP = (
    "Run recurrences of the example job locally through kfp.local (the same pipeline a cluster runs). By default "
    f"the trials replay the measured Zeus NSDI'23 traces ({DEFAULT_TRACE}; every figure simulated and labelled "
    "so); the job ends with its cumulative cost against the default config, the oracle and the simulator's run of "
    "the same seed. --script zeus|plain trains the real-torch example instead. Plots go to --plots-dir as PNG."
)


@app.command(help=RUN_HELP)
def run(
    recurrences: Annotated[int, typer.Option("--recurrences", "-r", help="Recurrences (pipeline runs) to run.")] = (
        DEFAULT_RECURRENCES
    ),
    store: Annotated[
        str | None,
        typer.Option(
            help="Store: a directory, file:// or s3://bucket/prefix. Default: $ZEUS_KFP_STORE or ./.zeus-kfp/store."
        ),
    ] = None,
    policy: Annotated[str, typer.Option(help="Batch-size policy: default or zeus-nsdi23.")] = "default",
    attempts: Annotated[int, typer.Option(help="Trials per recurrence at most (the retry loop's length).")] = 5,
    trace: Annotated[
        str, typer.Option(help="Trace workload/gpu the trials replay, e.g. cifar100/v100, squad/a40.")
    ] = DEFAULT_TRACE,
    script: Annotated[
        str | None,
        typer.Option(
            help="Train the real-torch example instead of replaying a trace: 'zeus' (ZeusDataLoader) or "
            "'plain' (metric from stdout)."
        ),
    ] = None,
    metrics_collector: Annotated[
        str | None,
        typer.Option(
            help="With --script plain: how its metrics are collected, Katib's metricsCollectorSpec as JSON or YAML, "
            "or @file.yaml (default: stdout, Katib's name=value pattern)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="The job's seed (decisions and trace samples derive from it).")] = 0,
    job_id: Annotated[
        str | None,
        typer.Option(help="Job id in the store (a new id starts afresh). Default: example, or example-<script>."),
    ] = None,
    plots_dir: Annotated[Path, typer.Option(help="Where to write the PNG plots.")] = Path("zeus-runs"),
    runs_dir: Annotated[
        Path | None,
        typer.Option(help="Where kfp.local keeps each recurrence's artifacts and log. Default: ./.zeus-kfp/runs."),
    ] = None,
) -> None:
    from rich.console import Console

    from pipelines.dag import EXAMPLE_PREPROCESS
    from pipelines.local import LocalRunError, run_local
    from zeus.job import JobSpecError
    from zeus.power import max_power_limit_w
    from zeus.report import write_plots
    from zeus.simulate.trial import TRACE_PREFIX, TraceBackend
    from zeus.store import JobSpecMismatchError, StoreError, open_store
    from zeus.train import example_command, example_spec
    from zeus.train.collectors import CollectorSpec

    console = Console(highlight=False)
    if script not in (None, "zeus", "plain"):
        typer.echo(f"error: invalid script={script!r}: allowed zeus, plain", err=True)
        raise typer.Exit(2)
    if metrics_collector and script != "plain":
        typer.echo("error: --metrics-collector is for --script plain (a Zeus-aware script reports by itself)", err=True)
        raise typer.Exit(2)
    try:
        collector = CollectorSpec.from_arg(metrics_collector) if metrics_collector else None
        if script is None:
            backend = TraceBackend.parse(TRACE_PREFIX + trace)
            spec = backend.spec(job_id or EXAMPLE_JOB, max_attempts=attempts, seed=seed)
            run_args = dict(trial_backend=backend.name)
        else:
            backend = None
            spec = example_spec(job_id=job_id or f"{EXAMPLE_JOB}-{script}").with_changes(
                max_attempts=attempts, seed=seed
            )
            max_w, simulated = max_power_limit_w()
            if not simulated:  # price time at this GPU's maximum power (Zeus's MAXPOWER), not the simulated V100's
                spec = spec.with_changes(max_power_w=max_w)
            run_args = dict(command=example_command(script), preprocess=EXAMPLE_PREPROCESS, zeus_aware=script == "zeus")
            if collector is not None:
                run_args["metrics_collector"] = collector.to_dict()
        opened = open_store(store)
    except (JobSpecError, ValueError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from err
    what = backend.source if backend else f"the {script} example script"
    console.print(
        f"zeus-kfp run: {recurrences} recurrence(s) of job {spec.job_id} ({what}; batch sizes "
        f"{list(spec.batch_sizes)}, default {spec.default_batch_size}, target {spec.metric_name} "
        f"{'>=' if spec.higher_is_better else '<='} {spec.target_metric:g}) with policy {policy}, seed {spec.seed}, "
        f"store {opened.uri}",
        soft_wrap=True,
    )
    status = console.status("starting")
    summaries = []

    def started(i: int, recurrence_id: str) -> None:
        message = f"recurrence {i + 1}/{recurrences} ({recurrence_id}): running through kfp.local ..."
        status.update(message)
        if not console.is_terminal:
            print(message, flush=True)

    def finished(summary) -> None:
        summaries.append(summary)
        console.print(_recurrence_table(summary))
        for note in _failure_notes(summary):
            console.print(note, markup=False, soft_wrap=True)

    try:
        with status:
            run_local(
                spec,
                recurrences=recurrences,
                store=opened.uri,
                policy=policy,
                attempts=attempts,
                runs_dir=runs_dir,
                on_start=started,
                on_recurrence=finished,
                **run_args,
            )
    except (JobSpecMismatchError, JobSpecError, ValueError) as err:
        console.print(f"refused: {err}", markup=False, soft_wrap=True)
        raise typer.Exit(2) from err
    except (LocalRunError, StoreError) as err:
        console.print(f"a recurrence failed: {err}", markup=False, soft_wrap=True)
        raise typer.Exit(1) from err
    trials, state = opened.trials(spec.job_id), opened.bandit_state(spec.job_id)
    if not state.empty:
        console.print(_bandit_table(state))
    if backend is not None:
        from zeus.simulate.replay import compare

        for line in _comparison_lines(compare(trials, spec, backend, policy), policy, spec.seed):
            console.print(line, markup=False, soft_wrap=True)
    else:
        for line in _saving_lines(opened, spec, summaries):
            console.print(line, markup=False, soft_wrap=True)
    plots = write_plots(trials, opened.profiles(spec.job_id), state, spec, plots_dir / spec.job_id)
    if any(s.simulated for s in summaries):
        source = backend.source if backend else "a simulated GPU"
        console.print(f"No GPU was measured: every power, energy, time and cost figure is {source}.", markup=False)
    console.print("plots: " + ", ".join(str(p) for p in plots), markup=False, soft_wrap=True)
    sys.stdout.flush()
