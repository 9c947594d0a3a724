"""Frames shaped like the store's tables, built by hand so the expected numbers are known."""

from __future__ import annotations

import pandas as pd

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.trials import Trial

SPEC = JobSpec(
    job_id="mnist-nightly",
    batch_sizes=(32, 64, 128, 256),
    default_batch_size=128,
    target_metric=0.9,
    max_epochs=10,
    eta_knob=0.5,
    max_power_w=300.0,
)


def trial_row(
    recurrence: int,
    trial: int,
    attempt: int,
    batch_size: int,
    status: str,
    *,
    energy_j: float,
    time_s: float,
    power_limit_w: float = 200.0,
    simulated: bool = True,
) -> dict:
    return {
        "recurrence": recurrence,
        "recurrence_id": f"run-{recurrence}",
        "trial": trial,
        "attempt": attempt,
        "batch_size": batch_size,
        "power_limit_w": power_limit_w,
        "status": status,
        "finished": status != "dispatched",
        "reached": status == "reached",
        "time_s": time_s,
        "energy_j": energy_j,
        "cost": SPEC.cost_model.cost(energy_j, time_s),
        "num_epochs": 3,
        "metric": 0.91 if status == "reached" else 0.5,
        "started_at": pd.Timestamp("2026-01-01"),
        "ended_at": pd.Timestamp("2026-01-01"),
        "kfp_run_id": f"kfp-{recurrence}",
        "simulated": simulated,
        "source": "simulated (GPU model)" if simulated else "measured (nvml)",
        "reason": "",
    }


def trials_frame(simulated: bool = True) -> pd.DataFrame:
    """Three recurrences: r1 explores 128 (reached) then nothing; r2 tries 64 (missed) then 256
    (reached); r3 tries 256 (reached); plus one trial still only dispatched in r3."""
    rows = [
        trial_row(1, 1, 1, 128, "reached", energy_j=20000.0, time_s=100.0, simulated=simulated),
        trial_row(2, 2, 1, 64, "not_reached", energy_j=5000.0, time_s=30.0, simulated=simulated),
        trial_row(2, 3, 2, 256, "reached", energy_j=12000.0, time_s=60.0, simulated=simulated),
        trial_row(3, 4, 1, 256, "reached", energy_j=11000.0, time_s=55.0, simulated=simulated),
        trial_row(3, 5, 2, 32, "dispatched", energy_j=0.0, time_s=0.0, simulated=simulated),
    ]
    frame = pd.DataFrame(rows)
    frame.loc[frame["status"] == "dispatched", ["cost", "energy_j", "time_s"]] = float("nan")
    return frame


def profiles_frame(simulated: bool = True) -> pd.DataFrame:
    """Train profiles at 300/250/200 W for the trials at 128 (trial 1) and 256 (trial 4)."""
    rows = []
    for trial, batch_size, scale in ((1, 128, 1.0), (4, 256, 1.6)):
        for limit, power, throughput in ((300.0, 280.0, 100.0), (250.0, 240.0, 95.0), (200.0, 195.0, 90.0)):
            rows.append(
                {
                    "job_id": SPEC.job_id,
                    "recurrence": 1,
                    "trial": trial,
                    "batch_size": batch_size,
                    "phase": "train",
                    "power_limit_w": limit,
                    "average_power_w": power,
                    "throughput": throughput * scale,
                    "simulated": simulated,
                }
            )
        rows.append(
            {
                "job_id": SPEC.job_id,
                "recurrence": 1,
                "trial": trial,
                "batch_size": batch_size,
                "phase": "eval",
                "power_limit_w": 200.0,
                "average_power_w": 150.0,
                "throughput": 300.0,
                "simulated": simulated,
            }
        )
    return pd.DataFrame(rows)


def history(simulated: bool = True) -> list[Trial]:
    """trials_frame as the store's history gives it to the policies (trial order; no figures while dispatched)."""

    def number(value: float) -> float | None:
        return None if pd.isna(value) else float(value)

    return [
        Trial(int(r.recurrence), int(r.trial), int(r.batch_size), TrialStatus(r.status), number(r.cost),
                    number(r.time_s), number(r.energy_j))
        for r in trials_frame(simulated).sort_values("trial").itertuples(index=False)
    ]  # fmt: skip


def bandit_frame() -> pd.DataFrame:
    """Shaped like zeus_kfp.report.arms.arm_frame's output, with round numbers the plots and tables show."""
    return pd.DataFrame(
        {
            "batch_size": [32, 64, 128, 256],
            "stage": ["exploration", "pruned", "exploitation", "exploitation"],
            "num_observations": [0, 1, 1, 2],
            "posterior_mean": [None, None, 25000.0, 20000.0],
            "posterior_precision": [None, None, 1e-6, 4e-6],
            "pruned": [False, True, False, False],
            "lowest_cost": [25000.0] * 4,
        }
    )
