"""Trace-driven simulation of a recurring job under a batch-size policy: how the pipeline would fare.

The simulator is the pipeline with the cluster taken out, not a model of it. Each attempt asks the
policy (the same `decide`, with the seed zeus_kfp.seeds derives for that recurrence and attempt, as the
bandit step does), decides profile reuse with the same rule (zeus_kfp.power.reuse), and runs the same
trace-backed trial (zeus_kfp.simulate.trace_trial) the train step runs for a "trace:<workload>/<gpu>" job. So
`zeus-kfp simulate` and `zeus-kfp run` on a trace backend give the same trials, and the policy is
evaluated on the pipeline users run (tests/simulate/test_equivalence.py checks it through kfp.local).

A recurrence ends at its first reached trial, or after `spec.max_attempts` attempts (Zeus: 20).

Overlapping recurrences (`in_flight` K > 1): K recurrences run at once, as a schedule does when a
recurrence outlasts its period. Time is the trials' own (simulated) seconds. A decision sees the
trials of other recurrences that are dispatched but unfinished, as the store's in-flight view shows
them, and a trial reuses only profiles of trials that have finished. K = 1 is the sequential case.

Mid-trial early stop (`live_stop`, on by default, as the pipeline's train step does it): a running trial
reads the early-stop threshold again at every epoch end: the policy's own rule (`Policy.stop_threshold`,
under the job's drift reaction) over the trials finished by that simulated moment, never above the
threshold it was dispatched with, as Zeus's batch-size server checks `beta_knob * min_cost` at each
report. The simulator knows the future of no trial, so a trial's outcome is worked out at dispatch from
the thresholds known then and worked out again whenever the policy's threshold moves (a trial finished,
or a drift opened a recurrence): only its epoch ends from that moment on can change. Finishing at the
same moment counts as finished by then. At K = 1 nothing runs while a trial finishes, so the trials are
those of the dispatched threshold.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from dataclasses import dataclass, field, replace

import numpy as np

from zeus_kfp.cost import Figures
from zeus_kfp.job import JobSpec, TrialOutcome, TrialStatus, live_threshold
from zeus_kfp.policy.base import Decision, Policy
from zeus_kfp.policy.drift import decide_after_drift, early_stop_after_drift
from zeus_kfp.power.reuse import ProfileBook
from zeus_kfp.seeds import decision_seed, trial_seed
from zeus_kfp.simulate.trace import WorkloadTrace
from zeus_kfp.simulate.trace_trial import run_trace_trial
from zeus_kfp.summaries import RecurrenceSummary
from zeus_kfp.trials import Trial


@dataclass(frozen=True)
class SimulationResult:
    """A simulated job under one policy and seed, with its reference figures."""

    policy: str
    seed: int
    num_recurrences: int
    in_flight: int
    totals: Figures  # the policy, cumulative over every trial
    default: Figures  # b0 at the largest power limit, expected, x num_recurrences
    oracle: Figures  # cheapest expected always-reaching config, x num_recurrences
    rows: list[RecurrenceSummary]
    trials: list[Trial]
    history: list[Trial]

    @property
    def cost_over_oracle(self) -> float:
        return self.totals.cost / self.oracle.cost

    def regret(self) -> float:
        """Cumulative cost minus the oracle's, in oracle recurrences."""
        return (self.totals.cost - self.oracle.cost) / (self.oracle.cost / self.num_recurrences)

    def worst_excess_over_default(self) -> float:
        """The worst point of the cumulative cost above the default configuration's, in default-configuration
        recurrences: the largest (cost of recurrences 1..n - n x the default's) / the default's, over n.

        Why: exploring pays for itself only later; this is how far behind simply running the default
        configuration (b0 at the largest power limit) a job gets before it does. Recurrences are taken
        in their order, which is the order they ran in when one runs at a time (K = 1)."""
        per = self.default.cost / self.num_recurrences
        cumulative = np.cumsum([row.cost for row in self.rows])
        return float(np.max((cumulative - per * np.arange(1, len(cumulative) + 1)) / per))

    def to_dict(self) -> dict:
        return {
            "seed": self.seed,
            "num_recurrences": self.num_recurrences,
            "in_flight": self.in_flight,
            "policy": self.totals.to_dict(),
            "default": self.default.to_dict(),
            "oracle": self.oracle.to_dict(),
            "cost_over_oracle": self.cost_over_oracle,
            "recurrences": [r.to_dict() for r in self.rows],
        }


def reaching_figures(spec: JobSpec, trace: WorkloadTrace) -> dict[int, Figures]:
    """Per batch size whose every run of the trace reaches the target within max_epochs: the expected
    figures of one run at its cheapest power limit (the oracle picks the cheapest of these)."""
    out = {}
    for b in spec.batch_sizes:
        size = trace.sizes[b]
        epochs = size.target_epochs
        if np.isnan(epochs).any() or (epochs > spec.max_epochs).any():
            continue
        mean_epochs = float(epochs.mean())
        energy, time = mean_epochs * size.energy_per_epoch, mean_epochs * size.time_per_epoch
        costs = spec.cost_model.cost(energy, time)
        k = int(np.argmin(costs))
        out[b] = Figures(float(costs[k]), float(energy[k]), float(time[k]))
    return out


def oracle_batch_size(spec: JobSpec, trace: WorkloadTrace) -> int:
    """The oracle's batch size: the cheapest in expectation among those that always reach (ties: the smaller)."""
    figures = reaching_figures(spec, trace)
    if not figures:
        raise ValueError(f"no batch size of job {spec.job_id} reaches the target in every run of the trace")
    return min(figures, key=lambda b: figures[b].cost)


def expected_figures(spec: JobSpec, trace: WorkloadTrace) -> tuple[Figures, Figures]:
    """Per-recurrence expected figures of (default config, oracle), over the trace's runs.

    Default config: b0 at the largest power limit. Oracle: the cheapest (batch size, power
    limit) among sizes whose every run reaches the target within max_epochs.
    """
    best = reaching_figures(spec, trace)[oracle_batch_size(spec, trace)]
    b0 = trace.sizes[spec.default_batch_size]
    reached = b0.target_epochs[~np.isnan(b0.target_epochs)]
    mean_epochs = float(reached.mean()) if reached.size else float(spec.max_epochs)
    energy, time = mean_epochs * b0.energy_per_epoch[-1], mean_epochs * b0.time_per_epoch[-1]
    return Figures(spec.cost_model.cost(energy, time), float(energy), float(time)), best


@dataclass
class _Recurrence:
    number: int
    attempt: int = 0
    trials: list[Trial] = field(default_factory=list)

    @property
    def recurrence_id(self) -> str:
        return f"simulated-{self.number}"


class Simulator:
    """Replays one workload trace for one job spec; `run` simulates a policy over recurrences."""

    def __init__(self, spec: JobSpec, trace: WorkloadTrace, source: str = "simulated (trace)") -> None:
        missing = sorted(set(spec.batch_sizes) - set(trace.sizes))
        if missing:
            raise ValueError(
                f"invalid batch_sizes: {missing} not in the trace; allowed a subset of {list(trace.batch_sizes)}"
            )
        self.spec = spec
        self.trace = trace
        self.source = source
        self.default, self.oracle = expected_figures(spec, trace)

    def default_num_recurrences(self) -> int:
        """Zeus's choice: 2 x |batch sizes| x |power limits|."""
        return 2 * len(self.spec.batch_sizes) * len(self.trace.power_limits)

    def trace_for(self, recurrence: int) -> WorkloadTrace:
        """The trace recurrence `recurrence` trains on: one for the whole job (zeus_kfp.simulate.shifted_job shifts
        it)."""
        return self.trace

    def run(
        self,
        policy: Policy,
        seed: int,
        num_recurrences: int | None = None,
        in_flight: int = 1,
        drifts: tuple[int, ...] = (),
        *,
        live_stop: bool = True,
    ) -> SimulationResult:
        """Simulate `num_recurrences` recurrences (default: Zeus's 2 x |sizes| x |limits|) of the job with
        seed `seed`, `in_flight` of them at a time; `drifts`: the recurrences a drift opened, which the
        policy is told of as the bandit step tells it (zeus_kfp.policy.drift, under spec.drift_reaction);
        `live_stop` False: each trial keeps the threshold it was dispatched with (the mid-trial stop off,
        for comparison)."""
        n = self.default_num_recurrences() if num_recurrences is None else num_recurrences
        if not (isinstance(n, int) and n > 0):
            raise ValueError(f"invalid num_recurrences={n!r}: allowed a positive integer")
        if not (isinstance(in_flight, int) and in_flight > 0):
            raise ValueError(f"invalid in_flight={in_flight!r}: allowed a positive integer")
        return _Run(self, policy, self.spec.with_changes(seed=seed), n, in_flight, drifts, live_stop).simulate()


@dataclass
class _Running:
    """A dispatched trial: what its outcome is worked out from, and the outcome as known so far."""

    rec: _Recurrence
    decision: Decision
    start: float
    seed: int
    reuse: object  # the PowerProfile it trains at, or None
    run: TrialOutcome | None = None

    @property
    def finish(self) -> float:
        assert self.run is not None
        return self.start + self.run.result.time_s


class _Run:
    """One simulation: an event loop over trial completions (a heap of finish times; an entry whose trial
    has since been worked out to finish sooner is stale and skipped)."""

    def __init__(
        self,
        sim: Simulator,
        policy: Policy,
        spec: JobSpec,
        n: int,
        in_flight: int,
        drifts: tuple[int, ...] = (),
        live: bool = True,
    ) -> None:
        self.sim, self.policy, self.spec, self.n, self.in_flight = sim, policy, spec, n, in_flight
        self.drifts, self.live = tuple(drifts), live
        self.history: list[Trial] = []  # index = trial number - 1; dispatched until finished
        self.book = ProfileBook()
        self.pending: list[tuple[float, int]] = []  # (finish time, trial)
        self.running: dict[int, _Running] = {}
        self.lows: list[tuple[float, float | None]] = []  # (time, the policy's early stop from then on)
        self.done: list[_Recurrence] = []
        self.started = 0
        self.now = 0.0

    def simulate(self) -> SimulationResult:
        while self.started < min(self.in_flight, self.n):
            self._start_recurrence()
        while self.pending:
            self._step()
        return self._result()

    def _step(self) -> None:
        """The next event: the trial that finishes first (`pending[0]`, at its finish time) finishes, unless
        that entry is stale (its trial was since worked out to stop sooner)."""
        finish, trial = heapq.heappop(self.pending)
        running = self.running.get(trial)
        if running is None or running.finish != finish:
            return  # stale: stopped sooner by a later low
        self.now = finish
        del self.running[trial]
        assert running.run is not None
        self._finish(trial, running.rec, running.decision, running.run)

    def _start_recurrence(self) -> None:
        self.started += 1
        if self.live and self.started in self.drifts:  # its drift reaction may move the early stop
            self._threshold_moved()
        self._dispatch(_Recurrence(self.started))

    def _dispatch(self, rec: _Recurrence) -> None:
        spec = self.spec
        rec.attempt += 1
        seed = decision_seed(spec.seed, rec.number, rec.attempt)
        decision = decide_after_drift(self.policy, spec, self.history, seed, drifts=self.drifts, recurrence=rec.number)
        b = decision.batch_size
        trial = len(self.history) + 1
        self.history.append(Trial(rec.number, trial, b, TrialStatus.DISPATCHED))
        reuse = self.book.to_reuse(b, rec.number, reprofile_after=spec.reprofile_after)
        running = _Running(rec, decision, self.now, trial_seed(spec.seed, rec.number, rec.attempt), reuse)
        self.running[trial] = running
        self._work_out(running)
        heapq.heappush(self.pending, (running.finish, trial))

    def _work_out(self, running: _Running) -> None:
        """The trial's outcome under the thresholds known now (`lows`)."""
        decision = running.decision

        def threshold_at(elapsed: float) -> float | None:
            at = bisect_right(self.lows, running.start + elapsed, key=lambda low: low[0])
            return live_threshold(decision.cost_threshold, self.lows[at - 1][1] if at else None)

        running.run = run_trace_trial(
            self.spec,
            self.sim.trace_for(running.rec.number).sizes[decision.batch_size],
            cost_threshold=decision.cost_threshold,
            seed=running.seed,
            reuse=running.reuse,  # type: ignore[arg-type]
            source=self.sim.source,
            threshold_at=threshold_at if self.live else None,
        )

    def _threshold_moved(self) -> None:
        """After a trial finished or a recurrence began (a drift may have opened it): when the policy's early
        stop moved, every running trial reads the new one from this moment on (its later epoch ends), below
        the threshold it was dispatched with (zeus_kfp.job.live_threshold). A rise can let a running trial go on
        that a lower one would have stopped later, so it is worked out again either way."""
        threshold = early_stop_after_drift(
            self.policy, self.spec, self.history, drifts=self.drifts, recurrence=self.started
        )
        if (self.lows and threshold == self.lows[-1][1]) or (not self.lows and threshold is None):
            return
        self.lows.append((self.now, threshold))
        for trial, running in self.running.items():
            before = running.finish
            self._work_out(running)
            if running.finish != before:
                heapq.heappush(self.pending, (running.finish, trial))

    def _finish(self, trial: int, rec: _Recurrence, decision: Decision, run: TrialOutcome) -> None:
        r = run.result
        self.history[trial - 1] = Trial(rec.number, trial, r.batch_size, r.status, r.cost, r.time_s, r.energy_j)
        if self.live:
            self._threshold_moved()
        if run.profile is not None:
            self.book.record(replace(run.profile, batch_size=r.batch_size, recurrence=rec.number, trial=trial))
        rec.trials.append(
            replace(
                self.history[trial - 1],
                job_id=self.spec.job_id,
                recurrence_id=rec.recurrence_id,
                attempt=rec.attempt,
                stage=decision.stage,
                cost_threshold=decision.cost_threshold,
                decision_reason=decision.reason,
                power_limit_w=r.power_limit_w,
                num_epochs=r.num_epochs,
                metric=r.metric,
                simulated=r.simulated,
                source=r.source,
                reason=r.reason,
                profiled=run.profile is not None,
            )
        )
        if r.reached or rec.attempt >= self.spec.max_attempts:
            self.done.append(rec)
            self._slot_freed()
        else:
            self._dispatch(rec)

    def _slot_freed(self) -> None:
        """A recurrence ended: start the next one at once (zeus_kfp.simulate.recurrence_gate starts them on a
        period)."""
        if self.started < self.n:
            self._start_recurrence()

    def _result(self) -> SimulationResult:
        recs = sorted(self.done, key=lambda r: r.number)
        rows = [
            RecurrenceSummary(
                job_id=self.spec.job_id,
                recurrence=rec.number,
                recurrence_id=rec.recurrence_id,
                trials=tuple(rec.trials),
                reached=any(t.reached for t in rec.trials),
                **Figures.of(rec.trials).to_dict(),
                simulated=True,
            )
            for rec in recs
        ]
        trials = sorted((t for rec in recs for t in rec.trials), key=lambda t: t.trial)
        sim = self.sim
        return SimulationResult(
            policy=self.policy.name,
            seed=self.spec.seed,
            num_recurrences=self.n,
            in_flight=self.in_flight,
            totals=Figures.of(trials),
            default=sim.default.times(self.n),
            oracle=sim.oracle.times(self.n),
            rows=rows,
            trials=trials,
            history=self.history,
        )
