"""Numbers behind the report: pure functions of the store's frames, so plots, Markdown and
metrics agree, and tests can check them on frames they build by hand.

Column names are the store's (see zeus_kfp.store): trials have recurrence, recurrence_id, trial,
attempt, batch_size, power_limit_w, status, finished, cost, energy_j, time_s, simulated, ...;
profiles have batch_size, phase, power_limit_w, average_power_w, throughput, simulated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.power.gpu import MEASURE_ONLY_NOTE
from zeus_kfp.profiles import EARLIER_UNPROFILED_NOTE, UNFINISHED_NOTE, UNPROFILED_NOTE
from zeus_kfp.simulate.engine import expected_figures
from zeus_kfp.simulate.trace_trial import TraceBackend

TRACE_SOURCE = re.compile(
    r"simulated \(trace: ([\w.-]+/[\w.-]+)\)"
)  # zeus_kfp.simulate.trace_trial.TraceBackend.source
RECURRENCE_COLUMNS = [
    "recurrence", "recurrence_id", "trials", "reached", "batch_sizes", "energy_j", "time_s", "cost", "outcome",
    "failed_energy_j", "failed_cost", "failed_time_s", "failed_trials",
]  # fmt: skip
# A recurrence's outcome (per_recurrence): a trial reached the target; every trial ended honestly short of it
# (missed the target, stopped by the early stop, out of memory); or every trial failed (no model at all).
REACHED, MISSED, FAILED = "reached", "missed", "failed"


def finished_trials(trials: pd.DataFrame) -> pd.DataFrame:
    """Trials that have a result. A dispatched-only trial (running, or lost) has no cost yet."""
    if trials.empty:
        return trials
    if "finished" in trials.columns:
        mask = trials["finished"].fillna(False).astype(bool)
    else:
        mask = trials["status"] != TrialStatus.DISPATCHED.value
    return trials[mask]


UNPROFILED, MEASURE_ONLY = "unprofiled", "measure only"


def limit_note(reason: object) -> str:
    """How a trial's power limit came about when profiling did not choose it, as every table and plot says it:
    "unprofiled" (a plain script that reported nothing to pace the profiler, or, stored by an earlier version,
    one whose metrics carried no counter: it trained at the limit in force) or "measure only" (the GPU's
    limits could not be set); "" when the profiler chose it, or reused a stored choice. Read off the trial's
    reason, where the trial says so."""
    text = "" if reason is None or (isinstance(reason, float) and pd.isna(reason)) else str(reason)
    if MEASURE_ONLY_NOTE in text:
        return MEASURE_ONLY
    return UNPROFILED if UNPROFILED_NOTE in text or EARLIER_UNPROFILED_NOTE in text else ""


def profile_states(trials: pd.DataFrame, profiles: pd.DataFrame) -> dict[int, str]:
    """Per batch size, how complete its latest profile is, as `show` and the power plot say it: "complete,
    N limits" or "unfinished, N limits (the next trial continues it)". A profile is unfinished when the trial
    that measured it ended mid-search, which its reason says (zeus_kfp.profiles.UNFINISHED_NOTE)."""
    train = profiles[profiles["phase"] == "train"] if not profiles.empty else profiles
    known = not trials.empty and "reason" in trials
    reasons = dict(zip(trials["trial"], trials["reason"], strict=True)) if known else {}
    states = {}
    for batch_size, group in train.groupby("batch_size"):
        trial = group["trial"].max()
        limits = group.loc[group["trial"] == trial, "power_limit_w"].nunique()
        unfinished = UNFINISHED_NOTE in str(reasons.get(trial, "") or "")
        counted = f"{limits} limit" + ("s" if limits != 1 else "")
        states[int(batch_size)] = (
            f"unfinished, {counted} (the next trial continues it)" if unfinished else f"complete, {counted}"
        )
    return states


def limit_text(watts: object, reason: object) -> str:
    """A power limit for a table cell: "250 W", "250 W unprofiled", "250 W measure only", "-" when unknown."""
    if watts is None or (isinstance(watts, float) and pd.isna(watts)):
        return "-"
    note = limit_note(reason)
    return f"{float(watts):.0f} W" + (f" {note}" if note else "")


def is_simulated(*frames: pd.DataFrame) -> bool:
    """Whether any row came from a simulated GPU: then every figure says so."""
    return any("simulated" in f.columns and bool(f["simulated"].fillna(False).astype(bool).any()) for f in frames)


def per_recurrence(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per recurrence: what its finished trials spent, the policy's apart from the failures'.

    `energy_j`, `time_s` and `cost` are the policy's: the trials that ended as a batch size and a power limit
    made them end (reached, missed, stopped by the early stop, out of memory). Exploring a size that misses
    the target is part of what the recurrence cost (Zeus, NSDI'23), so a recurrence whose every attempt
    missed still counts, at its full cost: hiding it would flatter the policy. `failed_energy_j` and
    `failed_cost` (and `failed_time_s`, `failed_trials`: how many) are the trials that failed for reasons of
    their own (the script crashed, was interrupted, was lost: TrialStatus.FAILED says nothing about the batch
    size): no model and no measurement of the policy, so they are waste, reported apart and left out of the
    saving (zeus_kfp.report.savings). A row's spending, as people read it, is the two added up (`spent`).
    `outcome` is REACHED, MISSED, or FAILED when every trial failed.
    """
    done = finished_trials(trials)
    if done.empty:
        return pd.DataFrame(columns=RECURRENCE_COLUMNS)
    done = done.sort_values(["recurrence", "trial"]).copy()
    if "recurrence_id" not in done:
        done["recurrence_id"] = done["recurrence"].astype(str)
    done["reached"] = done["status"] == TrialStatus.REACHED.value
    failed = done["status"] == TrialStatus.FAILED.value
    for column in ("energy_j", "time_s", "cost"):
        done[f"policy_{column}"] = done[column].where(~failed, 0.0)
    done["failed_energy_j"] = done["energy_j"].where(failed, 0.0)
    done["failed_cost"] = done["cost"].where(failed, 0.0)
    done["failed_time_s"] = done["time_s"].where(failed, 0.0)
    done["failed"] = failed
    done["honest"] = ~failed
    grouped = done.groupby("recurrence", sort=True)
    reached, honest = grouped["reached"].any(), grouped["honest"].any()
    out = pd.DataFrame(
        {
            "recurrence_id": grouped["recurrence_id"].last(),
            "trials": grouped["trial"].size(),
            "reached": reached,
            "batch_sizes": grouped["batch_size"].agg(lambda s: " -> ".join(str(int(b)) for b in s)),
            "energy_j": grouped["policy_energy_j"].sum(),
            "time_s": grouped["policy_time_s"].sum(),
            "cost": grouped["policy_cost"].sum(),
            "outcome": [REACHED if r else MISSED if h else FAILED for r, h in zip(reached, honest, strict=True)],
            "failed_energy_j": grouped["failed_energy_j"].sum(),
            "failed_cost": grouped["failed_cost"].sum(),
            "failed_time_s": grouped["failed_time_s"].sum(),
            "failed_trials": grouped["failed"].sum().astype(int),
        }
    ).reset_index()
    return out[RECURRENCE_COLUMNS]


def spent(row: dict) -> tuple[float, float, float]:
    """(cost, energy_j, time_s) a per_recurrence row spent in all: its policy's trials and its failed ones, so a
    recurrence whose every trial failed reads what its trials read, never a cost beside 0 J in 0 s."""
    return (
        float(row["cost"]) + float(row["failed_cost"]),
        float(row["energy_j"]) + float(row["failed_energy_j"]),
        float(row["time_s"]) + float(row["failed_time_s"]),
    )


@dataclass(frozen=True)
class Baseline:
    """The default configuration's estimated cost of one recurrence, and how it was estimated; with the energy
    and time behind it (estimated the same way), so a saving can be said in joules and GPU-hours too (the
    fleet view, zeus_kfp.fleet), not only as a fraction of the cost. None where the cost is."""

    cost: float | None
    how: str
    energy_j: float | None = None
    time_s: float | None = None


def default_config_cost(trials: pd.DataFrame, profiles: pd.DataFrame, spec: JobSpec) -> Baseline:
    """What one recurrence costs at the default configuration: `default_batch_size` at the GPU's
    maximum power limit, with no bandit and no power tuning (the baseline Zeus reports). The one
    baseline: `run`, `show`, the report, its metrics and its plot all take it from here.

    A job whose trials all replayed one NSDI'23 trace (their source "simulated (trace: w/g)") has an
    exact one: the trace's expected cost of that configuration (zeus_kfp.simulate.engine.expected_figures,
    what the simulator's "default config" row is too). Any other job's is estimated from the store:
    the median cost of its trials that *reached* the target at the default batch size (the median
    resists one slow node). Those trials ran at the power limit the JIT profiler chose, which is
    cheaper than max power, so each is scaled by the ratio of cost rates (max limit over chosen limit)
    from that batch size's training profile when the profile covers both limits. Without a reached
    trial at the default batch size there is no baseline (None), and the report says so instead of guessing.
    """
    done = finished_trials(trials)
    if done.empty:
        return Baseline(None, "no finished trial yet")
    traced = _trace_baseline(done, spec)
    if traced is not None:
        return traced
    at_default = done[(done["batch_size"] == spec.default_batch_size) & (done["status"] == TrialStatus.REACHED.value)]
    if at_default.empty:
        return Baseline(None, f"no trial at the default batch size {spec.default_batch_size} has reached the target")
    median, adjusted = {}, 0
    for column in ("cost", "energy_j", "time_s"):  # each figure scaled by its own rate's ratio, then its median
        factors = _max_power_factors(at_default, profiles, spec, column)
        scaled = at_default[column].astype(float).to_numpy() * factors.fillna(1.0).to_numpy()
        median[column] = float(pd.Series(scaled).median())
        adjusted = int(factors.notna().sum()) if column == "cost" else adjusted
    how = f"median of {len(at_default)} reached trial(s) at batch size {spec.default_batch_size}" + (
        f", {adjusted} scaled to the max power limit by the power profile" if adjusted else ", at their power limit"
    )
    return Baseline(median["cost"], how, median["energy_j"], median["time_s"])


def _trace_baseline(done: pd.DataFrame, spec: JobSpec) -> Baseline | None:
    """The trace's expected cost of the default configuration, when every trial replayed that one trace."""
    sources = set(done["source"].astype(str)) if "source" in done.columns else set()
    if len(sources) != 1:
        return None
    (source,) = sources
    match = TRACE_SOURCE.fullmatch(source)
    if match is None:
        return None

    try:
        backend = TraceBackend.parse(f"trace:{match.group(1)}")
        default, _ = expected_figures(spec, backend.trace())  # type: ignore[union-attr]
    except ValueError:  # not a shipped trace, or no configuration of it reaches: estimate from the store
        return None
    how = f"expected from the trace {match.group(1)}: batch size {spec.default_batch_size} at the max power limit"
    return Baseline(default.cost, how, default.energy_j, default.time_s)


def _max_power_factors(trials: pd.DataFrame, profiles: pd.DataFrame, spec: JobSpec, figure: str = "cost") -> pd.Series:
    """Per trial (aligned with `trials`): `figure`'s rate (cost, energy_j or time_s per unit of work) at the max
    power limit over the rate at the trial's own limit, from that trial's training profile, else any training
    profile of its batch size; NaN where the profile does not cover both limits. Vectorized: histories get long."""
    nan = pd.Series(float("nan"), index=trials.index)
    if profiles.empty:
        return nan
    prof = profiles[profiles["phase"] == "train"]
    if prof.empty:
        return nan
    rates = prof.groupby(["batch_size", "trial", "power_limit_w"], as_index=False)[
        ["average_power_w", "throughput"]
    ].mean()
    pooled = prof.groupby(["batch_size", "power_limit_w"], as_index=False)[["average_power_w", "throughput"]].mean()
    for frame in (rates, pooled):
        good = frame["throughput"] > 0
        frame["rate"] = float("inf")
        throughput = frame.loc[good, "throughput"]
        energy, time = frame.loc[good, "average_power_w"] / throughput, 1.0 / throughput
        frame.loc[good, "rate"] = {"energy_j": energy, "time_s": time}.get(figure, spec.cost_model.cost(energy, time))
    own = _factor_table(rates, ["batch_size", "trial"])
    any_profile = _factor_table(pooled, ["batch_size"])
    keys = trials[["batch_size", "trial", "power_limit_w"]].astype(float).reset_index()
    own_f = keys.merge(own.astype(float), on=["batch_size", "trial", "power_limit_w"], how="left")["factor"]
    pool_f = keys.merge(any_profile.astype(float), on=["batch_size", "power_limit_w"], how="left")["factor"]
    # A trial with its own profile uses only that one; otherwise the batch size's pooled profile.
    has_own = keys.merge(own[["batch_size", "trial"]].drop_duplicates().astype(float), how="left", indicator=True)
    factor = own_f.where(has_own["_merge"] == "both", pool_f)
    factor = factor.where((factor > 0) & (factor < float("inf")))
    return pd.Series(factor.to_numpy(), index=trials.index)


def _factor_table(rates: pd.DataFrame, group: list[str]) -> pd.DataFrame:
    """Per group and power limit: rate at the group's highest limit / rate at this limit."""
    top = rates.loc[rates.groupby(group)["power_limit_w"].idxmax(), [*group, "rate"]].rename(columns={"rate": "top"})
    out = rates.merge(top, on=group)
    out["factor"] = out["top"] / out["rate"]
    return out[[*group, "power_limit_w", "factor"]]


def select_recurrence(trials: pd.DataFrame, recurrence_id: str | None) -> pd.DataFrame:
    """Trials of one recurrence: the one with that `recurrence_id`, or the latest when None.

    An unknown id raises ValueError listing the ids the store has, so a typo is obvious.
    """
    if trials.empty:
        raise ValueError("the job has no trials yet, so there is no recurrence to report")
    if recurrence_id is None:
        return trials[trials["recurrence"] == trials["recurrence"].max()]
    chosen = trials[trials["recurrence_id"].astype(str) == str(recurrence_id)]
    if chosen.empty:
        known = sorted(trials["recurrence_id"].astype(str).unique())
        raise ValueError(f"invalid recurrence_id={recurrence_id!r}: allowed one of {known}")
    return chosen
