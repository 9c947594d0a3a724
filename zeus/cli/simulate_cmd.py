"""`zeus-kfp simulate`: replay the NSDI'23 traces under a batch-size policy and print what it cost."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from zeus.cli.app import app


def _table(results, num_recurrences: int) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{results[0].policy}: cumulative figures over {num_recurrences} recurrences")
    for col in ("seed", "who", "cost", "energy (J)", "time (s)", "cost / oracle"):
        table.add_column(col, justify="right")
    for r in results:
        for who, fig in (("policy", r.totals), ("default", r.default), ("oracle", r.oracle)):
            ratio = f"{fig.cost / r.oracle.cost:.4f}"
            table.add_row(str(r.seed), who, f"{fig.cost:.4g}", f"{fig.energy_j:.4g}", f"{fig.time_s:.4g}", ratio)
    Console().print(table)


def _trials_table(result) -> None:
    """Every trial of one simulation, as `zeus-kfp run` prints a trace-backed job's trials."""
    from rich.console import Console
    from rich.table import Table

    from zeus.report.units import COST_UNIT, duration, si

    table = Table(title=f"seed {result.seed}: every trial", title_justify="left")
    for col in ("recurrence", "attempt", "batch size", "power limit", f"cost ({COST_UNIT})", "time", "status"):
        table.add_column(col, justify="right")
    for t in result.trials:
        limit = f"{t.power_limit_w:.0f} W"
        row = (t.recurrence, t.attempt, t.batch_size, limit, si(t.cost, ""), duration(t.time_s), t.status)
        table.add_row(*(str(v) for v in row))
    Console().print(table)


SIMULATE_HELP = (
    "Simulate a recurring job on a trace and compare the policy with the default config and the oracle.\n\n"
    "Prints, per seed, the cumulative cost, energy and time of the policy, of the default config "
    "(b0 at the largest power limit) and of the oracle (the cheapest expected configuration among batch sizes "
    "whose every run reaches the target). Trace files are arguments, so any GPU's power trace with the same "
    "columns works unchanged."
)


@app.command(help=SIMULATE_HELP, context_settings={"allow_extra_args": True})
def simulate(
    ctx: typer.Context,
    workload: Annotated[
        str,
        typer.Option(help="Trace workload: librispeech, cifar100, imagenet, squad, sentiment140 or movielens-1m."),
    ],
    policy: Annotated[str, typer.Option(help="Batch-size policy to simulate: default or zeus-nsdi23.")] = "default",
    train_trace: Annotated[
        Path | None,
        typer.Option(help="Train trace CSV (summary_train.csv columns). Default: the shipped NSDI'23 trace."),
    ] = None,
    power_trace: Annotated[
        str | None,
        typer.Option(
            help="Power trace of one GPU: v100 or a40 (shipped), or a CSV with summary_power_<gpu>.csv's columns. "
            "Default: v100."
        ),
    ] = None,
    seeds: Annotated[
        list[int] | None,
        typer.Option(
            help="Seeds to simulate, one simulation each: --seeds 1 2 3 (or repeat --seeds). Default: 1.",
            show_default=False,
        ),
    ] = None,
    recurrences: Annotated[
        int | None,
        typer.Option(help="Recurrences per simulation. Default: 2 x |batch sizes| x |power limits| (Zeus's choice)."),
    ] = None,
    attempts: Annotated[
        int | None,
        typer.Option(help="Tries per recurrence. Default: Zeus's 20. `zeus-kfp run` runs 5: pass 5 to replay it."),
    ] = None,
    in_flight: Annotated[
        int, typer.Option(help="Recurrences in flight at once (overlapping recurrences; 1 = one after another).")
    ] = 1,
    eta: Annotated[float, typer.Option(help="eta knob of the cost: 1 = energy only, 0 = time only.")] = 0.5,
    beta: Annotated[
        float, typer.Option(help="Early-stop knob: stop a trial past beta x the best recurrence cost.")
    ] = 2.0,
    trials: Annotated[
        bool, typer.Option("--trials", help="Also print every trial (as `zeus-kfp run` prints a trace job's).")
    ] = False,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", help="Write the figures and one row per recurrence to this JSON file."),
    ] = None,
) -> None:
    """Simulate a recurring job on a trace and compare the policy with the default config and the oracle.

    See SIMULATE_HELP for what it prints.
    """
    from zeus.job import JobSpecError
    from zeus.simulate.runner import build_simulator, results_to_json, simulate_seeds, write_json
    from zeus.simulate.trace import shipped_trace

    # Click options take one value each; the words after `--seeds 1` arrive as extra arguments.
    extra = [a for a in ctx.args]
    bad = [a for a in extra if not a.lstrip("-").isdigit()]
    if bad or (extra and seeds is None):
        typer.echo(f"error: invalid seeds={extra!r}: allowed integers after --seeds, e.g. --seeds 1 2 3", err=True)
        raise typer.Exit(code=2)
    seed_list = [*(seeds or [1]), *(int(a) for a in extra)]
    train = train_trace or shipped_trace("train")
    power = power_trace or "v100"
    try:
        sim = build_simulator(workload, train_trace=train, power_trace=power, eta=eta, beta=beta, max_attempts=attempts)
        results = simulate_seeds(sim, policy, seed_list, recurrences, in_flight)
    except (JobSpecError, ValueError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    _table(results, results[0].num_recurrences)
    if trials:
        for result in results:
            _trials_table(result)
    if json_out is not None:
        data = results_to_json(results, workload=workload, train_trace=str(train), power_trace=str(power))
        write_json(data, json_out)
        typer.echo(f"wrote {json_out}")
