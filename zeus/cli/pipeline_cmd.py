"""`zeus-kfp run` and `zeus-kfp compile`: the pipeline locally through kfp.local, and its YAML.

`run` is the project's main job: recurrences of the example job through the same pipeline a
cluster runs, printing what each recurrence tried and what it cost, then where the bandit
stands and the saving against the default configuration.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from zeus.cli.app import app


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt.format(value)


def _recurrence_table(summary):
    from rich.table import Table

    sim = " (simulated)" if summary.simulated else ""
    table = Table(
        title=f"recurrence {summary.recurrence} ({summary.recurrence_id}): "
        f"{'reached' if summary.reached else 'did NOT reach'} the target in {len(summary.trials)} trial(s){sim}",
        title_justify="left",
    )
    for col in ("attempt", "batch size", "power limit (W)", "cost", "energy (J)", "time (s)", "metric", "status"):
        table.add_column(col, justify="right")
    for t in summary.trials:
        table.add_row(
            str(t.attempt),
            str(t.batch_size),
            _num(t.power_limit_w, "{:.0f}"),
            _num(t.cost),
            _num(t.energy_j),
            _num(t.time_s, "{:.2f}"),
            _num(t.metric, "{:.3f}"),
            t.status,
        )
    table.caption = (
        f"total: cost {_num(summary.cost)}, energy {_num(summary.energy_j)} J{sim}, "
        f"time {_num(summary.time_s, '{:.2f}')} s (wall {summary.wall_s:.1f} s with orchestration)"
    )
    return table


def _failure_notes(summary) -> list[str]:
    """Why each failed trial failed (the script's own error), one line each: the table stays readable."""
    notes = []
    for t in summary.trials:
        if t.status == "failed" and t.reason:
            lines = [ln for ln in t.reason.strip().splitlines() if ln.strip()]
            notes.append(f"  attempt {t.attempt} failed: {lines[-1][:300] if lines else t.reason[:300]}")
    return notes


def _bandit_table(state):
    from rich.table import Table

    table = Table(title="where the bandit stands (latest snapshot)", title_justify="left")
    for col in ("batch size", "stage", "observations", "posterior mean cost", "pruned"):
        table.add_column(col, justify="right")
    for row in state.sort_values("batch_size").itertuples(index=False):
        table.add_row(
            str(int(row.batch_size)),
            str(row.stage),
            str(int(row.num_observations)),
            _num(None if row.posterior_mean is None else float(row.posterior_mean)),
            "yes" if row.pruned else "no",
        )
    return table


def _saving_lines(store, spec, summaries) -> list[str]:
    """The saving of this run's recurrences against the default configuration's cost."""
    from zeus.report import default_config_cost

    baseline = default_config_cost(store.trials(spec.job_id), store.profiles(spec.job_id), spec)
    if not baseline.cost:
        return [f"saving vs the default config: not known yet ({baseline.how})"]
    lines = [
        f"default config (batch size {spec.default_batch_size}, max power): cost {baseline.cost:.1f} ({baseline.how})"
    ]
    for s in summaries:
        lines.append(f"  recurrence {s.recurrence}: cost {s.cost:.1f} -> saving {1.0 - s.cost / baseline.cost:+.1%}")
    mean = sum(s.cost for s in summaries) / len(summaries)
    lines.append(
        f"mean over this run: cost {mean:.1f} -> saving {1.0 - mean / baseline.cost:+.1%} vs the default config"
    )
    return lines


RUN_HELP = (
    "Run recurrences of the example job locally through kfp.local (the same pipeline a cluster runs) and print, "
    "per recurrence, the batch sizes tried, the power limit, cost, energy, time and whether the target was "
    "reached; then where the bandit stands and the saving against the default config. Plots go to --plots-dir "
    "as PNG. Without a GPU the power figures come from a simulated GPU and are labelled simulated."
)


@app.command(help=RUN_HELP)
def run(
    recurrences: Annotated[int, typer.Option("--recurrences", "-r", help="Recurrences (pipeline runs) to run.")] = 3,
    store: Annotated[
        str | None,
        typer.Option(
            help="Store: a directory, file:// or s3://bucket/prefix. Default: $ZEUS_KFP_STORE or ./.zeus-kfp/store."
        ),
    ] = None,
    policy: Annotated[str, typer.Option(help="Batch-size policy: default or zeus-nsdi23.")] = "default",
    attempts: Annotated[int, typer.Option(help="Trials per recurrence at most (the retry loop's length).")] = 5,
    job_id: Annotated[
        str, typer.Option(help="Job id of the example job in the store (a new id starts afresh).")
    ] = "example",
    script: Annotated[
        str,
        typer.Option(
            help="Example script: 'zeus' (ZeusDataLoader, JIT power profiling) or 'plain' (metric from stdout)."
        ),
    ] = "zeus",
    metrics_collector: Annotated[
        str | None,
        typer.Option(
            help="How --script plain's metrics are collected: Katib's metricsCollectorSpec as JSON or YAML, "
            "or @file.yaml (default: stdout, Katib's name=value pattern)."
        ),
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
    from zeus.store import JobSpecMismatchError, StoreError, open_store
    from zeus.train import example_command, example_spec
    from zeus.train.collectors import CollectorSpec

    console = Console()
    if script not in ("zeus", "plain"):
        raise typer.BadParameter(f"invalid script={script!r}: allowed zeus, plain", param_hint="--script")
    try:
        collector = CollectorSpec.from_arg(metrics_collector) if metrics_collector else None
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--metrics-collector") from err
    try:
        spec = example_spec(job_id=job_id).with_changes(max_attempts=attempts)
        max_w, simulated = max_power_limit_w()
        if not simulated:  # price time at this GPU's maximum power (Zeus's MAXPOWER), not the simulated V100's
            spec = spec.with_changes(max_power_w=max_w)
        opened = open_store(store)
    except (JobSpecError, ValueError) as err:
        raise typer.BadParameter(str(err)) from err
    console.print(
        f"[bold]zeus-kfp run[/]: {recurrences} recurrence(s) of job [cyan]{spec.job_id}[/] "
        f"(batch sizes {list(spec.batch_sizes)}, default {spec.default_batch_size}, target "
        f"{spec.metric_name} {'>=' if spec.higher_is_better else '<='} {spec.target_metric}) "
        f"with policy {policy}, store {opened.uri}",
        soft_wrap=True,
    )
    status = console.status("starting")
    summaries = []

    def started(i: int, recurrence_id: str) -> None:
        status.update(f"recurrence {i + 1}/{recurrences} ({recurrence_id}): running through kfp.local ...")

    def finished(summary) -> None:
        summaries.append(summary)
        console.print(_recurrence_table(summary))
        for note in _failure_notes(summary):
            console.print(note, markup=False, highlight=False, soft_wrap=True)

    try:
        with status:
            run_local(
                spec,
                recurrences=recurrences,
                store=opened.uri,
                policy=policy,
                command=example_command(script),
                preprocess=EXAMPLE_PREPROCESS,
                zeus_aware=script == "zeus",
                metrics_collector=collector.to_dict() if collector else None,
                attempts=attempts,
                runs_dir=runs_dir,
                on_start=started,
                on_recurrence=finished,
            )
    except (JobSpecMismatchError, JobSpecError, ValueError) as err:
        console.print(f"[red]refused:[/] {err}", soft_wrap=True)
        raise typer.Exit(2) from err
    except (LocalRunError, StoreError) as err:
        console.print(f"[red]a recurrence failed:[/] {err}", soft_wrap=True)
        raise typer.Exit(1) from err
    state = opened.bandit_state(spec.job_id)
    if not state.empty:
        console.print(_bandit_table(state))
    for line in _saving_lines(opened, spec, summaries):
        console.print(line, soft_wrap=True)
    plots = write_plots(opened.trials(spec.job_id), opened.profiles(spec.job_id), state, spec, plots_dir / spec.job_id)
    if any(s.simulated for s in summaries):
        console.print("[yellow]No GPU was measured: power, energy and cost figures are from a simulated GPU.[/]")
    console.print("plots: " + ", ".join(str(p) for p in plots), soft_wrap=True)


COMPILE_HELP = (
    "Compile the recurrence pipeline to a YAML the Kubeflow UI and kfp.Client accept "
    "(kfp.components.load_component_from_file loads it back). No credential is ever written into it."
)


@app.command(name="compile", help=COMPILE_HELP)
def compile_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the pipeline YAML.")] = Path(
        "zeus_pipeline.yaml"
    ),
    attempts: Annotated[int, typer.Option(help="Trials per recurrence at most (fixed at compile time).")] = 5,
    gpus: Annotated[int, typer.Option(help="GPUs the train step requests (nvidia.com/gpu); 0 = CPU only.")] = 1,
    minio_secret: Annotated[
        str | None,
        typer.Option(
            help="Kubernetes Secret with keys accesskey/secretkey for the store (e.g. mlpipeline-minio-artifact)."
        ),
    ] = None,
    s3_endpoint: Annotated[
        str | None,
        typer.Option(help="Store endpoint host:port. Default with --minio-secret: minio-service.kubeflow:9000."),
    ] = None,
    s3_secure: Annotated[bool, typer.Option(help="Reach the store endpoint over HTTPS.")] = False,
    zeusd: Annotated[
        bool, typer.Option(help="Give train the node IP as ZEUSD_HOST so power limits go through the zeusd daemon.")
    ] = True,
    image: Annotated[
        str | None, typer.Option(help="Component image. Default: $ZEUS_KFP_IMAGE or the project's published image.")
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(help="Default store URI of the runs (a run parameter). Default: s3://mlpipeline/zeus-kfp."),
    ] = None,
    policy: Annotated[str, typer.Option(help="Default batch-size policy of the runs (a run parameter).")] = "default",
) -> None:
    from pipelines.compile import DEFAULT_CLUSTER_STORE, compile_pipeline

    try:
        path = compile_pipeline(
            output,
            attempts=attempts,
            gpus=gpus,
            minio_secret=minio_secret,
            s3_endpoint=s3_endpoint,
            s3_secure=s3_secure,
            zeusd=zeusd,
            image=image,
            store_uri=store or DEFAULT_CLUSTER_STORE,
            policy=policy,
        )
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    typer.echo(f"wrote {path} ({attempts} attempts, {gpus} GPU(s) per trial)")
    if not minio_secret and (store or DEFAULT_CLUSTER_STORE).startswith("s3://"):
        typer.echo(
            "note: no --minio-secret: the steps get no store credentials; pass the Secret that holds "
            "accesskey/secretkey (KFP's own is mlpipeline-minio-artifact)"
        )
