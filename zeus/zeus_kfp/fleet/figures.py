"""The fleet view's figures: per job, what it ran, spent and saved in a window of time, and their total.

Why a module of its own: the platform team's question is across jobs, but each job's saving must be
the very number `zeus-kfp show` prints for it, or the two views would argue. So nothing here computes a saving:
each job's comes from zeus_kfp.report.savings (`savings_of`: the one baseline, failed runs apart as waste), and
this module only restricts it to the window's recurrences, converts it (GPU-hours, CO2) and adds jobs up. The
functions are pure (frames in, values out): zeus_kfp.fleet.read reads the store, the CLI, the KFP step and the
Prometheus exporter all take the same `Fleet`.

CO2 avoided is the energy saved times a grid's carbon intensity. The default, 480 gCO2/kWh, is the world's
electricity in 2023 as Ember's Global Electricity Review 2024 gives it; a cluster's own grid is better
(`--carbon-intensity`: electricityMaps or the utility's figure). It counts the GPUs' energy only, as every
figure of zeus-kfp does: no host, cooling or PUE.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import pandas as pd

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.report.numbers import FAILED, finished_trials, is_simulated
from zeus_kfp.report.savings import Savings, savings_of

DEFAULT_CARBON_INTENSITY = 480.0  # gCO2/kWh
CARBON_SOURCE = (
    "Ember, Global Electricity Review 2024: the world's electricity generation in 2023 "
    "(https://ember-climate.org/insights/research/global-electricity-review-2024/)"
)
J_PER_KWH = 3.6e6
EXPLORATION, EXPLOITATION, NOT_STARTED = "exploration", "exploitation", "not started"
TIMELINE_COLUMNS = ["job_id", "recurrence", "at", "energy_saved_j"]


@dataclass(frozen=True)
class JobFigures:
    """One job over the window. `saving` and the `*_saved` figures are None without a baseline (no trial at the
    default batch size has reached yet) or without a counted recurrence; `energy_used_j` is every finished
    trial's energy, the failed ones' included (`failed_energy_j` says how much of it was waste)."""

    job_id: str
    stage: str
    recurrences: int
    counted: int
    energy_used_j: float
    saving: float | None
    default_cost_j: float | None
    cost_saved_j: float | None
    energy_saved_j: float | None
    gpu_hours_saved: float | None
    co2_avoided_g: float | None
    failed_trials: int
    failed_recurrences: int
    failed_energy_j: float
    baseline: str
    simulated: bool = False  # its figures came from a simulated GPU (a trace, the GPU model): no GPU was measured
    met_at_once: bool = False  # every trial met the target at its first evaluation: no saving (report.savings)

    @property
    def exploring(self) -> bool:
        return self.stage == EXPLORATION


@dataclass(frozen=True)
class Fleet:
    """Every job of the view, what they add up to, and when each counted recurrence saved what (`timeline`)."""

    store: str
    jobs: list[JobFigures]
    timeline: pd.DataFrame
    since: datetime | None = None
    until: datetime | None = None
    carbon_intensity: float = DEFAULT_CARBON_INTENSITY
    namespace: str = ""

    def total(self) -> dict[str, Any]:
        """The total row: every figure summed over the jobs that have it; `saving` is the fleet's cumulative one
        (1 - what the counted recurrences cost / as many at each job's default configuration)."""
        out: dict[str, Any] = {"job_id": "total", "jobs": len(self.jobs)}
        out["exploring"] = sum(j.exploring for j in self.jobs)
        for name in ("recurrences", "counted", "energy_used_j", "failed_trials", "failed_recurrences",
                     "failed_energy_j"):  # fmt: skip
            out[name] = sum(getattr(j, name) for j in self.jobs)
        for name in ("default_cost_j", "cost_saved_j", "energy_saved_j", "gpu_hours_saved", "co2_avoided_g"):
            known = [getattr(j, name) for j in self.jobs if getattr(j, name) is not None]
            out[name] = sum(known) if known else None
        # per job, cost_saved / default_cost is `show`'s cumulative saving; summed first, it weighs each job by cost
        out["saving"] = out["cost_saved_j"] / out["default_cost_j"] if out["default_cost_j"] else None
        out["without_baseline"] = [j.job_id for j in self.jobs if j.saving is None and not j.met_at_once]
        out["met_at_once"] = [j.job_id for j in self.jobs if j.met_at_once]
        return out

    def to_dict(self) -> dict[str, Any]:
        """The fleet as one JSON-ready document (`zeus-kfp fleet --json`); energies in J, CO2 in g."""
        return {
            "store": self.store,
            "namespace": self.namespace,
            "since": None if self.since is None else self.since.isoformat(),
            "until": None if self.until is None else self.until.isoformat(),
            "carbon_intensity_g_per_kwh": self.carbon_intensity,
            "carbon_intensity_source": CARBON_SOURCE if self.carbon_intensity == DEFAULT_CARBON_INTENSITY else "given",
            "units": {"energy": "J", "cost": "J (Zeus's cost)", "co2": "g", "gpu_hours": "h"},
            "jobs": [asdict(j) for j in self.jobs],
            "total": self.total(),
        }


def job_stage(arms: pd.DataFrame) -> str:
    """The job's stage from the bandit's per-batch-size state (zeus_kfp.report.arm_frame): exploration while any
    batch size still is, then exploitation; "not started" before a finished trial (an empty state)."""
    if arms.empty:
        return NOT_STARTED
    stages = set(arms["stage"])
    for stage in (EXPLORATION, EXPLOITATION):
        if stage in stages:
            return stage
    return str(sorted(stages)[0])  # every size out of memory: the state says "oom"


def recurrence_ends(trials: pd.DataFrame) -> pd.Series:
    """Per recurrence, when its last finished trial ended (UTC): the time a window is applied to."""
    done = finished_trials(trials)
    if done.empty or "ended_at" not in done:
        return pd.Series(dtype="datetime64[ns, UTC]")
    return pd.to_datetime(done["ended_at"], utc=True).groupby(done["recurrence"]).max()


def windowed(saved: Savings, ends: pd.Series, since: datetime | None, until: datetime | None) -> Savings:
    """The same Savings (same baseline, same methods) over the recurrences that ended in [since, until)."""
    if since is None and until is None:
        return saved
    keep = pd.Series(True, index=ends.index)
    if since is not None:
        keep &= ends >= pd.Timestamp(since)
    if until is not None:
        keep &= ends < pd.Timestamp(until)
    rec = saved.recurrences
    return Savings(saved.spec, saved.baseline, rec[rec["recurrence"].isin(ends.index[keep])], saved.met_at_once)


def job_figures(
    spec: JobSpec,
    trials: pd.DataFrame,
    profiles: pd.DataFrame,
    arms: pd.DataFrame,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    carbon_intensity: float = DEFAULT_CARBON_INTENSITY,
) -> tuple[JobFigures, pd.DataFrame]:
    """The job's figures over the window, and its timeline rows (TIMELINE_COLUMNS: per counted recurrence, when
    it ended and the energy it saved). The baseline is the whole history's, as `show` has it: a window chooses
    which recurrences count, not what the default configuration costs."""
    empty = pd.DataFrame(columns=TIMELINE_COLUMNS)
    if finished_trials(trials).empty:
        figures = JobFigures(spec.job_id, job_stage(arms), 0, 0, 0.0, None, None, None, None, None, None, 0, 0, 0.0,
                             "no finished trial yet")  # fmt: skip
        return figures, empty
    ends = recurrence_ends(trials)
    saved = windowed(savings_of(trials, profiles, spec), ends, since, until)
    rec = saved.recurrences
    in_window = trials[trials["recurrence"].isin(rec["recurrence"])]
    totals = saved.saved()
    energy_saved = None if totals is None else totals.energy_j
    figures = JobFigures(
        job_id=spec.job_id,
        stage=job_stage(arms),
        recurrences=len(rec),
        counted=len(saved.counted),
        energy_used_j=float(rec["energy_j"].sum() + rec["failed_energy_j"].sum()),
        saving=saved.cumulative,
        default_cost_j=None if totals is None else len(saved.counted) * float(saved.baseline.cost or 0.0),
        cost_saved_j=None if totals is None else totals.cost,
        energy_saved_j=energy_saved,
        gpu_hours_saved=None if totals is None else totals.time_s * spec.num_gpus / 3600.0,
        co2_avoided_g=None if energy_saved is None else energy_saved / J_PER_KWH * carbon_intensity,
        failed_trials=int((in_window["status"] == TrialStatus.FAILED.value).sum()),
        failed_recurrences=int((rec["outcome"] == FAILED).sum()),
        failed_energy_j=float(rec["failed_energy_j"].sum()),
        baseline=saved.met_at_once_line() or saved.baseline.how,
        simulated=is_simulated(in_window),
        met_at_once=bool(saved.met_at_once),
    )
    if totals is None or saved.baseline.energy_j is None:
        return figures, empty
    counted = saved.counted
    timeline = pd.DataFrame(
        {
            "job_id": spec.job_id,
            "recurrence": counted["recurrence"].astype(int).to_numpy(),
            "at": ends.reindex(counted["recurrence"]).to_numpy(),
            "energy_saved_j": (saved.baseline.energy_j - counted["energy_j"].astype(float)).to_numpy(),
        }
    )
    return figures, timeline
