"""The report as one self-contained Markdown document for the KFP UI.

KFP shows a Markdown artifact as-is and serves no side files with it, so the figures are
embedded as base64 `data:image/png` URIs: one artifact, nothing to resolve.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pandas as pd
from PIL import Image

from zeus_kfp.job import JobSpec
from zeus_kfp.report.numbers import (
    FAILED,
    MISSED,
    REACHED,
    finished_trials,
    is_simulated,
    limit_text,
    per_recurrence,
    spent,
)
from zeus_kfp.report.plots import PLOT_NAMES
from zeus_kfp.report.savings import savings_of
from zeus_kfp.trials import trial_columns

SIMULATED_NOTE = (
    "> **Simulated GPU.** These figures come from a simulated GPU (no NVML device was available); "
    "they show how the optimizer behaves, not measured energy."
)
# The KFP UI's MarkdownViewer renders at most this many characters and truncates the rest
# (kubeflow/pipelines frontend, MAX_MARKDOWN_STR_LENGTH = 50 * 1000 * 8).
MAX_MARKDOWN_CHARS = 400_000
RECENT_RECURRENCES = 30  # rows of the all-recurrences table kept when the report must shrink
TRIAL_COLUMNS = trial_columns(
    "recurrence",
    "attempt",
    "batch_size",
    "power_limit_w",
    "status",
    "num_epochs",
    "time_s",
    "energy_j",
    "cost",
    "reason",
)


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return _escaped(" ".join(str(value).split()))  # one line: a newline would end the table row


def _escaped(text: str) -> str:
    """Table text as every renderer reads it: `|` would end the cell, and the KFP UI's markdown-to-jsx reads
    `power_limit_w` as power*limit*w (underscores as emphasis), so both are escaped."""
    return text.replace("|", "\\|").replace("_", "\\_")


def short_reason(reason: object, limit: int = 160) -> str:
    """A failure reason fit for a table cell: one line; head and tail kept (the tail of a
    traceback says what went wrong)."""
    text = " ".join(str(reason or "").split())
    if len(text) <= limit:
        return text
    return text[: limit // 3] + " ... " + text[-(limit - limit // 3) :]


def markdown_table(frame: pd.DataFrame, columns: list[str]) -> str:
    """A GitHub-flavoured Markdown table of `columns` (those present) of `frame`."""
    cols = [c for c in columns if c in frame.columns]
    if frame.empty or not cols:
        return "_none_"
    lines = ["| " + " | ".join(_escaped(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame[cols].itertuples(index=False)]
    return "\n".join(lines)


def image_data_uri(path: Path, compact: bool = False) -> str:
    """A PNG as a `data:` URI, so the Markdown carries its own figures. `compact` re-encodes it
    with a 64-colour palette (about a third of the size; plots have few colours anyway)."""
    data = Path(path).read_bytes()
    if compact:
        with Image.open(io.BytesIO(data)) as img:
            out = io.BytesIO()
            img.convert("RGB").quantize(colors=64).save(out, format="PNG", optimize=True)
            data = out.getvalue()
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def markdown_report(
    trials: pd.DataFrame,
    profiles: pd.DataFrame,
    bandit_state: pd.DataFrame,
    spec: JobSpec,
    plots: list[Path],
    recurrence: int | None = None,
) -> str:
    """Markdown for people: the recurrence's trials, cost against the default configuration,
    the bandit's state and the figures (`plots`, from `write_plots`) embedded inline.

    `trials` is the job's whole history; `recurrence` picks the one the report is about
    (default: the latest). A report longer than the KFP UI renders (MAX_MARKDOWN_CHARS) is
    rebuilt compact rather than shown cut off.
    """
    full = _render(trials, profiles, bandit_state, spec, plots, recurrence, compact=False)
    if len(full) <= MAX_MARKDOWN_CHARS:
        return full
    return _render(trials, profiles, bandit_state, spec, plots, recurrence, compact=True)


def _render(
    trials: pd.DataFrame,
    profiles: pd.DataFrame,
    bandit_state: pd.DataFrame,
    spec: JobSpec,
    plots: list[Path],
    recurrence: int | None,
    compact: bool,
) -> str:
    """The report; `compact` shrinks it to fit the KFP UI (palette images, recent recurrences only)."""
    simulated = is_simulated(trials, profiles, bandit_state)
    rec = per_recurrence(trials)
    parts = [f"# zeus-kfp: job `{spec.job_id}`"]
    if simulated:
        parts.append(SIMULATED_NOTE)
    chosen = rec if recurrence is None else rec[rec["recurrence"] == recurrence]
    if chosen.empty:
        which = "" if recurrence is None else f" in recurrence {recurrence}"
        parts.append(f"No finished trial yet{which}: its trials were dispatched but none recorded a result.")
    else:
        current = chosen.iloc[-1]
        saved = savings_of(trials, profiles, spec)
        baseline = saved.baseline
        parts.append(f"## Recurrence {int(current['recurrence'])} (`{current['recurrence_id']}`)")
        cost, energy, time_s = spent(current)
        verdict = {
            REACHED: "reached the target",
            MISSED: "did NOT reach the target",
            FAILED: "every trial FAILED: no model (left out of the saving)",
        }[current["outcome"]]
        parts.append(
            f"Batch sizes tried: {current['batch_sizes']}; {verdict}. "
            f"Spent: energy {energy:,.0f} J, time {time_s:,.1f} s, cost {cost:,.1f}"
            + (
                f" (of which {int(current['failed_trials'])} failed trial(s): energy {current['failed_energy_j']:,.0f}"
                f" J, time {current['failed_time_s']:,.1f} s, cost {current['failed_cost']:,.1f})."
                if current["failed_trials"]
                else "."
            )
        )
        if saved.met_at_once:
            parts.append(saved.met_at_once_line()[0].upper() + saved.met_at_once_line()[1:] + ".")
        elif baseline.cost is None:
            parts.append(f"Default configuration cost: unknown ({baseline.how}).")
        else:
            saving = saved.saving_of(int(current["recurrence"]))
            this = f"this recurrence saved {saving:+.1%}" if saving is not None else "left out of the saving"
            cumulative = "not known yet" if saved.cumulative is None else f"{saved.cumulative:+.1%}"
            parts.append(
                f"Default configuration (batch size {spec.default_batch_size}, max power) would cost about "
                f"{baseline.cost:,.1f} ({baseline.how}): {this}; "
                f"cumulative {cumulative} over {saved.counted_text()}."
            )
            if saved.waste_line():
                parts.append(saved.waste_line()[0].upper() + saved.waste_line()[1:] + ".")
        done = finished_trials(trials)
        these = done[done["recurrence"] == current["recurrence"]].copy()
        if "reason" in these.columns:
            reasons = these["reason"]
            these["power_limit_w"] = [limit_text(w, r) for w, r in zip(these["power_limit_w"], reasons, strict=True)]
            these["reason"] = reasons.map(short_reason)
        parts.append("### Trials of this recurrence")
        parts.append(markdown_table(these, TRIAL_COLUMNS))
        if compact and len(rec) > RECENT_RECURRENCES:
            parts.append(f"### The last {RECENT_RECURRENCES} of {len(rec)} recurrences")
            parts.append(markdown_table(rec.tail(RECENT_RECURRENCES), list(rec.columns)))
        else:
            parts.append("### All recurrences")
            parts.append(markdown_table(rec, list(rec.columns)))
    parts.append("### Bandit state")
    state_cols = ["batch_size", "stage", "num_observations", "posterior_mean", "posterior_precision", "pruned"]
    parts.append(markdown_table(bandit_state, state_cols))
    by_name = {Path(p).stem: Path(p) for p in plots}
    for name in PLOT_NAMES:
        title = name.replace("_", " ")
        if name in by_name:
            parts.append(f"### {title.capitalize()}\n\n![{title}]({image_data_uri(by_name[name], compact)})")
        else:
            parts.append(f"### {title.capitalize()}\n\n_no data for this figure yet_")
    return "\n\n".join(parts) + "\n"
