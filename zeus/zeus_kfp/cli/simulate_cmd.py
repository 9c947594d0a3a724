"""`zeus-kfp simulate`: replay the NSDI'23 traces under a batch-size policy and print what it cost."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from zeus_kfp.cli.application import app
from zeus_kfp.cli.tables import Column, console, print_table
from zeus_kfp.cli.trial_view import print_trials
from zeus_kfp.errors import FieldError
from zeus_kfp.report.units import COST_UNIT, duration, si
from zeus_kfp.trials import trial_columns


def _table(out, results, num_recurrences: int, wide: bool) -> None:
    columns = [
        Column("seed", keep=True),
        Column("who", keep=True, justify="left"),
        Column(f"cost ({COST_UNIT})", keep=True),
        Column("cost / oracle", keep=True),
        Column("energy"),
        Column("time"),
    ]
    rows = [
        [str(r.seed), who, si(fig.cost, ""), f"{fig.cost / r.oracle.cost:.4f}", si(fig.energy_j, "J"),
         duration(fig.time_s)]
        for r in results
        for who, fig in (("policy", r.totals), ("default", r.default), ("oracle", r.oracle))
    ]  # fmt: skip
    title = f"{results[0].policy}: cumulative figures over {num_recurrences} recurrences"
    print_table(out, title, columns, rows, wide=wide)


def _trials_table(out, result, wide: bool) -> None:
    """Every trial of one simulation, as `zeus-kfp run` prints a trace-backed job's trials."""
    fields = trial_columns("recurrence", "attempt", "batch_size", "power_limit_w", "cost", "status", "time_s")
    print_trials(out, f"seed {result.seed}: every trial", result.trials, fields, wide=wide)


def _check_json_target(path: Path | None) -> None:
    """Refuse, before simulating anything, a --json file whose directory is missing or is a file."""
    if path is None:
        return
    folder = path.parent
    if not folder.is_dir():
        why = "is not a directory" if folder.exists() else "does not exist"
        raise FieldError("json", str(path), f"a file in an existing directory ({folder} {why})")
    if path.is_dir():
        raise FieldError("json", str(path), "a file path (that is a directory)")


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
    policy: Annotated[
        str, typer.Option(help="Batch-size policy to simulate: turning-walk (alias default) or zeus-nsdi23.")
    ] = "default",
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
        list[str] | None,
        typer.Option(
            help="Seeds to simulate, one simulation each: --seeds 1 2 3, a range --seeds 0-19, or repeat --seeds. "
            "Default: 1.",
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
    wide: Annotated[bool, typer.Option("--wide", help="Tables with every column, however wide.")] = False,
) -> None:
    """Simulate a recurring job on a trace and compare the policy with the default config and the oracle.

    See SIMULATE_HELP for what it prints.
    """
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.seeds import seed_list as parse_seeds
    from zeus_kfp.simulate.trace import shipped_trace
    from zeus_kfp.simulate.workload_runs import build_simulator, results_to_json, simulate_seeds, write_json

    # Click options take one value each; the words after `--seeds 1` arrive as extra arguments.
    extra = [a for a in ctx.args]
    if extra and seeds is None:
        raise FieldError("seeds", extra, "integers after --seeds, e.g. --seeds 1 2 3")
    _check_json_target(json_out)
    seed_list = parse_seeds([*(seeds or ["1"]), *extra])
    train = train_trace or shipped_trace("train")
    power = power_trace or "v100"
    try:
        sim = build_simulator(workload, train_trace=train, power_trace=power, eta=eta, beta=beta, max_attempts=attempts)
    except FileNotFoundError as exc:  # a trace path the user gave: bad input, not a broken environment
        raise ValueError(f"{exc} (allowed: an existing CSV file; for --power-trace also v100 or a40)") from None
    results = simulate_seeds(sim, policy, seed_list, recurrences, in_flight)
    out = console(wide=wide)
    _table(out, results, results[0].num_recurrences, wide)
    if trials:
        for result in results:
            _trials_table(out, result, wide)
    if json_out is not None:
        data = results_to_json(results, workload=workload, train_trace=str(train), power_trace=str(power))
        write_json(data, json_out)
        out.print(f"wrote {json_out}", markup=False, soft_wrap=True)
