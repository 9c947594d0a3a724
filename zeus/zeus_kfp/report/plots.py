"""The report's figures as PNG files.

Built on `matplotlib.figure.Figure` (not pyplot): no global figure state, no GUI backend, so it
runs the same in a KFP step, a notebook kernel and a test worker. Every figure drawn from a
simulated GPU says so in its title, in the words the tables use (the trials' source, e.g.
"simulated (trace: cifar100/v100)"): a reader must never mistake it for a measurement. Axes carry
their units; a power limit that profiling did not choose is never drawn as chosen (`limit_note`).
Each PNG's metadata holds its title, its axes' labels (Comment), and (Description) the cost plot's
default configuration cost and the power plot's trials whose limit profiling did not choose.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.power.selection import choose_limit
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.report.numbers import (
    default_config_cost,
    finished_trials,
    is_simulated,
    limit_note,
    per_recurrence,
    profile_states,
)

if TYPE_CHECKING:
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

PLOT_NAMES = ("cost_per_recurrence", "batch_size_per_trial", "posterior", "power_profile")
_STATUS_STYLE = {
    TrialStatus.REACHED.value: ("tab:green", "o"),
    TrialStatus.NOT_REACHED.value: ("tab:orange", "x"),
    TrialStatus.COST_EXCEEDED.value: ("tab:red", "v"),
    TrialStatus.OOM.value: ("tab:purple", "s"),
    TrialStatus.FAILED.value: ("black", "X"),
    TrialStatus.DISPATCHED.value: ("tab:gray", "."),
}


def source_label(*frames: pd.DataFrame) -> str:
    """Where the figures come from, as the tables' "figures:" line says it: the trials' simulated sources
    ("simulated (trace: cifar100/v100)", "simulated (GPU model)"), "simulated" without one, "" when measured."""
    if not is_simulated(*frames):
        return ""
    sources = set()
    for frame in frames:
        if "source" in frame.columns and "simulated" in frame.columns:
            simulated = frame["simulated"].fillna(False).astype(bool)
            sources |= {str(s) for s in frame.loc[simulated, "source"].dropna() if str(s).startswith("simulated")}
    return " or ".join(sorted(sources)) or "simulated"


def _title(text: str, source: str) -> str:
    return f"{text}, {source}" if source else text


def _figure(width: float, height: float) -> Figure:
    """A new figure. matplotlib loads here, when a figure is drawn, not with this module: the Markdown report,
    `zeus-kfp show` and the TensorBoard writer import it for its names and helpers, and matplotlib's import
    costs 0.4 s of CPU in every such process (seconds under load)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _integer_ticks(axis: Axis) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _save(fig: Figure, path: Path, title: str, description: str = "") -> Path:
    """Save as PNG with the title (and `description`) also in the PNG's metadata, so tools (and tests) can
    read what a figure is, and whether it is simulated, without looking at pixels."""
    fig.tight_layout()
    axes = "; ".join(f"x: {ax.get_xlabel()} | y: {ax.get_ylabel()}" for ax in fig.axes)
    metadata = {"Title": title, "Software": "zeus-kfp", "Comment": axes}
    fig.savefig(path, format="png", dpi=100, metadata=metadata | ({"Description": description} if description else {}))
    return path


def plot_cost_per_recurrence(trials: pd.DataFrame, profiles: pd.DataFrame, spec: JobSpec, path: Path) -> Path | None:
    """Bars: each recurrence's total cost; dashed line: the default configuration's estimate."""
    rec = per_recurrence(trials)
    if rec.empty:
        return None
    baseline = default_config_cost(trials, profiles, spec)
    fig = _figure(7, 4)
    ax = fig.add_subplot()
    colors = ["tab:blue" if r else "tab:red" for r in rec["reached"]]
    ax.bar(rec["recurrence"], rec["cost"], color=colors, label="recurrence cost (red: target missed)")
    if (rec["failed_cost"] > 0).any():  # waste, on top: not the policy's, left out of the saving
        ax.bar(rec["recurrence"], rec["failed_cost"], bottom=rec["cost"], color="lightgray", hatch="//",
               edgecolor="gray", label="failed trials (no model; not in the saving)")  # fmt: skip
    _integer_ticks(ax.xaxis)
    if baseline.cost is not None:
        ax.axhline(baseline.cost, color="black", linestyle="--", label="default config")
    ax.set_ylim(0, max(float((rec["cost"] + rec["failed_cost"]).max()), baseline.cost or 0.0) * 1.25)  # legend room
    ax.set_xlabel("recurrence")
    ax.set_ylabel(f"cost (J, eta={spec.eta_knob:g})")
    title = _title(f"{spec.job_id}: cost per recurrence", source_label(trials, profiles))
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize="small")  # "best" scans every bar: seconds on long histories
    described = f"default config: {baseline.cost!r} J ({baseline.how})" if baseline.cost else baseline.how
    return _save(fig, path, title, described)


def plot_batch_size_per_trial(trials: pd.DataFrame, spec: JobSpec, path: Path) -> Path | None:
    """Which batch size the bandit chose for each trial, marked by how the trial ended."""
    if trials.empty:
        return None
    fig = _figure(7, 4)
    ax = fig.add_subplot()
    ordered = trials.sort_values(["recurrence", "trial"]).reset_index(drop=True)
    for status, group in ordered.groupby("status"):
        color, marker = _STATUS_STYLE.get(str(status), ("tab:gray", "."))
        ax.scatter(group.index + 1, group["batch_size"], color=color, marker=marker, label=str(status), s=45)
    ax.axhline(spec.default_batch_size, color="gray", linestyle=":", label="default batch size")
    ax.set_yscale("log", base=2)
    ax.set_yticks(list(spec.batch_sizes), [str(b) for b in spec.batch_sizes])
    _integer_ticks(ax.xaxis)
    ax.set_xlabel("trial (in order, across recurrences)")
    ax.set_ylabel("batch size")
    title = _title(f"{spec.job_id}: batch size chosen per trial", source_label(trials))
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")  # outside: never hides a point
    return _save(fig, path, title)


def plot_posterior(bandit_state: pd.DataFrame, spec: JobSpec, path: Path, source: str) -> Path | None:
    """Posterior of each batch size's cost: mean with +-1 standard deviation (1/sqrt(precision)).

    The policies report posterior_mean as a cost (the negated reward of Zeus's bandit), which is
    what people read: lower is better. Pruned arms are grey (the axis says so only when one is
    drawn); arms without a posterior (no observations yet) are listed on the axis but not drawn.
    """
    if bandit_state.empty or bandit_state["posterior_mean"].isna().all():
        return None  # no arm has an observation yet: nothing to draw
    state = bandit_state.sort_values("batch_size")
    fig = _figure(7, 4)
    ax = fig.add_subplot()
    labels = [str(int(b)) for b in state["batch_size"]]
    grey = False
    for i, (_, arm) in enumerate(state.iterrows()):
        mean, precision = arm.get("posterior_mean"), arm.get("posterior_precision")
        if mean is None or pd.isna(mean):
            continue
        std = 1.0 / math.sqrt(precision) if _positive(precision) else 0.0
        pruned = bool(arm.get("pruned", False))
        grey |= pruned
        ax.errorbar(i, float(mean), yerr=std, fmt="o", color="tab:gray" if pruned else "tab:blue", capsize=4)
        ax.annotate(f"n={int(arm['num_observations'])}", (i, float(mean)), textcoords="offset points", xytext=(6, 4))
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("batch size" + (" (grey: pruned)" if grey else ""))
    ax.set_ylabel("expected cost (J, posterior mean +- 1 sd)")
    title = _title(f"{spec.job_id}: bandit posterior per batch size", source)
    ax.set_title(title)
    return _save(fig, path, title)


def _positive(value: object) -> bool:
    return value is not None and not pd.isna(value) and float(value) > 0


def plot_power_profile(trials: pd.DataFrame, profiles: pd.DataFrame, spec: JobSpec, path: Path) -> Path | None:
    """The latest training profile per batch size: throughput and cost rate against the power
    limit, with a star at the limit the profiled trial ran at, as the trial table records it (the
    profiler's choice; the argmin of the same cost rate where the trial is not in the table). A
    trial whose limit profiling did not choose is not starred: a measure-only profile gets an x at
    the limit in force, and the trials that ran unprofiled or measure only are listed under the axes."""
    train = profiles[profiles["phase"] == "train"] if not profiles.empty else profiles
    if train.empty:
        return None
    fig = _figure(9, 4.5)
    ax_tp, ax_cost = fig.subplots(1, 2)
    states = profile_states(trials, profiles)
    for batch_size, group in train.groupby("batch_size"):
        latest = group[group["trial"] == group["trial"].max()] if "trial" in group else group
        latest = latest.groupby("power_limit_w", as_index=False)[["average_power_w", "throughput"]].mean()
        rates = [
            spec.cost_model.rate(p, t) for p, t in zip(latest["average_power_w"], latest["throughput"], strict=True)
        ]
        label = f"bs {int(batch_size)} ({states[int(batch_size)].split(' (')[0]})"  # complete/unfinished, N limits
        (line,) = ax_tp.plot(latest["power_limit_w"], latest["throughput"], marker="o", label=label)
        ax_cost.plot(latest["power_limit_w"], rates, marker="o", color=line.get_color())
        chosen, note = _limit_ran_at(trials, group, latest, spec)
        at = latest.index[latest["power_limit_w"] == chosen]
        if len(at):
            marker = ("x", 120) if note else ("*", 200)
            ax_cost.scatter([chosen], [rates[int(at[0])]], marker=marker[0], s=marker[1], color=line.get_color())
    ax_tp.set_xlabel("power limit (W)")
    ax_tp.set_ylabel("throughput (samples/s; epochs/s if only epochs reported)")
    ax_tp.legend(loc="best", fontsize="small")
    ax_cost.set_xlabel("power limit (W)")
    ax_cost.set_ylabel("cost per unit of work (J; star: chosen, x: measure only)")
    title = _title(f"{spec.job_id}: power profile (training)", source_label(trials, profiles))
    fig.suptitle(title)
    notes = _unchosen(trials)
    if notes:
        fig.text(0.01, 0.01, notes, fontsize="small")
        fig.subplots_adjust(bottom=0.22)
    return _save(fig, path, title, notes)


def _unchosen(trials: pd.DataFrame) -> str:
    """The trials whose power limit profiling did not choose, by note: "unprofiled: trials 1, 3 (bs 64)"."""
    done = finished_trials(trials)
    if done.empty or "reason" not in done.columns:
        return ""
    notes = done.assign(note=[limit_note(r) for r in done["reason"]])
    parts = []
    for note, group in notes[notes["note"] != ""].groupby("note", sort=True):
        sizes = ", ".join(str(int(b)) for b in sorted(group["batch_size"].unique()))
        listed = ", ".join(str(int(t)) for t in group["trial"].tolist()[:12]) + (", ..." if len(group) > 12 else "")
        parts.append(f"{note}: trials {listed} (batch size {sizes}), at the limit in force")
    return "; ".join(parts)


def _limit_ran_at(trials: pd.DataFrame, group: pd.DataFrame, latest: pd.DataFrame, spec: JobSpec) -> tuple[float, str]:
    """The power limit recorded for the trial that produced this profile and its limit_note ("" when chosen);
    the profiler's own choice (`choose_limit`, the function the trial used) when the trials table does not have it."""
    if "trial" in group and not trials.empty and "power_limit_w" in trials:
        row = trials[trials["trial"] == group["trial"].max()]
        if not row.empty and _positive(row["power_limit_w"].iloc[0]):
            reason = row["reason"].iloc[0] if "reason" in row.columns else ""
            return float(row["power_limit_w"].iloc[0]), limit_note(reason)
    return choose_limit(PowerProfile(latest.assign(phase="train")), spec.cost_model.rate), ""


def write_plots(
    trials: pd.DataFrame, profiles: pd.DataFrame, bandit_state: pd.DataFrame, spec: JobSpec, out_dir: Path
) -> list[Path]:
    """Write the report's PNGs into `out_dir` (created if needed) and return their paths.

    A figure with nothing to show yet (a job with no profile, say) is left out rather than drawn
    empty; the Markdown report says which are missing.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    source = source_label(trials, profiles, bandit_state)
    made = [
        plot_cost_per_recurrence(trials, profiles, spec, out_dir / "cost_per_recurrence.png"),
        plot_batch_size_per_trial(finished_trials(trials), spec, out_dir / "batch_size_per_trial.png"),
        plot_posterior(bandit_state, spec, out_dir / "posterior.png", source),
        plot_power_profile(trials, profiles, spec, out_dir / "power_profile.png"),
    ]
    return [p for p in made if p is not None]
