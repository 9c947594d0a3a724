"""Just-in-time power-limit profiler: a state machine of typed states, advanced by per-step hooks.

Zeus (NSDI'23) profiles power limits *during* the first epoch of real training instead of in a
separate benchmark: for each limit from the maximum down in 25 W steps it runs a few warm-up
iterations (the GPU settles after a limit change), then measures throughput and power over
the next iterations; it then keeps the limit its optimum selector picks (zeus_kfp.power.selection;
the job's Zeus cost per unit of work, `(eta * power + (1 - eta) * max_power) / throughput`, by
default) and trains the rest at that limit. Eval is profiled once, at the chosen limit, so the
trial's predicted epoch cost includes it.

States (after ml-energy/zeus `optimizer/power_limit.py`, each its own type with its own data):

    Ready(i) -> Warmup(i) -> Profiling(i) -> Warmup(i+1) ... -> Eval(limit) -> Done(limit)
                    ^ an epoch ends mid-window: Ready(i) again (see below)

Ready: limit i is next; the next step applies it. Warmup: steps at limit i before measuring.
Profiling: the window at limit i is open. Eval: the limit is chosen and in force; eval passes are
measured at it. Done: eval measured too (or the reused profile had it). A trial that never
evaluates (a plain script profiled from outside) ends in Eval, which is as final as Done for
training; `done` is true in both.

Warm-up: on a real meter a warm-up lasts `warmup_iters` steps AND a time: the trial's first lasts a whole
shortest window (FIRST_WARMUP: the first steps of a process are slow; on the H200 the first window of a
trial read up to 30 % low, shared/traces/h200/profiled_from_outside.csv), one after a limit change a tenth
of it (SETTLE_WARMUP: a new limit binds within about 0.1 s), so few or fast steps never let a window hold
start-up or the transition. On an exact meter warm-up is steps only, as Zeus's.

A window closes when it has `profile_iters` steps AND has lasted `min_window_s` seconds (backend
clock). Zeus counts iterations only, assuming iterations long next to the meter's update period;
real meters are coarse (an H200's counter advances in ~100 ms steps, so short windows read zero
energy: benchmarks/RESULTS.md, "On a real GPU"). The default is the backend's `GPU.min_window_s` (1 s on NVML with a
counter, 0 simulated); ZEUS_MIN_WINDOW_S overrides it. A window that still read zero energy (the
counter did not tick) is void: never recorded nor chosen from, it stays open twice as long and is
read again, up to MAX_REMEASURES times; then profiling stops with the limits measured so far (a
counter that never moves cannot rank limits). The first void window logs a warning.

An epoch that ends inside a window cancels it (a partial window mixes in epoch-boundary work: eval,
reshuffling) and the limit restarts next epoch. But a window that began at an epoch's first step
and is still open at its end fits in no epoch (epochs are equally long): cancelling would restart
it forever. From then on windows *span* epochs: at an epoch's end the window pauses (boundary work
left out) and resumes at the next epoch's first step, same limit. `ProfileParams.fit` still
shrinks the iteration counts to one epoch; the time needed is unknown before an epoch has run, so
spanning covers it. Eval is profiled at the chosen limit over as many eval passes as it takes to
last `min_window_s`.

Where limits may not be set (no SYS_ADMIN, no zeusd) the profiler measures one window at the limit
in force and says so ("measure only"); a refusal met mid-way falls back the same way. A stored profile
is reused or continued only on the GPU model that measured it (each row names it: `gpu`); on another
model the trial profiles afresh. `agree` makes a chosen limit the one every rank trains at (rank 0's,
broadcast; zeus_kfp.train.distributed).
`restore()` puts every GPU at its resting limit (zeus_kfp.power.gpu.resting_limits: the device's default, or
an administrator's stated cap), never the limit found at the trial's start, which a trial killed mid-profile may
have left; callers run it in `finally` and on signals, and the next trial's start rests the GPU again
(zeus_kfp.power.gpu.rest_limits), so no killed trial leaves a GPU throttled for the jobs after it.

Which search runs is the GPU's to say (`GPU.meter`): on a real meter the descent of zeus_kfp.power.search,
windows sized to their noise and a pick confirmed in a second window; on an exact one (the simulated V100)
Zeus's sweep and its exact minimum.

The profiler never reads a clock itself: all figures come from the energy monitor, so the same
machine runs on NVML, zeusd or the simulated GPU, and tests can drive it deterministically.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from zeus_kfp.power.gpu import GPU, REAL_METER, gpu_model, resting_limits
from zeus_kfp.power.monitor import EnergyMonitor, Measurement
from zeus_kfp.power.precision import WindowNoise
from zeus_kfp.power.profile_params import ProfileParams, candidate_limits
from zeus_kfp.power.search import DESCEND, SWEEP, LimitSearch
from zeus_kfp.power.selection import CostRate, OptimumSelector, ZeusCost, choose_limit
from zeus_kfp.profiles import UNFINISHED_NOTE, PowerProfile

log = logging.getLogger(__name__)

MAX_REMEASURES = 3  # a void window is read again at 2x, 4x, 8x its length before profiling gives up
EVAL_WINDOW = "profile:eval"
ALL_WINDOW = "profile:all"  # the whole profiling phase, for its total time
WARMUP_WINDOW = "profile:warmup"  # how long a warm-up has lasted, on a real meter
# On a real meter a warm-up also lasts a time (module docstring, "Warm-up"), as a fraction of the shortest window:
FIRST_WARMUP = 1.0  # the trial's first: a process's first steps are slow (caches, autotuning, data workers)
SETTLE_WARMUP = 0.1  # after a limit change: a new limit takes about 0.1 s to bind (an H200's, measured)
BINS_PER_WINDOW = 4  # a window's precision is read in bins of a quarter of the shortest window


# -- the states ------------------------------------------------------------------------------------------
@dataclass
class Ready:
    """Limit `index` is next: the next step applies it and starts its warm-up."""

    index: int


@dataclass
class Warmup:
    """Steps at limit `index` before its window opens; `began_at` is the epoch step its warm-up began at; on a
    real meter it also lasts `required_s` seconds (WARMUP_WINDOW)."""

    index: int
    began_at: int
    steps: int = 0
    required_s: float = 0.0


@dataclass
class Profiling:
    """The window at limit `index` is open: `steps` and `samples` so far; it closes after `required_s`
    (doubled for each void read, `remeasures` of them)."""

    index: int
    began_at: int
    required_s: float
    steps: int = 0
    samples: int = 0
    remeasures: int = 0
    # (seconds into the window, samples so far) at each step's end: the window's precision (_precise)
    marks: list[tuple[float, int]] = field(default_factory=list, compare=False, repr=False)


@dataclass
class Eval:
    """`limit` is chosen and in force; eval is measured at it, over passes adding up to min_window_s."""

    limit: float
    samples: int = 0
    remeasures: int = 0
    open: bool = False


@dataclass
class Done:
    """`limit` is chosen, and eval was measured at it (or the reused profile had it)."""

    limit: float


State = Ready | Warmup | Profiling | Eval | Done


class PowerLimitProfiler:
    """Drives one trial's power limits. Hooks: on_step_begin/on_step_end, on_epoch_end, on_eval_begin/end.

    `selector` (zeus_kfp.power.selection) chooses the limit; `cost_rate` is shorthand for ZeusCost(cost_rate),
    the job's cost per unit of work (CostModel.rate (JobSpec.cost_model)). `reuse`: a stored profile to train at instead
    of profiling (its eval is measured if it has none). `agree`: see the module docstring.
    """

    def __init__(
        self,
        gpu: GPU,
        *,
        cost_rate: CostRate | None = None,
        selector: OptimumSelector | None = None,
        params: ProfileParams | None = None,
        monitor: EnergyMonitor | None = None,
        reuse: PowerProfile | None = None,
        agree: Callable[[float], float] | None = None,
    ) -> None:
        if (selector is None) == (cost_rate is None):
            raise ValueError("give the profiler a selector or a cost_rate (for ZeusCost), one of them")
        self.gpu = gpu
        self.params = params or ProfileParams()
        self.agree = agree or (lambda watts: watts)
        self.monitor = monitor or EnergyMonitor(gpu)
        given = self.params.min_window_s
        self.min_window_s = float(gpu.min_window_s if given is None else given)
        # Limits closer in cost than a window's precision are not told apart (ProfileParams.rel_error). An exact
        # meter (the simulated V100) measures without noise, and keeps Zeus's exact minimum.
        self.noisy = gpu.meter == REAL_METER
        tolerance = 2 * math.sqrt(2) * self.params.rel_error if self.noisy else 0.0
        self.selector = selector or ZeusCost(cost_rate, tolerance=tolerance, monotone=self.noisy)  # type: ignore[arg-type]
        self.max_window_s = self.min_window_s * self.params.max_window_factor
        self.noise = WindowNoise(self.min_window_s / BINS_PER_WINDOW)
        self.resting = resting_limits(gpu)  # what `restore()` puts back (the module docstring)
        self.measure_only = not gpu.can_set_limits
        ladder = candidate_limits(gpu, self.params.step_w, cap=min(self.resting))
        self.limits = [gpu.get_power_limit(0)] if self.measure_only else ladder
        self.how = self.params.search or (DESCEND if self.noisy else SWEEP)  # ProfileParams.search
        self.search = LimitSearch(tuple(self.limits), self.selector, self.how, confirm=self.noisy)
        self.rows: list[dict] = []
        self.state: State = Ready(0)
        self.model = gpu_model(gpu)  # every row says which GPU model measured it
        self.other_model = ""  # the model a stored profile was measured on, where not this one (not reused)
        self.resumed_rows = 0  # rows of a stored unfinished profile this trial continues
        self.cancelled_windows = 0
        self.invalid_windows = 0  # reads that found the energy counter had not moved (void, re-measured)
        self.spanned_epochs = 0  # epoch boundaries a window was paused over
        self.span_epochs = False  # set once a window proved longer than an epoch
        self.profiling_s: float | None = None
        self.gave_up = ""
        self.reused = False
        self._epoch_step = 0  # steps since the epoch began
        self._warmed_up = False  # the trial's first warm-up has begun (the module docstring, "Warm-up")
        self._warned_void = False
        self._current: float | None = None
        if reuse is not None and not reuse.is_empty and reuse.gpu != self.model:
            self.other_model = reuse.gpu or "a GPU it does not name (stored before profiles named theirs)"
            log.info(
                "the stored power profile was measured on %s, not %s: profiling again", self.other_model, self.model
            )
        elif reuse is not None and not reuse.is_empty:
            if not reuse.is_usable():
                log.warning("the stored power profile has no valid train rows (zero power); profiling again")
            elif self.search.is_complete(reuse):
                self.rows = reuse.rows.to_dict("records")  # the profile's rows, which eval may add to
                limit = self.agree(self.selector.choose(reuse))
                self.state = Done(limit) if reuse.has_eval() else Eval(limit)
                self.reused = True
            else:  # an earlier trial ended mid-search: go on where it stopped, with its windows
                self.rows = reuse.rows[reuse.train_rows()].to_dict("records")
                self.resumed_rows = len(self.rows)
                self.state = Ready(self.limits.index(self.search.next_limit(reuse)))  # type: ignore[arg-type]
                log.info("continuing the stored power profile: %d limits measured so far", self.resumed_rows)

    # -- limits --------------------------------------------------------------------------------
    def _apply(self, watts: float) -> None:
        if not self.measure_only and watts != self._current:
            for i in range(self.gpu.device_count()):
                self.gpu.set_power_limit(i, watts)
            if not self.gpu.can_set_limits:
                # Refused just now (no SYS_ADMIN): profiling limits we cannot set would label rows with
                # limits that never applied. Measure one window at the limit actually in force instead.
                self.measure_only = True
                self.limits, self.rows = [self.gpu.get_power_limit(0)], []
                self.search = LimitSearch(tuple(self.limits), self.selector, self.how, confirm=self.noisy)
                watts = self.limits[0]
        self._current = watts

    def _apply_index(self, index: int) -> int:
        """Apply limit `index`; the index in force after it (0 once a refusal fell back to measuring only)."""
        self._apply(self.limits[index])
        return 0 if self.measure_only else index

    def restore(self) -> None:
        """Put every GPU at its resting limit (the module docstring). Safe to call more than once."""
        if self.gpu.can_set_limits:
            for i, watts in enumerate(self.resting):
                self.gpu.set_power_limit(i, watts)
        self._current = self.resting[0]

    def _window(self, index: int) -> str:
        return f"profile:{self.limits[index]:g}"

    # -- hooks ---------------------------------------------------------------------------------
    def on_step_begin(self) -> None:
        state = self.state
        if isinstance(state, Ready):
            if not self.monitor.is_open(ALL_WINDOW):
                self.monitor.begin_window(ALL_WINDOW)
            self._warm_up(self._apply_index(state.index))
        elif isinstance(state, Profiling) and self.monitor.is_paused(self._window(state.index)):
            self.monitor.resume_window(self._window(state.index))  # a window spanning an epoch boundary goes on
        elif isinstance(state, (Eval, Done)) and self._current != state.limit:
            self._apply(state.limit)

    def _warm_up(self, index: int) -> None:
        timed = self.noisy and self.params.warmup_iters > 0 and self.min_window_s > 0
        required = self.min_window_s * (SETTLE_WARMUP if self._warmed_up else FIRST_WARMUP) if timed else 0.0
        self._warmed_up = True
        self.monitor.cancel_window(WARMUP_WINDOW)
        self.state = Warmup(index, began_at=self._epoch_step, required_s=required)
        if required > 0:
            self.monitor.begin_window(WARMUP_WINDOW)
        elif self.params.warmup_iters == 0:
            self._profile(self.state)

    def _warmed(self, state: Warmup) -> bool:
        """Whether the warm-up has lasted its steps and its time (the module docstring, "Warm-up")."""
        if state.steps < self.params.warmup_iters:
            return False
        return state.required_s <= 0 or self.monitor.elapsed_s(WARMUP_WINDOW) >= state.required_s

    def _profile(self, warmup: Warmup) -> None:
        self.monitor.cancel_window(WARMUP_WINDOW)
        self.monitor.begin_window(self._window(warmup.index))
        self.state = Profiling(warmup.index, warmup.began_at, required_s=self.min_window_s)

    def on_step_end(self, samples: int, steps: int = 1) -> None:
        """`steps` steps over `samples` samples in all have run since on_step_begin. More than one: a
        driver outside the process that sees progress in bursts (zeus_kfp.train.progress), so windows
        open and close only where it saw progress."""
        self._epoch_step += steps
        state = self.state
        if isinstance(state, Warmup):
            state.steps += steps
            if self._warmed(state):
                self._profile(state)
        elif isinstance(state, Profiling):
            state.steps += steps
            state.samples += samples
            elapsed = self.monitor.elapsed_s(self._window(state.index))
            state.marks.append((elapsed, state.samples))
            if state.steps >= self.params.profile_iters and elapsed >= state.required_s and self._precise(state):
                self._close(state)

    def _precise(self, state: Profiling) -> bool:
        """Whether the open window measures throughput to ProfileParams.rel_error (zeus_kfp.power.precision),
        or may grow no longer. An exact meter (the simulated GPU) needs no more than one window."""
        exact = not self.noisy or self.min_window_s <= 0
        if self.params.rel_error <= 0 or exact or state.marks[-1][0] >= self.max_window_s:
            return True
        error = self.noise.relative_error(state.marks)
        return error is not None and error <= self.params.rel_error

    def _void(self, m: Measurement, where: str) -> None:
        """Count a window whose energy counter did not move; warn the first time."""
        self.invalid_windows += 1
        say = log.info if self._warned_void else log.warning
        self._warned_void = True
        say(
            "zeus: the GPU energy counter did not advance over a %.3f s window (%s); the window is void and is "
            "measured longer (the counter updates in coarse steps; ZEUS_MIN_WINDOW_S is %g s)",
            m.time_s, where, self.min_window_s,
        )  # fmt: skip

    def _close(self, state: Profiling) -> None:
        limit, window = self.limits[state.index], self._window(state.index)
        m = self.monitor.peek(window)
        if m.counter_stalled:
            self._void(m, f"{limit:g} W")
            if state.remeasures < MAX_REMEASURES:
                state.remeasures += 1
                state.required_s = 2.0 * max(m.time_s, state.required_s)
                return
            self.monitor.cancel_window(window)
            self.gave_up = f"energy counter did not advance in {m.time_s:.2f} s at {limit:g} W"
            log.warning("zeus: %s; power-limit profiling stops with the limits measured so far", self.gave_up)
            self._choose()
            return
        self.monitor.cancel_window(window)  # `m` is its final reading
        self.noise.add(state.marks)
        self.rows.append(self._row("train", limit, m.average_power_w, state.samples / max(m.time_s, 1e-12)))
        following = self.search.next_limit(self.profile())
        if following is None:
            self._choose()
        else:
            self._warm_up(self._apply_index(self.limits.index(following)))

    def _choose(self) -> None:
        """Profiling is over: choose among what was measured (without evidence to throttle on, the resting
        limit), agree on it, and train at it."""
        profile = self.profile()
        chosen = self.selector.choose(profile) if profile.is_usable() else self.resting[0]
        limit = self.agree(chosen)
        self._apply(limit)
        self.state = Eval(limit)
        if self.monitor.is_open(ALL_WINDOW):
            self.profiling_s = self.monitor.end_window(ALL_WINDOW).time_s
        log.info("power-limit profiling done: chose %g W of %s; %s", limit, self.limits, self.summary())

    def on_epoch_end(self) -> None:
        state = self.state
        if isinstance(state, (Warmup, Profiling)):
            limit, window = self.limits[state.index], self._window(state.index)
            if self.span_epochs or state.began_at == 0:
                if not self.span_epochs:
                    log.info("the %g W window outlasts a whole epoch: windows span epochs from now on", limit)
                self.span_epochs = True
                self.spanned_epochs += 1
                if self.monitor.is_open(window):
                    self.monitor.pause_window(window)
            else:
                self.monitor.cancel_window(window)
                self.monitor.cancel_window(WARMUP_WINDOW)
                self.cancelled_windows += 1
                log.info("epoch ended inside the %g W window; it restarts next epoch", limit)
                self.state = Ready(state.index)
        self._epoch_step = 0

    def mark(self) -> None:
        """A driver outside the process (zeus_kfp.train.progress): the interval that just ended was training."""
        state = self.state
        if isinstance(state, Profiling) and self.monitor.is_open(self._window(state.index)):
            self.monitor.mark(self._window(state.index))

    def leave_out_interval(self) -> None:
        """A driver outside the process: the interval since the last `mark` held no training (an evaluation):
        the open window is paused as of that mark, and resumes at the next step. Windows span epochs from
        then on: the boundary's work is left out exactly, so nothing need restart."""
        self.span_epochs = True
        state = self.state
        if isinstance(state, Profiling) and self.monitor.is_open(self._window(state.index)):
            self.monitor.pause_window(self._window(state.index), at_mark=True)

    def on_eval_begin(self) -> None:
        state = self.state
        if isinstance(state, Eval):
            self._apply(state.limit)
            if self.monitor.is_paused(EVAL_WINDOW):
                self.monitor.resume_window(EVAL_WINDOW)  # eval passes shorter than min_window_s add up
            else:
                self.monitor.begin_window(EVAL_WINDOW)
            state.open = True

    def on_eval_end(self, samples: int) -> None:
        state = self.state
        if not (isinstance(state, Eval) and state.open):
            return
        state.open = False
        state.samples += samples
        self.monitor.pause_window(EVAL_WINDOW)
        m = self.monitor.peek(EVAL_WINDOW)
        if m.time_s < self.min_window_s:
            return
        if m.counter_stalled:
            self._void(m, "eval")
            state.remeasures += 1
            if state.remeasures <= MAX_REMEASURES:
                return
        self.monitor.cancel_window(EVAL_WINDOW)
        self.state = Done(state.limit)
        if m.time_s > 0 and state.samples > 0 and not m.counter_stalled:
            self.rows.append(self._row("eval", state.limit, m.average_power_w, state.samples / m.time_s))

    def _row(self, phase: str, limit: float, power: float, throughput: float) -> dict:
        return {
            "phase": phase,
            "power_limit_w": float(limit),
            "average_power_w": float(power),
            "throughput": float(throughput),
            "simulated": bool(self.gpu.simulated),
            "gpu": self.model,
        }

    # -- outputs -------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """The limit is chosen (Eval or Done): profiling of training is over."""
        return isinstance(self.state, (Eval, Done))

    @property
    def chosen_limit(self) -> float | None:
        return self.state.limit if isinstance(self.state, (Eval, Done)) else None

    def profile(self) -> PowerProfile:
        return PowerProfile.of(self.rows)

    def best_limit(self) -> float | None:
        """The chosen limit; for a trial that ended mid-profiling, the choice among the limits measured so
        far (what a later trial reusing this partial profile will train at); None with nothing measured."""
        if self.chosen_limit is not None:
            return self.chosen_limit
        profile = self.profile()
        return choose_limit(profile, self.selector) if profile.is_usable() else None

    def reuse_note(self) -> str:
        """For a trial handed a profile another GPU model measured: why it profiled again ("" otherwise)."""
        if not self.other_model:
            return ""
        return f"the stored profile was measured on {self.other_model}, not this {self.model}: profiled again"

    def partial_note(self) -> str:
        """For a trial that ended before profiling finished: what its limit was chosen among ("" otherwise)."""
        if self.done or self.best_limit() is None:
            return ""
        return (
            f"{UNFINISHED_NOTE}: chose among {len(self.profile())} of {len(self.limits)} limits; "
            "the next trial at this batch size continues the profile"
        )

    def summary(self) -> dict[str, object]:
        """How profiling went, for result.json and device checks (not part of the stored profile table)."""
        counts = (
            "min_window_s", "max_window_s", "invalid_windows", "cancelled_windows", "spanned_epochs", "profiling_s",
            "gave_up", "resumed_rows", "model", "other_model",
        )  # fmt: skip
        return {
            "done": self.done,
            "reused": self.reused,
            "chosen_limit_w": self.chosen_limit,
            "limits_w": list(self.limits),
            **{name: getattr(self, name) for name in counts},
        }
