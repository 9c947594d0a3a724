"""The report's figures as PNG files.

Built on `matplotlib.figure.Figure` (not pyplot): no global figure state, no GUI backend, so it
runs the same in a KFP step, a notebook kernel and a test worker. Every figure drawn from a
simulated GPU says "simulated" in its title: a reader must never mistake it for a measurement.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from zeus.job import JobSpec, TrialStatus
from zeus.power.selection import choose_limit
from zeus.report.frames import default_config_cost, finished_trials, is_simulated, per_recurrence

PLOT_NAMES = ("cost_per_recurrence", "batch_size_per_trial", "posterior", "power_profile")
_STATUS_STYLE = {
    TrialStatus.REACHED.value: ("tab:green", "o"),
    TrialStatus.NOT_REACHED.value: ("tab:orange", "x"),
    TrialStatus.COST_EXCEEDED.value: ("tab:red", "v"),
    TrialStatus.OOM.value: ("tab:purple", "s"),
    TrialStatus.FAILED.value: ("black", "X"),
    TrialStatus.DISPATCHED.value: ("tab:gray", "."),
}


def _title(text: str, simulated: bool) -> str:
    return f"{text} (simulated GPU)" if simulated else text


def _save(fig: Figure, path: Path, title: str) -> Path:
    """Save as PNG with the title also in the PNG's metadata, so tools (and tests) can read
    what a figure is, and whether it is simulated, without looking at pixels."""
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100, metadata={"Title": title, "Software": "zeus-kfp"})
    return path


def plot_cost_per_recurrence(trials: pd.DataFrame, profiles: pd.DataFrame, spec: JobSpec, path: Path) -> Path | None:
    """Bars: each recurrence's total cost; dashed line: the default configuration's estimate."""
    rec = per_recurrence(trials)
    if rec.empty:
        return None
    baseline = default_config_cost(trials, profiles, spec)
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    colors = ["tab:blue" if r else "tab:red" for r in rec["reached"]]
    ax.bar(rec["recurrence"], rec["cost"], color=colors, label="recurrence cost (red: target missed)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if baseline.cost is not None:
        ax.axhline(baseline.cost, color="black", linestyle="--", label="default config (estimate)")
    ax.set_ylim(0, max(float(rec["cost"].max()), baseline.cost or 0.0) * 1.25)  # headroom for the legend
    ax.set_xlabel("recurrence")
    ax.set_ylabel(f"cost (eta={spec.eta_knob:g})")
    title = _title(f"{spec.job_id}: cost per recurrence", is_simulated(trials, profiles))
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize="small")  # "best" scans every bar: seconds on long histories
    return _save(fig, path, title)


def plot_batch_size_per_trial(trials: pd.DataFrame, spec: JobSpec, path: Path) -> Path | None:
    """Which batch size the bandit chose for each trial, marked by how the trial ended."""
    if trials.empty:
        return None
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    ordered = trials.sort_values(["recurrence", "trial"]).reset_index(drop=True)
    for status, group in ordered.groupby("status"):
        color, marker = _STATUS_STYLE.get(str(status), ("tab:gray", "."))
        ax.scatter(group.index + 1, group["batch_size"], color=color, marker=marker, label=str(status), s=45)
    ax.axhline(spec.default_batch_size, color="gray", linestyle=":", label="default batch size")
    ax.set_yscale("log", base=2)
    ax.set_yticks(list(spec.batch_sizes), [str(b) for b in spec.batch_sizes])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial (in order, across recurrences)")
    ax.set_ylabel("batch size")
    title = _title(f"{spec.job_id}: batch size chosen per trial", is_simulated(trials))
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")  # outside: never hides a point
    return _save(fig, path, title)


def plot_posterior(bandit_state: pd.DataFrame, spec: JobSpec, path: Path, simulated: bool) -> Path | None:
    """Posterior of each batch size's cost: mean with +-1 standard deviation (1/sqrt(precision)).

    The policies report posterior_mean as a cost (the negated reward of Zeus's bandit), which is
    what people read: lower is better. Pruned arms are grey; arms without a posterior (no
    observations yet) are listed on the axis but not drawn.
    """
    if bandit_state.empty or bandit_state["posterior_mean"].isna().all():
        return None  # no arm has an observation yet: nothing to draw
    state = bandit_state.sort_values("batch_size")
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    labels = [str(int(b)) for b in state["batch_size"]]
    for i, (_, arm) in enumerate(state.iterrows()):
        mean, precision = arm.get("posterior_mean"), arm.get("posterior_precision")
        if mean is None or pd.isna(mean):
            continue
        std = 1.0 / math.sqrt(precision) if _positive(precision) else 0.0
        color = "tab:gray" if bool(arm.get("pruned", False)) else "tab:blue"
        ax.errorbar(i, float(mean), yerr=std, fmt="o", color=color, capsize=4)
        ax.annotate(f"n={int(arm['num_observations'])}", (i, float(mean)), textcoords="offset points", xytext=(6, 4))
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("batch size (grey: pruned)")
    ax.set_ylabel("expected cost (posterior mean +- 1 sd)")
    title = _title(f"{spec.job_id}: bandit posterior per batch size", simulated)
    ax.set_title(title)
    return _save(fig, path, title)


def _positive(value: object) -> bool:
    return value is not None and not pd.isna(value) and float(value) > 0


def plot_power_profile(trials: pd.DataFrame, profiles: pd.DataFrame, spec: JobSpec, path: Path) -> Path | None:
    """The latest training profile per batch size: throughput and cost rate against the power
    limit, with a star at the limit the profiled trial ran at, as the trial table records it (the
    profiler's choice; the argmin of the same cost rate where the trial is not in the table)."""
    train = profiles[profiles["phase"] == "train"] if not profiles.empty else profiles
    if train.empty:
        return None
    fig = Figure(figsize=(9, 4))
    ax_tp, ax_cost = fig.subplots(1, 2)
    for batch_size, group in train.groupby("batch_size"):
        latest = group[group["trial"] == group["trial"].max()] if "trial" in group else group
        latest = latest.groupby("power_limit_w", as_index=False)[["average_power_w", "throughput"]].mean()
        rates = [spec.cost_rate(p, t) for p, t in zip(latest["average_power_w"], latest["throughput"], strict=True)]
        (line,) = ax_tp.plot(latest["power_limit_w"], latest["throughput"], marker="o", label=f"bs {int(batch_size)}")
        ax_cost.plot(latest["power_limit_w"], rates, marker="o", color=line.get_color())
        chosen = _limit_ran_at(trials, group, latest, spec)
        at = latest.index[latest["power_limit_w"] == chosen]
        if len(at):
            ax_cost.scatter([chosen], [rates[int(at[0])]], marker="*", s=200, color=line.get_color())
    ax_tp.set_xlabel("power limit (W)")
    ax_tp.set_ylabel("throughput")
    ax_tp.legend(loc="best", fontsize="small")
    ax_cost.set_xlabel("power limit (W)")
    ax_cost.set_ylabel("cost per unit of work (star: chosen)")
    title = _title(f"{spec.job_id}: power profile (training)", is_simulated(trials, profiles))
    fig.suptitle(title)
    return _save(fig, path, title)


def _limit_ran_at(trials: pd.DataFrame, group: pd.DataFrame, latest: pd.DataFrame, spec: JobSpec) -> float:
    """The power limit recorded for the trial that produced this profile; the profiler's own choice
    (`choose_limit`, the function the trial used) when the trials table does not have it."""
    if "trial" in group and not trials.empty and "power_limit_w" in trials:
        row = trials[trials["trial"] == group["trial"].max()]
        if not row.empty and _positive(row["power_limit_w"].iloc[0]):
            return float(row["power_limit_w"].iloc[0])
    return choose_limit(latest.assign(phase="train"), spec.cost_rate)


def write_plots(
    trials: pd.DataFrame, profiles: pd.DataFrame, bandit_state: pd.DataFrame, spec: JobSpec, out_dir: Path
) -> list[Path]:
    """Write the report's PNGs into `out_dir` (created if needed) and return their paths.

    A figure with nothing to show yet (a job with no profile, say) is left out rather than drawn
    empty; the Markdown report says which are missing.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    simulated = is_simulated(trials, profiles, bandit_state)
    made = [
        plot_cost_per_recurrence(trials, profiles, spec, out_dir / "cost_per_recurrence.png"),
        plot_batch_size_per_trial(finished_trials(trials), spec, out_dir / "batch_size_per_trial.png"),
        plot_posterior(bandit_state, spec, out_dir / "posterior.png", simulated),
        plot_power_profile(trials, profiles, spec, out_dir / "power_profile.png"),
    ]
    return [p for p in made if p is not None]
