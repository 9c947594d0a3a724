"""Put the hand-built frames of ux/frames.py into a real store through its public API, so the
CLI and recurrence_report are tested on what the store really returns."""

from __future__ import annotations

from ux.frames import SPEC, profiles_frame, trials_frame
from zeus_kfp.job import JobSpec, TrialResult
from zeus_kfp.policy.base import Decision
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.store import Store


def populate(store: Store, simulated: bool = True, spec: JobSpec = SPEC) -> None:
    """The three recurrences of ux.frames.trials_frame and their profiles (under `spec`'s job id: the
    frames' numbers hold for any spec with SPEC's cost function). The bandit's state is not stored: the
    views compute it from these trials (zeus_kfp.report.arms)."""
    store.ensure_job(spec, owner="alice")
    trials, profiles = trials_frame(simulated), profiles_frame(simulated)
    for row in trials.itertuples(index=False):
        store.begin_recurrence(spec.job_id, row.recurrence_id)
        decision = Decision(int(row.batch_size), None, "exploration", "test")
        store.dispatch_trial(spec.job_id, row.recurrence_id, int(row.attempt), decision, kfp_run_id=row.kfp_run_id)
        if row.status == "dispatched":
            continue
        result = TrialResult.build(
            spec, batch_size=int(row.batch_size), status=row.status, time_s=row.time_s, energy_j=row.energy_j,
            num_epochs=int(row.num_epochs), power_limit_w=row.power_limit_w, metric=row.metric, simulated=simulated,
        )  # fmt: skip
        store.finish_trial(spec.job_id, row.recurrence_id, int(row.attempt), result)
        profile = profiles[profiles["trial"] == row.trial]
        if not profile.empty:
            columns = ["phase", "power_limit_w", "average_power_w", "throughput", "simulated"]
            store.write_profile(spec.job_id, row.recurrence_id, int(row.attempt), PowerProfile(profile[columns]))
