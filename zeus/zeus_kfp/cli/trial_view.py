"""How a trial looks on the terminal, the same in `run`, `show` and `simulate --trials`.

One row per trial with units (W, J, s/min/h); what would repeat on every row is said once
below the table instead: where the figures come from (the trials' `source`, when they share
one) and why a trial failed (its reason's last line, one line per distinct reason).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console

from zeus_kfp.cli.tables import Column, print_table
from zeus_kfp.report.units import COST_UNIT, duration, si
from zeus_kfp.trials import Trial, trial_columns

NOTE_CHARS = 240  # a failure note is the reason's last line, cut here: the store and `show --json` keep it whole
EXPLAINED_STATUSES = ("failed", "oom")  # statuses whose reason says something the status does not


def missing(value: Any) -> bool:
    """None, NaN, pandas' NA/NaT: no value."""
    if value is None:
        return True
    try:
        return bool(value != value) or (isinstance(value, float) and math.isnan(value))
    except (TypeError, ValueError):  # pd.NA compares to NA
        return True


def _int(value: Any) -> str:
    return "-" if missing(value) else str(int(value))


def _watts(value: Any) -> str:
    return "-" if missing(value) else f"{float(value):.0f} W"


def _number(value: Any) -> str:
    return "-" if missing(value) else f"{float(value):.4g}"


def _sd(precision: Any) -> str:
    """The posterior's standard deviation in joules, 1 / sqrt(precision): 7.05 k reads where 2.013e-08 does not."""
    if missing(precision) or float(precision) <= 0:
        return "-"
    return si(1.0 / math.sqrt(float(precision)), "")


def _text(value: Any) -> str:
    return "" if missing(value) else str(value)


def trial_fields() -> dict[str, tuple[Column, Callable[[Any], str]]]:
    """Every trial field a table may show: its column and how a value reads (tables pick and order
    them). Built on call: zeus_kfp.report loads matplotlib (a second), which `zeus-kfp --help` should not."""

    def joules(unit: str) -> Callable[[Any], str]:
        return lambda value: "-" if missing(value) else si(float(value), unit)

    return {
        "recurrence": (Column("recurrence", keep=True), _int),
        "attempt": (Column("attempt", keep=True), _int),
        "batch_size": (Column("batch size", keep=True), _int),
        "power_limit_w": (Column("power limit", keep=True), _watts),
        "cost": (Column(f"cost ({COST_UNIT})", keep=True), joules("")),
        "status": (Column("status", keep=True, justify="left"), _text),
        "energy_j": (Column("energy"), joules("J")),
        "time_s": (Column("time"), lambda value: "-" if missing(value) else duration(float(value))),
        "metric": (Column("metric"), _number),
        "num_epochs": (Column("epochs"), _int),
        "trial": (Column("trial"), _int),
        "recurrence_id": (Column("recurrence id", justify="left"), _text),
        "source": (Column("source", justify="left"), _text),
    }


def source_of(record: Trial) -> str:
    """Where a trial's figures come from ("simulated (trace: ...)", "measured (nvml)"), else whether they
    were simulated."""
    source = _text(record.source)
    if source:
        return source
    if record.status == "dispatched":
        return ""
    return "simulated GPU" if record.simulated else ""


def failure_notes(records: Sequence[Trial]) -> list[str]:
    """Why each failed trial failed, one line per distinct reason (its last line: a script's error)."""
    by_reason: dict[str, list[str]] = {}
    for r in records:
        reason = _text(r.reason).strip()
        if r.status not in EXPLAINED_STATUSES or not reason:
            continue
        last = [line.strip() for line in reason.splitlines() if line.strip()][-1][:NOTE_CHARS]
        where = f"recurrence {_int(r.recurrence)} attempt {_int(r.attempt)}"
        by_reason.setdefault(f"{r.status}: {last}", []).append(where)
    return [f"  {', '.join(wheres)} {why}" for why, wheres in by_reason.items()]


def _cell(known: dict, field: str, record: Trial, no_figures: bool) -> str:
    """One cell; a trial that never reported (zeus_kfp.steps.abandoned) shows no figures, not zeros; a power limit
    profiling did not choose says so ("250 W unprofiled", "250 W measure only": zeus_kfp.report.numbers.limit_note)."""
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.report.numbers import limit_text

    if field == "source":
        return source_of(record)
    if no_figures and field in FIGURES:
        return "-"
    if field == "power_limit_w":
        return limit_text(getattr(record, field), record.reason)
    return known[field][1](getattr(record, field))


FIGURES = trial_columns("cost", "energy_j", "time_s", "num_epochs", "metric", "power_limit_w")


def print_trials(
    out: Console, title: str, records: Sequence[Trial], fields: Sequence[str], *, wide: bool = False
) -> None:
    """The trials table (`fields`: keys of trial_fields(), most important first), then what it does not
    repeat: the figures' source when the trials share one (else a source column) and the failure notes."""
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.steps.abandoned import NO_FIGURES

    sources = sorted({source_of(r) for r in records} - {"", NO_FIGURES})
    fields = [f for f in fields if f != "source"] + (["source"] if len(sources) > 1 else [])
    known = trial_fields()
    columns = [known[f][0] for f in fields]
    rows = [[_cell(known, f, r, source_of(r) == NO_FIGURES) for f in fields] for r in records]
    print_table(out, title, columns, rows, wide=wide)
    if len(sources) == 1:
        out.print(f"  figures: {sources[0]}", soft_wrap=True)
    for note in failure_notes(records):
        out.print(note, markup=False, soft_wrap=True)


def print_bandit_state(out: Console, state: Any, *, wide: bool = False) -> None:
    """Where the bandit stands after the history (zeus_kfp.report.arms.arm_frame), one row per batch size."""
    columns = [
        Column("batch size", keep=True),
        Column("stage", keep=True, justify="left"),
        Column("observations", keep=True),
        Column(f"posterior mean cost ({COST_UNIT})", keep=True),
        Column("pruned", keep=True, justify="left"),
        Column(f"posterior sd ({COST_UNIT})"),
    ]
    rows = [
        [_int(r["batch_size"]), _text(r["stage"]), _int(r["num_observations"]),
         "-" if missing(r["posterior_mean"]) else si(float(r["posterior_mean"]), ""),
         "yes" if r["pruned"] else "no", _sd(r["posterior_precision"])]
        for r in state.sort_values("batch_size").to_dict("records")
    ]  # fmt: skip
    print_table(out, "where the bandit stands", columns, rows, wide=wide)
