"""The fleet for people: table rows (the CLI's and the KFP report's), the Markdown report and its Metrics.

One set of cells for both views, so the terminal and the KFP UI say the same thing in the same words: a job
still exploring says so in its stage cell and in a note under the table (its negative saving is the price
of trying batch sizes, which later recurrences pay back), never hidden; failed runs are their own columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zeus_kfp.fleet.figures import CARBON_SOURCE, DEFAULT_CARBON_INTENSITY, EXPLORATION, J_PER_KWH, Fleet
from zeus_kfp.report.units import COST_UNIT, si

HEADERS = ["job", "stage", "recurrences", "energy used", "saving", "energy saved", "cost saved", "GPU-hours saved",
           "CO2 avoided", "failed trials", "failed energy"]  # fmt: skip
EXPLORING_NOTE = (
    "still exploring: {jobs}. A negative saving there is the price of trying batch sizes (a profiling epoch each, "
    "a retry for a size that misses), which later recurrences pay back."
)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g} h"


def _grams(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.3g} kg" if abs(value) >= 1000 else f"{value:.3g} g"


def rows(fleet: Fleet) -> list[list[str]]:
    """One row of cells per job (HEADERS' order), then the total row."""
    out = []
    for j in fleet.jobs:
        why = " (target met at once)" if j.met_at_once else " (no baseline yet)"
        stage = j.stage + (why if j.saving is None and j.recurrences else "")
        out.append([j.job_id, stage, f"{j.recurrences}", si(j.energy_used_j, "J"), _percent(j.saving),
                    si(j.energy_saved_j, "J"), si(j.cost_saved_j, COST_UNIT), _hours(j.gpu_hours_saved),
                    _grams(j.co2_avoided_g), f"{j.failed_trials}", si(j.failed_energy_j, "J")])  # fmt: skip
    t = fleet.total()
    exploring = f"{t['exploring']} of {t['jobs']} exploring"
    out.append(["total", exploring, f"{t['recurrences']}", si(t["energy_used_j"], "J"), _percent(t["saving"]),
                si(t["energy_saved_j"], "J"), si(t["cost_saved_j"], COST_UNIT), _hours(t["gpu_hours_saved"]),
                _grams(t["co2_avoided_g"]), f"{t['failed_trials']}", si(t["failed_energy_j"], "J")])  # fmt: skip
    return out


def notes(fleet: Fleet) -> list[str]:
    """The lines under the table: exploring jobs, jobs without a baseline, waste, and what CO2 is priced at."""
    out = []
    exploring = [j.job_id for j in fleet.jobs if j.stage == EXPLORATION]
    if exploring:
        out.append(EXPLORING_NOTE.format(jobs=", ".join(exploring)))
    without = fleet.total()["without_baseline"]
    if without:
        out.append(f"no saving yet (no trial at the default batch size has reached the target): {', '.join(without)}")
    at_once = fleet.total()["met_at_once"]
    if at_once:
        out.append(
            "no saving: every trial met the target at its first evaluation, before any training tells the batch "
            f"sizes apart (check target_metric and higher_is_better): {', '.join(at_once)}"
        )
    wasted = [j for j in fleet.jobs if j.failed_trials]
    if wasted:
        out.append(
            "failed runs (no model; left out of the saving, their energy counted in energy used): "
            + ", ".join(f"{j.job_id} {j.failed_trials} trial(s), {si(j.failed_energy_j, 'J')}" for j in wasted)
        )
    source = CARBON_SOURCE if fleet.carbon_intensity == DEFAULT_CARBON_INTENSITY else "--carbon-intensity"
    out.append(f"CO2 at {fleet.carbon_intensity:g} gCO2/kWh (source: {source}); GPU energy only (no host, no PUE).")
    out.append("saving: against the default configuration (each job's default batch size at max power), as "
               "`zeus-kfp show` says it; cost is Zeus's, in joules.")  # fmt: skip
    return out


def window_text(fleet: Fleet) -> str:
    since = "the start" if fleet.since is None else f"{fleet.since:%Y-%m-%d %H:%M} UTC"
    until = "now" if fleet.until is None else f"{fleet.until:%Y-%m-%d %H:%M} UTC"
    return f"recurrences that ended from {since} to {until}"


def _escaped(text: str) -> str:
    return text.replace("|", "\\|").replace("_", "\\_")  # the KFP UI's markdown-to-jsx reads _x_ as emphasis


def markdown(fleet: Fleet, plot_uri: str | None = None) -> str:
    """The fleet report for the KFP UI: the table, the notes and (a data: URI) the cumulative plot."""
    where = f" in namespace {fleet.namespace}" if fleet.namespace else ""
    lines = [f"# zeus-kfp fleet{_escaped(where)}", "", _escaped(f"{len(fleet.jobs)} job(s) in {fleet.store}, "
             f"{window_text(fleet)}."), ""]  # fmt: skip
    lines += ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for i, row in enumerate(rows(fleet)):
        cells = [_escaped(c) for c in row]
        if i == len(fleet.jobs):
            cells = [f"**{c}**" for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [""] + [f"- {_escaped(n)}" for n in notes(fleet)]
    if plot_uri:
        lines += ["", "## Cumulative energy saved, per job", "", f"![cumulative energy saved]({plot_uri})"]
    return "\n".join(lines) + "\n"


def metrics(fleet: Fleet) -> dict[str, float]:
    """The fleet's totals for KFP's Metrics (units in the names; six significant digits, as the report step's)."""
    t = fleet.total()
    out: dict[str, Any] = {
        "jobs": t["jobs"],
        "jobs_exploring": t["exploring"],
        "recurrences": t["recurrences"],
        "energy_used_kwh": t["energy_used_j"] / J_PER_KWH,
        "energy_saved_kwh": None if t["energy_saved_j"] is None else t["energy_saved_j"] / J_PER_KWH,
        "saving_percent": None if t["saving"] is None else 100.0 * t["saving"],
        "gpu_hours_saved": t["gpu_hours_saved"],
        "co2_avoided_kg": None if t["co2_avoided_g"] is None else t["co2_avoided_g"] / 1000.0,
        "failed_trials": t["failed_trials"],
        "failed_energy_kwh": t["failed_energy_j"] / J_PER_KWH,
    }
    return {name: float(f"{float(value):.6g}") for name, value in out.items() if value is not None}


def write_report(fleet: Fleet, markdown_path: str | Path, plot_path: str | Path | None = None) -> dict[str, float]:
    """Write the Markdown with the plot embedded (one artifact, nothing to resolve in the KFP UI), keeping the PNG
    at `plot_path` when given; returns the Metrics to log."""
    import tempfile

    from zeus_kfp.fleet.plot import PLOT_NAME, plot_fleet  # deferred: matplotlib
    from zeus_kfp.report.markdown import image_data_uri

    out = Path(markdown_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="zeus-fleet-") as tmp:
        png = plot_fleet(fleet, Path(plot_path) if plot_path else Path(tmp) / PLOT_NAME)
        out.write_text(markdown(fleet, image_data_uri(png, compact=True) if png else None))
    return metrics(fleet)
