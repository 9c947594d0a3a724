"""`zeus-kfp run`: a job, locally through kfp.local, the same pipeline a cluster runs.

By default it runs a trace-backed job (trial backend "trace:<workload>/<gpu>", the measured Zeus
NSDI'23 traces; every figure simulated and labelled so) for enough recurrences that the bandit pays
off, prints each recurrence's trials, and ends with the job's cumulative cost, energy and time against
the default configuration and the oracle, with the simulator's figures for the same seed beside them
(and whether the simulator produced the very same trials). `--script zeus|plain` runs the real-torch
example instead, on this machine's GPU or the simulated one; `--command` runs your own training
script with your own JobSpec (zeus_kfp.cli.own_job).

Progress: one line per step ("[2/10] recurrence 12: attempt 1: train (batch size 64, exploration)":
this run's count, then the job's own recurrence number, the one the tables say) when the output is
not a terminal, a spinner when it is. Ctrl-C (SIGINT) or SIGTERM records the trial in flight as
failed and says so in one line (pipelines.local.RunInterrupted). A failed trial (the script's own
failure) stops the run with the script's last lines, and a run in which no recurrence reached the
target ends with what was seen; both exit 1 (zeus_kfp.cli.run_report).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from zeus_kfp.cli.application import app
from zeus_kfp.cli.exits import interrupted_code
from zeus_kfp.cli.job_setup import choose_job
from zeus_kfp.cli.own_job import (
    COLLECTOR_HELP,
    KEEP_HELP,
    PATTERN_HELP,
    remembered,
    setting_options,
    text_option,
)
from zeus_kfp.cli.run_report import (
    EXIT_FAILED,
    epilogue,
    failure_lines,
    no_target_lines,
    print_recurrence,
    saving_lines,
)
from zeus_kfp.cli.stores import open_for_writing
from zeus_kfp.cli.tables import console
from zeus_kfp.errors import FieldError
from zeus_kfp.run_settings import RunSettings

DEFAULT_TRACE = "cifar100/v100"  # Zeus's own example: b0 = 1024 is far from the optimum, so tuning pays off fast
DEFAULT_RECURRENCES = 10  # enough for the bandit to pay off on the default trace (benchmarks/RESULTS.md)
EXAMPLE_JOB = "example"


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
RUN = "How each run runs (any job: the recurrence gate, the dispatch timeout)"
PatternOpt = text_option(remembered(PATTERN_HELP), OWN)
CollectorOpt = text_option(remembered(COLLECTOR_HELP), OWN)
KeepOpt = text_option(remembered(KEEP_HELP), OWN)


def job_reads(opened, job, said: dict) -> list[str]:
    """How your job's script reports, settled for this run: what the options said, else the job's own from its last
    run (`opened.reads`: the store), filled into `job.run_args`; the lines that say so (none for a new job or no
    change)."""
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.steps.gate import describe_reads, reads_changes
    from zeus_kfp.store.errors import changes_text

    spec, args = job.spec, job.run_args
    before = opened.reads(spec.job_id)
    if before is None:
        return []
    plain = not args.get("zeus_aware", True)
    taken = [name for name, given in said.items() if given is None and before[name] and (plain or name == "keep")]
    for name in taken:  # a run without them reads as the job does
        args[name] = before[name]
    now = {"zeus_aware": args.get("zeus_aware", True)} | {name: args.get(name) or "" for name in said}
    if now["metrics_collector"]:  # as pipelines.local records it: the pattern folded in
        from zeus_kfp.train.collectors import CollectorSpec

        now["metrics_collector"] = CollectorSpec.from_params(now["metrics_collector"], now["metric_pattern"]).to_json()
    lines = []
    if taken:
        given = ", ".join(f"--{name.replace('_', '-')} {before[name]!r}" for name in taken)
        lines.append(f"job {spec.job_id} {describe_reads(spec.metric_name, now)} (the job's, from recurrence "
                     f"{before['recurrence']}: {given})")  # fmt: skip
    changed = reads_changes(before, now)
    if changed:
        lines.append(f"job {spec.job_id} now {describe_reads(spec.metric_name, now)} ({changes_text(changed)})")
    return lines


@app.command(help=RUN_HELP)
@setting_options(OWN)
@setting_options(RUN, RunSettings, param="run_settings")
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
    metric_pattern: PatternOpt = None,
    preprocess: Annotated[
        str | None,
        typer.Option(
            help="Run once per recurrence before the trials: module:function, file.py:function (called with the "
            "data directory) or a command with {output}. The trials get that directory as {data_dir}.",
            rich_help_panel=OWN,
        ),
    ] = None,
    metrics_collector: CollectorOpt = None,
    keep: KeepOpt = None,
    spec_file: Annotated[
        Path | None,
        typer.Option("--spec", help="YAML or JSON file of JobSpec fields.", rich_help_panel=OWN),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="The job's seed (decisions derive from it). Default: 0.")] = None,
    job_id: Annotated[
        str | None,
        typer.Option(help="Job id in the store (a new id starts afresh). Default: example, or example-<script>."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Open a recurrence even if the job's period has not passed and no drift is found (it still counts "
            "against --max-running: a run past the cap is skipped).",
        ),
    ] = False,
    wide: Annotated[bool, typer.Option("--wide", help="Tables with every column, however wide.")] = False,
    plots_dir: Annotated[Path, typer.Option(help="Where to write the PNG plots.")] = Path("zeus-runs"),
    runs_dir: Annotated[
        Path | None,
        typer.Option(help="Where kfp.local keeps each recurrence's artifacts and log. Default: ./.zeus-kfp/runs."),
    ] = None,
    settings: dict | None = None,  # one option per other JobSpec setting (zeus_kfp.cli.own_job.setting_options)
    run_settings: dict | None = None,  # one option per run setting (zeus_kfp.run_settings), for any job
) -> None:
    # deferred: kfp takes seconds to import, and `zeus-kfp --help` loads every command module
    from zeus_kfp.pipelines.local import RunInterrupted, TrialFailed, run_local
    from zeus_kfp.policy import policy_label
    from zeus_kfp.steps import run_settings_from_params

    job = choose_job(
        trace=trace, script=script, command=command, spec_file=spec_file, job_id=job_id, attempts=attempts,
        seed=seed, zeus_aware=zeus_aware, metric_pattern=metric_pattern, preprocess=preprocess,
        fields=settings or {}, default_trace=DEFAULT_TRACE, example_job=EXAMPLE_JOB,
    )  # fmt: skip
    if metrics_collector:
        # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
        from zeus_kfp.train.collectors import CollectorSpec

        if job.backend is not None or job.run_args.get("zeus_aware", True):
            raise FieldError("metrics_collector", metrics_collector, "only with a plain script (--plain)")
        job.run_args["metrics_collector"] = CollectorSpec.from_arg(metrics_collector).to_dict()
    if keep:
        if job.backend is not None or "command" not in job.run_args:
            raise FieldError("keep", keep, "only with your own training command (--command)")
        job.run_args["keep"] = keep
    how = run_settings_from_params(**{name: value for name, value in (run_settings or {}).items() if value is not None})
    if job.backend is None and "command" in job.run_args:  # what the train step would refuse, before anything is stored
        # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
        from zeus_kfp.steps.inputs import check_trial_inputs

        check_trial_inputs(
            command=job.run_args["command"],
            zeus_aware=job.run_args.get("zeus_aware", True),
            metric_pattern=job.run_args.get("metric_pattern", ""),
            metrics_collector=job.run_args.get("metrics_collector") or "",
            local_files=True,
            keep=job.run_args.get("keep", ""),
        )
    spec = job.spec
    opened = open_for_writing(store)
    said = {"metric_pattern": metric_pattern, "metrics_collector": metrics_collector, "keep": keep}
    reads_lines = job_reads(opened, job, said) if command is not None else []  # run_local checks what it fills in
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
    for line in reads_lines:
        out.print(line, soft_wrap=True, markup=False)
    status = out.status("starting")
    summaries = []

    def progress(message: str) -> None:
        status.update(message)
        if not out.is_terminal:
            out.print(message, markup=False, soft_wrap=True)

    def step(i: int, what: str, number: int | None) -> None:
        """`[6/10] recurrence 16: attempt 1: train (...)`: this run's count, then the job's recurrence number."""
        progress(f"[{i + 1}/{recurrences}] " + (f"recurrence {number}: " if number is not None else "") + what)

    def finished(summary) -> None:
        summaries.append(summary)
        from zeus_kfp.steps.gate import took_line  # deferred with the steps (pandas)

        outcome = None if summary.skipped else opened.gate_outcome(spec.job_id, summary.recurrence_id)
        took = "" if outcome is None else took_line(opened, spec.job_id, outcome)
        if took:  # a changed spec the job took
            out.print(took, markup=False, soft_wrap=True)
        print_recurrence(out, summary, wide=wide, script=job.backend is None)

    try:
        with status:
            run_local(
                spec,
                recurrences=recurrences,
                store=opened.uri,
                policy=policy,
                attempts=spec.max_attempts,
                runs_dir=runs_dir,
                on_start=lambda i, rid: progress(f"[{i + 1}/{recurrences}] starting ({rid})"),
                on_step=step,
                on_recurrence=finished,
                run_settings=how,
                force=force,
                **job.run_args,
            )
    except RunInterrupted as stop:
        typer.echo(f"{stop}; job {stop.job_id} is no longer running (the next run continues from the store)", err=True)
        raise typer.Exit(interrupted_code(stop.signum)) from None
    except TrialFailed as failed:
        for line in saving_lines(opened, spec, [failed.trial.recurrence]):  # a failure moves no saving: say so
            out.print(line, markup=False, soft_wrap=True)
        sys.stdout.flush()
        for line in failure_lines(failed):
            typer.echo(line, err=True)
        typer.echo(f"error: {failed}", err=True)
        raise typer.Exit(EXIT_FAILED) from None
    ran = [s for s in summaries if not s.skipped]
    if not ran:  # the gate skipped every run: nothing trained, nothing to report, nothing failed
        out.print("no recurrence opened: every run was skipped by the recurrence gate", markup=False)
        return
    epilogue(out, opened, spec, job, policy, ran, plots_dir, wide)
    if not any(s.reached for s in ran):
        for line in no_target_lines(ran, spec):
            typer.echo(f"error: {line}", err=True)
        raise typer.Exit(EXIT_FAILED)
