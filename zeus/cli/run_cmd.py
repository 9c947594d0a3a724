"""`zeus-kfp run`: a job, locally through kfp.local, the same pipeline a cluster runs.

By default it runs a trace-backed job (trial backend "trace:<workload>/<gpu>", the measured Zeus
NSDI'23 traces; every figure simulated and labelled so) for enough recurrences that the bandit pays
off, prints each recurrence's trials, and ends with the job's cumulative cost, energy and time against
the default configuration and the oracle, with the simulator's figures for the same seed beside them
(and whether the simulator produced the very same trials). `--script zeus|plain` runs the real-torch
example instead, on this machine's GPU or the simulated one; `--command` runs your own training
script with your own JobSpec (zeus.cli.own_job).

Progress: one line per step ("recurrence 2/10: attempt 1: train (batch size 64, exploration)") when
the output is not a terminal, a spinner when it is. Ctrl-C (SIGINT) or SIGTERM records the trial in
flight as failed and says so in one line (pipelines.local.RunInterrupted).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from zeus.cli.app import app
from zeus.cli.own_job import setting_options
from zeus.errors import FieldError

DEFAULT_TRACE = "cifar100/v100"  # Zeus's own example: b0 = 1024 is far from the optimum, so tuning pays off fast
DEFAULT_RECURRENCES = 10  # enough for the bandit to pay off on the default trace (benchmarks/RESULTS.md)
EXAMPLE_JOB = "example"
RUN_TRIAL_FIELDS = ["attempt", "batch_size", "power_limit_w", "cost", "status", "energy_j", "time_s", "metric"]


def _comparison_lines(comparison, policy: str, seed: int) -> list[str]:
    """The job's cumulative figures against the default config, the oracle and the simulator."""
    from zeus.policy import policy_label
    from zeus.report.units import duration, si

    c = comparison
    rows = [
        ("this job (kfp.local)", c.live),
        (f"simulator, seed {seed}", c.simulated),
        ("default config", c.default),
        ("oracle", c.oracle),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"cumulative over {c.num_recurrences} recurrence(s), policy {policy_label(policy)}:"]
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
        lines.append(EXPLORING_NOTE)
    if c.identical:
        lines.append("the simulator produced the same trials, trial by trial (batch size, power limit, status, cost)")
    else:
        lines.append(f"the simulator parts ways at {c.first_difference}")
    return lines


EXPLORING_NOTE = (
    "  (negative while the bandit is still exploring: each new batch size costs a profiling epoch, "
    "and a size that misses the target costs a retry)"
)


def _saving_lines(store, spec, summaries) -> list[str]:
    """A script job's saving against the default configuration's cost, estimated from the store."""
    from zeus.report import default_config_cost
    from zeus.report.units import si

    baseline = default_config_cost(store.trials(spec.job_id), store.profiles(spec.job_id), spec)
    if not baseline.cost:
        return [f"saving vs the default config: not known yet ({baseline.how})"]
    lines = [
        f"default config (batch size {spec.default_batch_size}, max power): "
        f"cost {si(baseline.cost, 'J')} ({baseline.how})"
    ]
    savings = [1.0 - s.cost / baseline.cost for s in summaries]
    for s, saving in zip(summaries, savings, strict=True):
        lines.append(f"  recurrence {s.recurrence}: cost {si(s.cost, 'J')} -> saving {saving:+.1%}")
    if any(saving < 0 for saving in savings):
        lines.append(EXPLORING_NOTE)
    return lines


RUN_HELP = (
    "Run recurrences of a job locally through kfp.local (the same pipeline a cluster runs). By default the trials "
    f"replay the measured Zeus NSDI'23 traces ({DEFAULT_TRACE}; every figure simulated and labelled so) and the job "
    "ends with its cumulative cost against the default config, the oracle and the simulator's run of the same seed. "
    "--script zeus|plain trains the real-torch example; --command runs your own training script (give its JobSpec "
    "with --spec FILE and/or an option per setting: --job-id/--batch-sizes/--default-batch-size/--target-metric/"
    "--max-epochs, ...). Costs are in "
    "joules. Ctrl-C records the trial in flight as failed. Plots go to --plots-dir as PNG."
)
OWN = "Your own job (with --command)"


@app.command(help=RUN_HELP)
@setting_options(OWN)
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
    policy: Annotated[
        str, typer.Option(help="Batch-size policy: turning-walk (alias default) or zeus-nsdi23.")
    ] = "default",
    attempts: Annotated[
        int | None,
        typer.Option(help="Trials per recurrence at most (the retry loop's length). Default: the spec's, 5."),
    ] = None,
    trace: Annotated[
        str | None,
        typer.Option(help=f"Trace workload/gpu the trials replay, e.g. squad/a40. Default: {DEFAULT_TRACE}."),
    ] = None,
    script: Annotated[
        str | None,
        typer.Option(
            help="Train the real-torch example instead of replaying a trace: 'zeus' (ZeusDataLoader) or "
            "'plain' (metric from stdout)."
        ),
    ] = None,
    command: Annotated[
        str | None,
        typer.Option(
            help="Your training command, shell-style, e.g. '{python} train.py --batch-size {batch_size}'. "
            "Placeholders: {python} {batch_size} {data_dir} {log_dir} {work_dir}; relative file paths are made "
            "absolute (each trial runs in its own work directory).",
            rich_help_panel=OWN,
        ),
    ] = None,
    zeus_aware: Annotated[
        bool,
        typer.Option(
            "--zeus-aware/--plain",
            help="Your script uses ZeusDataLoader (--zeus-aware) or prints its metric, e.g. 'accuracy=0.93' (--plain).",
            rich_help_panel=OWN,
        ),
    ] = False,
    metric_pattern: Annotated[
        str | None,
        typer.Option(
            help="--plain: regex with 2 groups (name, value) for the metric lines. Default: Katib's name=value.",
            rich_help_panel=OWN,
        ),
    ] = None,
    preprocess: Annotated[
        str | None,
        typer.Option(
            help="Run once per recurrence before the trials: module:function, file.py:function (called with the "
            "data directory) or a command with {output}. The trials get that directory as {data_dir}.",
            rich_help_panel=OWN,
        ),
    ] = None,
    metrics_collector: Annotated[
        str | None,
        typer.Option(
            help="A plain script's (--plain, --script plain) metrics collector: Katib's metricsCollectorSpec as JSON "
            "or YAML, or @file.yaml (default: stdout, Katib's name=value pattern).",
            rich_help_panel=OWN,
        ),
    ] = None,
    spec_file: Annotated[
        Path | None,
        typer.Option("--spec", help="YAML or JSON file of JobSpec fields.", rich_help_panel=OWN),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="The job's seed (decisions derive from it). Default: 0.")] = None,
    job_id: Annotated[
        str | None,
        typer.Option(help="Job id in the store (a new id starts afresh). Default: example, or example-<script>."),
    ] = None,
    dispatch_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds after which a trial that never reported (its process was killed) is recorded failed by "
            "the next bandit step. Default: 86400; 0 when nothing else runs this job."
        ),
    ] = None,
    wide: Annotated[bool, typer.Option("--wide", help="Tables with every column, however wide.")] = False,
    plots_dir: Annotated[Path, typer.Option(help="Where to write the PNG plots.")] = Path("zeus-runs"),
    runs_dir: Annotated[
        Path | None,
        typer.Option(help="Where kfp.local keeps each recurrence's artifacts and log. Default: ./.zeus-kfp/runs."),
    ] = None,
    settings: dict | None = None,  # one option per other JobSpec setting (zeus.cli.own_job.setting_options)
) -> None:
    from pipelines.local import RunInterrupted, run_local
    from zeus.cli.errors import interrupted_code
    from zeus.cli.job_setup import choose_job
    from zeus.cli.stores import open_for_writing
    from zeus.cli.tables import console
    from zeus.policy import policy_label
    from zeus.steps import DEFAULT_DISPATCH_TIMEOUT_S, check_dispatch_timeout

    job = choose_job(
        trace=trace, script=script, command=command, spec_file=spec_file, job_id=job_id, attempts=attempts,
        seed=seed, zeus_aware=zeus_aware, metric_pattern=metric_pattern, preprocess=preprocess,
        fields=settings or {}, default_trace=DEFAULT_TRACE, example_job=EXAMPLE_JOB,
    )  # fmt: skip
    if metrics_collector:
        from zeus.train.collectors import CollectorSpec

        if job.backend is not None or job.run_args.get("zeus_aware", True):
            raise FieldError("metrics_collector", metrics_collector, "only with a plain script (--plain)")
        job.run_args["metrics_collector"] = CollectorSpec.from_arg(metrics_collector).to_dict()
    timeout_s = check_dispatch_timeout(DEFAULT_DISPATCH_TIMEOUT_S if dispatch_timeout is None else dispatch_timeout)
    spec = job.spec
    opened = open_for_writing(store)
    out = console(wide=wide)
    out.print(
        f"zeus-kfp run: {recurrences} recurrence(s) of job {spec.job_id} ({job.what}; batch sizes "
        f"{list(spec.batch_sizes)}, default {spec.default_batch_size}, target {spec.metric_name} "
        f"{'>=' if spec.higher_is_better else '<='} {spec.target_metric:g}) with policy {policy_label(policy)}, "
        f"seed {spec.seed}, "
        f"store {opened.uri}",
        soft_wrap=True,
        markup=False,
    )
    status = out.status("starting")
    summaries = []

    def progress(message: str) -> None:
        status.update(message)
        if not out.is_terminal:
            out.print(message, markup=False, soft_wrap=True)

    def finished(summary) -> None:
        from zeus.cli.trial_view import print_trials

        summaries.append(summary)
        title = (
            f"recurrence {summary.recurrence}: {'reached' if summary.reached else 'did NOT reach'} the target "
            f"in {len(summary.trials)} trial(s)"
        )
        records = [vars(t) for t in summary.trials]
        print_trials(out, title, records, RUN_TRIAL_FIELDS, wide=wide)

    try:
        with status:
            run_local(
                spec,
                recurrences=recurrences,
                store=opened.uri,
                policy=policy,
                attempts=spec.max_attempts,
                runs_dir=runs_dir,
                on_start=lambda i, rid: progress(f"recurrence {i + 1}/{recurrences} ({rid}): starting"),
                on_step=lambda i, step: progress(f"recurrence {i + 1}/{recurrences}: {step}"),
                on_recurrence=finished,
                dispatch_timeout_s=timeout_s,
                **job.run_args,
            )
    except RunInterrupted as stop:
        typer.echo(f"{stop}; job {stop.job_id} is no longer running (the next run continues from the store)", err=True)
        raise typer.Exit(interrupted_code(stop.signum)) from None
    _epilogue(out, opened, spec, job, policy, summaries, plots_dir, wide)


def _epilogue(out, opened, spec, job, policy, summaries, plots_dir: Path, wide: bool) -> None:
    """After the last recurrence: the bandit's state, the job against its baselines, the plots."""
    from zeus.cli.trial_view import print_bandit_state
    from zeus.report import arm_frame, write_plots

    trials, state = opened.trials(spec.job_id), arm_frame(spec, opened.history(spec.job_id), policy)
    if not state.empty:
        print_bandit_state(out, state, wide=wide)
    if job.backend is not None:
        from zeus.simulate.replay import compare

        lines = _comparison_lines(compare(trials, spec, job.backend, policy), policy, spec.seed)
    else:
        lines = _saving_lines(opened, spec, summaries)
    for line in lines:
        out.print(line, markup=False, soft_wrap=True)
    plots = write_plots(trials, opened.profiles(spec.job_id), state, spec, plots_dir / spec.job_id)
    if any(s.simulated for s in summaries):
        sources = sorted({t.source for s in summaries for t in s.trials if t.simulated and t.source})
        source = " or ".join(sources) or "simulated"
        out.print(f"No GPU was measured: every power, energy, time and cost figure is {source}.", markup=False)
    out.print("plots: " + ", ".join(str(p) for p in plots), markup=False, soft_wrap=True)
    sys.stdout.flush()
