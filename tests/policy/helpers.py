"""Small builders for policy tests: a job spec and history records."""

from __future__ import annotations

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.trials import Trial

SIZES = (8, 16, 32, 64, 128, 256)


def make_spec(**changes) -> JobSpec:
    base = {
        "job_id": "test-job",
        "batch_sizes": SIZES,
        "default_batch_size": 128,
        "target_metric": 0.5,
        "max_epochs": 10,
        "max_power_w": 100.0,
    }
    return JobSpec(**{**base, **changes})


def record(recurrence: int, trial: int, batch_size: int, status: str, cost: float | None = None) -> Trial:
    """A record whose energy/time agree with `cost` under make_spec() (eta 0.5, 100 W: cost = 0.5 e + 50 t)."""
    st = TrialStatus(status)
    if cost is None or not st.finished:
        return Trial(recurrence, trial, batch_size, st)
    return Trial(recurrence, trial, batch_size, st, cost, time_s=cost / 100.0, energy_j=cost)
