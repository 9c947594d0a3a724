"""The train step's side of the mid-trial early stop: while the trial runs, a thread follows the job's log
and keeps the trial's live threshold (zeus_kfp.train.live_threshold) at the job's early stop as the store
holds it (the policy's own rule, `Policy.stop_threshold`, on what the job's drift reaction leaves of the
history: the rule the trial was dispatched under), which the script reads at every epoch end. It writes
through a sink (zeus_kfp.launch.threshold_sink): the file in the trial's work directory for a script on this
machine, the trial's ConfigMap, which the kubelet projects into every pod, for a cluster trial.

Why this seam (docs/DESIGN.md, "The live threshold"): Zeus's batch-size server checks every epoch's cost
against `beta_knob * min_cost` as it is at that moment, so a trial stops on a result another recurrence
produced after it started. Here the script is another process that must not read the store (zeus/zeus_kfp/train
imports no store), and the step is what already sits between the two. Each read is one incremental read
of the log: the Store keeps the decided prefix it has read (decided slots never change), so a poll lists
and fetches only the slots written since, and the threshold is a few vector sums over the history.

Never a reason to stop: the thread opens the store itself, every failure (no store, no credentials, a
slow or erring server, a spec it cannot read, a Kubernetes API error) is logged once and retried at the next
poll, a sink with nowhere to write (a cluster that refused the ConfigMap) ends the thread, the threshold is
only written when what the trial stops at changes, and the script treats a missing file as "nothing newer".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from zeus_kfp.job import JobSpec, live_threshold
from zeus_kfp.launch.threshold_sink import FileSink, SinkNotReady, SinkUnavailable, ThresholdSink
from zeus_kfp.policy import get_policy
from zeus_kfp.policy.drift import early_stop_after_drift
from zeus_kfp.steps.params import open_step_store

log = logging.getLogger(__name__)

DEFAULT_POLL_S = 2.0  # between reads of the log: an epoch is minutes, a read a LIST and a few GETs


class ThresholdFeed:
    """A context manager: while it is open, `sink` (a ThresholdSink, or the path of a file) holds the job's early
    stop under `policy`, read from the store at `store_uri` every `poll_s` seconds, once that is below the
    trial's `dispatched` threshold (nothing at all for a job without early stop)."""

    def __init__(
        self,
        store_uri: str,
        spec: JobSpec,
        dispatched: float | None,
        sink: ThresholdSink | str | Path,
        *,
        policy: str = "default",
        poll_s: float = DEFAULT_POLL_S,
        open_store: Callable[[str], Any] = open_step_store,
    ) -> None:
        self.store_uri, self.spec, self.poll_s = store_uri, spec, poll_s
        self.sink = FileSink(Path(sink)) if isinstance(sink, (str, Path)) else sink
        self.policy = get_policy(policy)
        self._open = open_store
        self.dispatched = dispatched
        self.threshold: float | None = None  # the last one written
        self.problem = ""  # the last failure, once logged
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ThresholdFeed:
        if self.spec.beta_knob is not None:
            self._thread = threading.Thread(target=self._follow, name="zeus-live-threshold", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.poll_s + 1.0)  # a read stuck in the store is left to die with the step

    def _follow(self) -> None:
        store = None
        while not self._stop.is_set():
            try:
                store = store or self._open(self.store_uri)
                self.update(store)
            except SinkUnavailable:  # nowhere to write, said once by the sink: the trial keeps what it has
                return
            except SinkNotReady:  # nothing to write into yet: the next poll tries again
                pass
            except Exception as exc:  # nothing the store or the sink does may reach the trial
                if str(exc) != self.problem:
                    self.problem = str(exc)
                    log.warning("live threshold: no update (%s); the trial keeps its threshold", exc)
            self._stop.wait(self.poll_s)

    def update(self, store: Any) -> float | None:
        """One read of the job's log; writes to the sink when what the trial stops at changed (the lower of the
        dispatched threshold and the job's early stop now, which may also rise: a cut run raises a mean).
        Returns the job's early stop now."""
        trials = store.read_trials(self.spec.job_id)  # one read of the log: history and drifts
        threshold = early_stop_after_drift(self.policy, self.spec, trials.history, drifts=trials.drifts)
        holds = live_threshold(self.dispatched, self.threshold)  # what the trial stops at now
        if threshold is not None and live_threshold(self.dispatched, threshold) != holds:
            self.sink.write(threshold)
            self.threshold = threshold
            print(f"train: the job's early stop is now {threshold:.1f} (beta x the policy's basis, "
                  f"{threshold / self.spec.beta_knob:.1f}) from the next epoch end", flush=True)  # fmt: skip
        return threshold
