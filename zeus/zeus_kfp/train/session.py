"""One Zeus-aware trial inside the training process: epochs, profiler, cost check, result.

Why a session object separate from the DataLoader: the train and eval loaders must share one
profiler, one energy monitor and one epoch count; holding that here keeps the loader a thin
iterator wrapper and lets tests drive a trial without torch.

Lifecycle: `start()` opens the trial's energy window and installs the safety nets (SIGTERM and
atexit restore the power limits from before the trial and record it); `epochs()` yields epoch numbers
until the target is reached, max_epochs pass, or the predicted cost of one more epoch would
pass the threshold; `finish()` writes result.json (with the profiler's summary: void windows,
profiling time) and profile.parquet into the log dir.

Under torchrun (WORLD_SIZE > 1) the same object runs on every rank through zeus_kfp.train.distributed:
readings are summed over all ranks' GPUs, rank 0's limit and metric are followed by all, and only
rank 0 writes the result, the profile and the model; every rank leaves its own rank record.
"""

from __future__ import annotations

import atexit
import logging
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

from zeus_kfp.job import TrialResult, TrialStatus
from zeus_kfp.power.devices import open_gpu
from zeus_kfp.power.gpu import GPU, gpu_source, measure_only_note, rest_limits
from zeus_kfp.power.monitor import EnergyMonitor
from zeus_kfp.power.profile_params import ProfileParams
from zeus_kfp.power.profiler import PowerLimitProfiler
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.train.artifacts import MODEL_FILE, write_profile, write_result
from zeus_kfp.train.distributed import Ranks, ranks_from_env
from zeus_kfp.train.env import TrialEnv, TrialEnvError

log = logging.getLogger(__name__)

TRIAL_WINDOW = "trial"
EPOCH_WINDOW = "epoch"


class ZeusTrial:
    """State shared by a trial's train and eval loaders."""

    def __init__(
        self, env: TrialEnv, gpu: GPU | None = None, num_train_samples: int | None = None, ranks: Ranks | None = None
    ) -> None:
        self.env = env
        env.check()
        self.ranks = ranks or ranks_from_env()
        self.local_batch_size = _local_batch_size(env, self.ranks.info.world_size)
        self.gpu = self.ranks.rank_gpu(gpu or open_gpu(env.gpu))
        local = EnergyMonitor(self.gpu, indices=range(min(env.num_gpus, self.gpu.device_count())))
        self.monitor = self.ranks.monitor(local)  # under torchrun: readings summed over every rank
        self.num_train_samples = num_train_samples
        self.steps_per_epoch: int | None = None
        self.eval_samples = 0
        self.metrics: list[float] = []
        self.epoch_costs: list[float] = []
        self.profiler: PowerLimitProfiler | None = None
        self.result: TrialResult | None = None
        self.stop_reason = ""
        self._started = False
        self._lock = threading.RLock()  # a SIGTERM may arrive while finish() runs on the same thread
        self._finishing = False
        self._prev_sigterm: object = None
        self._trained_at_w: float | None = None

    # -- setup ---------------------------------------------------------------------------------
    def _make_profiler(self) -> PowerLimitProfiler | None:
        if not self.env.use_optimal_limit:
            return None
        reuse = None
        if self.env.profile_path and Path(self.env.profile_path).exists():
            reuse = PowerProfile.read_parquet(self.env.profile_path)
            log.info("the stored power profile at %s: final if complete, else continued", self.env.profile_path)
        params = ProfileParams(self.env.warmup_iters, self.env.profile_iters, min_window_s=self.env.min_window_s).fit(
            self.steps_per_epoch
        )
        return PowerLimitProfiler(
            self.gpu,
            cost_rate=self.env.cost_model.rate,
            params=params,
            monitor=self.monitor,
            reuse=reuse,
            agree=self.ranks.leader_float,  # under torchrun: rank 0's choice, broadcast
        )

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        rest_limits(self.gpu)  # a trial killed mid-profile before this one may have left the GPU throttled
        self.profiler = self._make_profiler()
        self.monitor.begin_window(TRIAL_WINDOW)
        self.ranks.install()
        atexit.register(self._on_exit)
        if threading.current_thread() is threading.main_thread():
            self._prev_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum: int, _frame: object) -> None:
        if self._finishing:  # the trial is being recorded right now (a failure elsewhere): let that complete
            return
        self.finish(TrialStatus.FAILED, f"terminated by signal {signum}", signum=signum)
        raise SystemExit(128 + signum)

    def _on_exit(self) -> None:
        if self.result is None:
            self.finish(TrialStatus.FAILED, "the script exited before the trial ended (see its stderr)")

    # -- epochs --------------------------------------------------------------------------------
    def epochs(self) -> Iterator[int]:
        """Epoch numbers until the trial ends. Leaving the loop early (an exception, a break) closes
        this generator, which records the trial as failed and restores the power limits."""
        self.start()
        try:
            for epoch in range(self.env.max_epochs):
                if epoch > 0 and self._would_exceed():
                    self.finish(TrialStatus.COST_EXCEEDED, self.stop_reason)
                    return
                self.monitor.begin_window(EPOCH_WINDOW)
                yield epoch
                measured = self.monitor.end_window(EPOCH_WINDOW)
                self.metrics = self.ranks.leader_list(self.metrics)  # rank 0's metric decides for every rank
                self.epoch_costs.append(self.env.cost_model.cost(measured.total_energy_j, measured.time_s))
                if self.metrics and self.env.reached(self.metrics[-1]):
                    self.finish(TrialStatus.REACHED)
                    return
            self.finish(TrialStatus.NOT_REACHED, f"target not reached in {self.env.max_epochs} epochs")
        finally:
            if self.result is None:
                self.finish(TrialStatus.FAILED, "the training loop ended early (an exception or a break)")

    def report_metric(self, value: float) -> None:
        """The script's validation metric after an epoch (in the job's direction)."""
        self.metrics.append(float(value))
        log.info("epoch %d: %s=%g", len(self.metrics), self.env.metric_name, value)

    def predicted_epoch_cost(self) -> float:
        """One more epoch's cost: from the profile at the chosen limit when profiling is done, else the last epoch."""
        p = self.profiler
        if p is not None and p.done and self.num_train_samples:
            prof = p.profile().rows
            at = prof[prof["power_limit_w"] == p.chosen_limit]
            train, evals = at[at["phase"] == "train"], at[at["phase"] == "eval"]
            if not train.empty:
                t = self.num_train_samples / train["throughput"].iloc[0]
                energy = train["average_power_w"].iloc[0] * t
                if not evals.empty and self.eval_samples:
                    te = self.eval_samples / evals["throughput"].iloc[0]
                    t, energy = t + te, energy + evals["average_power_w"].iloc[0] * te
                return self.env.cost_model.cost(energy, t)
        return self.epoch_costs[-1] if self.epoch_costs else 0.0

    def _would_exceed(self) -> bool:
        """Whether one more epoch would pass the threshold as it is now: the dispatched one, or lower where a
        concurrent recurrence has since reached cheaper (the live file, read here at every epoch end; rank 0's
        reading decides for every rank: on a cluster each node's kubelet updates its copy at its own time)."""
        threshold = self.env.current_threshold()
        if self.env.threshold_file is not None:  # each rank read the file: rank 0's reading holds for all
            threshold = self.ranks.leader_float(threshold or 0.0) or None
        if threshold is None:
            return False
        so_far = self.monitor.peek(TRIAL_WINDOW)
        cost = self.env.cost_model.cost(so_far.total_energy_j, so_far.time_s)
        predicted = cost + self.predicted_epoch_cost()
        if predicted > threshold:
            live = "" if threshold == self.env.cost_threshold else " (the job's early stop, moved since dispatch)"
            self.stop_reason = (
                f"stopped before epoch {len(self.epoch_costs) + 1}: predicted cost {predicted:.1f} "
                f"would pass the threshold {threshold:.1f}{live}"
            )
            return True
        return False

    # -- end -----------------------------------------------------------------------------------
    def finish(self, status: TrialStatus, reason: str = "", signum: int | None = None) -> TrialResult | None:
        """Restore the power limits from before the trial, then record it. Only the first call counts."""
        with self._lock:
            if self.result is not None or self._finishing:
                return self.result
            self._finishing = True
            if status is TrialStatus.FAILED:
                self.ranks.abandon()  # the other ranks may be gone: figures from this rank alone from now on
            self._trained_at_w = self.gpu.get_power_limit(0)  # the limit the last step ran at, before restoring
            if self.profiler is not None:
                self.profiler.restore()
            measured = self.monitor.end_window(TRIAL_WINDOW) if self.monitor.is_open(TRIAL_WINDOW) else None
            notes = [reason] if reason else []
            if not self.gpu.can_set_limits:
                notes.append(measure_only_note(self.gpu))
            limit = self.profiler.best_limit() if self.profiler is not None else None
            if self.profiler is not None:
                notes += [note for note in (self.profiler.reuse_note(), self.profiler.partial_note()) if note]
            self.result = TrialResult.build(
                self.env,
                batch_size=self.env.batch_size,
                status=status,
                time_s=measured.time_s if measured else 0.0,
                energy_j=measured.total_energy_j if measured else 0.0,
                num_epochs=len(self.metrics),
                power_limit_w=limit if limit is not None else self.gpu.get_power_limit(0),
                metric=self.metrics[-1] if self.metrics else None,
                simulated=self.gpu.simulated,
                reason="; ".join(notes),
                source=gpu_source(self.gpu),
            )
            profiling = self.profiler.summary() if self.profiler is not None else None
            if self.ranks.is_leader:
                write_result(
                    self.env.log_dir, self.result, metrics=self.metrics, gpu_kind=self.gpu.kind, profiling=profiling
                )
                if self.profiler is not None:
                    write_profile(self.env.log_dir, self.profiler.profile())
            self._record_rank(signum)
            log.info("trial finished: %s", self.result)
            if self._prev_sigterm is not None and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, self._prev_sigterm)  # the trial is recorded: hand SIGTERM back
            return self.result

    def _record_rank(self, signum: int | None) -> None:
        """This rank's own figures and how it ended (zeus_kfp.train.distributed; nothing in a single process)."""
        result, own = self.result, self.ranks.own.get(TRIAL_WINDOW)
        assert result is not None
        self.ranks.record(
            self.env.log_dir,
            status=result.status.value,
            reason=result.reason,
            signal=signum,
            energy_j=own.total_energy_j if own else 0.0,
            time_s=own.time_s if own else 0.0,
            batch_size=self.env.batch_size,
            local_batch_size=self.local_batch_size,
            power_limit_w=result.power_limit_w,
            trained_at_w=self._trained_at_w,
            epochs=result.num_epochs,
            metric=result.metric,
            simulated=result.simulated,
            source=result.source,
        )

    def save_model(self, model: object) -> Path:
        """torch.save the model's state_dict as model.pt in the log dir (rank 0 only); returns the path."""
        import torch

        path = Path(self.env.log_dir) / MODEL_FILE
        if not self.ranks.is_leader:
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        state = model.state_dict() if hasattr(model, "state_dict") else model
        torch.save(state, path)
        return path


def _local_batch_size(env: TrialEnv, world_size: int) -> int:
    """Each rank's share of the trial's (global) batch size; the world must divide it evenly, and the job's
    cost must price every rank's GPU."""
    if world_size == 1:
        return env.batch_size
    if env.batch_size % world_size:
        raise TrialEnvError("ZEUS_BATCH_SIZE", env.batch_size, f"a multiple of the world size {world_size}")
    if env.num_gpus != world_size:
        raise TrialEnvError("ZEUS_NUM_GPUS", env.num_gpus, f"the world size {world_size} (one GPU per rank)")
    return env.batch_size // world_size
