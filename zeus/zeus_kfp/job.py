"""The job model: what a recurring training job is, what one trial produced, and what it cost.

Everything above this module (policies, store, simulator, pipeline) speaks in these types,
so they are validated once, here, where they enter: a bad field raises `JobSpecError`
naming the field, the value and what is allowed.

Longer than the project's ~400 lines on purpose: `JobSpec` declares every job setting once (its help text,
default and check), and the component signature, pipeline parameters, CLI options and `ZEUS_*` variables
derive from that one declaration (tests/test_job_fields.py); splitting its settings across modules would
make two places to declare one.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import MISSING, asdict, dataclass, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from zeus_kfp.cost import CostModel
from zeus_kfp.errors import JobSpecError, require
from zeus_kfp.run_settings import RunSettings
from zeus_kfp.settings import INT64_MAX, is_int, is_number, setting, settings_of

if TYPE_CHECKING:  # zeus_kfp.profiles loads pandas and pyarrow, which the job model never needs
    from zeus_kfp.profiles import PowerProfile

# A DNS-1123 label: safe as an object-key segment and as (part of) a Kubernetes name.
# Attempts per recurrence at most: KFP v2 has no loops, so each attempt is 3 more tasks one condition
# deeper in the compiled pipeline (pipelines/dag.py); far more than a batch-size list has sizes to try.
MAX_ATTEMPTS = 32
# What a recurrence opened by drift does to the history the bandit decides from (zeus_kfp.policy.drift); the
# default, reexplore, chosen in the simulator (benchmarks/RESULTS.md, "Drift").
DRIFT_REACTIONS = ("window", "reexplore", "none")
JOB_ID_PATTERN = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
# The run settings' names and CLI options: a spec that holds one is told where it goes (JobSpec.from_dict).
RUN_SETTINGS = {f.name: f.option for f in settings_of(RunSettings)}
JOB_ID_ALLOWED = "1-63 characters of lowercase letters, digits and '-', starting and ending with a letter or digit"


def meets_target(metric: float, target: float, *, higher_is_better: bool) -> bool:
    """Whether `metric` meets `target` in the job's direction (the job's and a trial's own check)."""
    return metric >= target if higher_is_better else metric <= target


class Pricing(Protocol):
    """What prices a trial's result: a cost model and the name of the metric its result reports."""

    @property
    def cost_model(self) -> CostModel: ...

    @property
    def metric_name(self) -> str: ...


class TrialStatus(StrEnum):
    """How a trial ended. DISPATCHED is a trial the bandit handed out that has no result yet."""

    DISPATCHED = "dispatched"
    REACHED = "reached"  # reached the target metric
    NOT_REACHED = "not_reached"  # ran max_epochs without reaching it
    COST_EXCEEDED = "cost_exceeded"  # stopped early: its cost would pass beta x the best recurrence
    OOM = "oom"  # out of memory at this batch size: every larger size will be too
    FAILED = "failed"  # the script failed for its own reasons; says nothing about the batch size

    @property
    def finished(self) -> bool:
        return self is not TrialStatus.DISPATCHED


COST_REL_TOL = 1e-9  # a cost that went through JSON or another float order, not a different cost
COST_ABS_TOL = 1e-9


def check_result_for(spec: JobSpec, result: TrialResult) -> TrialResult:
    """`result`, checked to belong to `spec`'s job: its batch size is one of the job's, and its cost is the
    job's cost of its energy and time. Returns it unchanged, else raises JobSpecError naming the field.

    Why: a result arrives as JSON from a pipeline step (TrialResult.from_json), so its own fields are
    checked (TrialResult.__post_init__) but not that it was priced by this job's cost function. The store
    keeps a trial's first result for good and the bandit learns from its cost, so the store calls this
    in finish_trial, before anything is written: a cost made up (or priced under another eta or
    max_power_w) would otherwise skew, or with a huge negative one break, every later decision.
    """
    require(isinstance(result, TrialResult), "result", type(result).__name__, "a zeus_kfp.job.TrialResult")
    require(
        result.batch_size in spec.batch_sizes,
        "batch_size",
        result.batch_size,
        f"one of the job's batch_sizes {list(spec.batch_sizes)}",
    )
    expected = spec.cost_model.cost(result.energy_j, result.time_s)
    require(
        math.isclose(result.cost, expected, rel_tol=COST_REL_TOL, abs_tol=COST_ABS_TOL),
        "cost",
        result.cost,
        f"{expected!r}, the job's cost of energy_j={result.energy_j!r} and time_s={result.time_s!r}",
    )
    return result


def _figure(field_name: str, value: Any) -> float:
    """A measured amount (seconds, joules, a cost) as a float: finite and >= 0, else JobSpecError. One
    rule for each of them, because one NaN or negative cost stored for good breaks every later bandit step."""
    require(is_number(value) and math.isfinite(value) and value >= 0, field_name, value, "a finite number >= 0")
    return float(value)


def _finished_status(value: Any) -> TrialStatus:
    """A finished TrialStatus from itself or its value; a result of a trial that has not ended is no result."""
    finished = [s.value for s in TrialStatus if s.finished]
    try:
        status = TrialStatus(value)
    except (TypeError, ValueError):
        raise JobSpecError("status", value, f"one of {finished}") from None
    require(status.finished, "status", status.value, f"a finished status, one of {finished} (not 'dispatched')")
    return status


@dataclass(frozen=True)
class JobSpec:
    """A recurring training job and the knobs of its energy optimization: the job's identity.

    The spec is stored with the job on its first recurrence; later recurrences must present
    the same spec (see `diff`), because the bandit's history is only comparable under it.
    How a run runs (the recurrence gate's period, cap and drift detector, the dispatch timeout) is
    no part of it: those are run settings (zeus_kfp.run_settings.RunSettings), which travel beside
    the spec and may differ from one schedule or submission of the job to the next.

    This is the one declaration of the job's settings: each field's `setting(...)` says how users reach
    it, and the pipeline's parameters, the preprocess component, the CLI's options and the ZEUS_*
    variables are derived from it (zeus_kfp.settings). A new setting is a field here, validated below.
    """

    job_id: str = setting(
        "Names the job's history in the store, which the bandit learns from (a new id starts afresh).", trial=True
    )
    batch_sizes: tuple[int, ...] = setting("Batch sizes the bandit may choose from.", example="16,32,64,128")
    default_batch_size: int = setting("The batch size used today (one of batch_sizes), the baseline of savings.")
    target_metric: float = setting("The metric value a trial must reach.", trial=True)
    max_epochs: int = setting("Epochs a trial may take to reach the target.", trial=True)
    higher_is_better: bool = setting(
        "The target is a value to reach or exceed (false: to reach or go below, e.g. a loss).",
        True,
        trial=True,
        off_option="lower-is-better",
    )
    metric_name: str = setting("The metric's name, as the script reports it.", "accuracy", trial=True)
    eta_knob: float = setting("Weight of energy against time in the cost, in [0, 1] (1: energy only).", 0.5, trial=True)
    beta_knob: float | None = setting(
        "Early stop (> 1; 0: never): a trial stops once its cost would pass beta x the cheapest batch size's mean"
        " cost (the default policy; zeus-nsdi23: beta x the cheapest recurrence so far).",
        2.0,
        none_as=0.0,
    )
    max_attempts: int = setting(
        "Trials per recurrence at most (the retry loop's length, fixed when the pipeline is compiled).",
        5,
        run_parameter=False,
        option="attempts",
    )
    num_pruning_rounds: int = setting("Rounds of pruning exploration before Thompson sampling (0: none).", 2)
    window_size: int = setting("Recent trials per batch size the bandit learns from (0: all of them).", 0)
    seed: int = setting("The job's seed: every decision and every trial's seed derive from it.", 0)
    num_gpus: int = setting("GPUs a trial trains on; the cost counts them all.", 1, trial=True)
    max_power_w: float = setting("A GPU's maximum power limit in watts: time is priced at it.", 300.0, trial=True)
    reprofile_after: int = setting(
        "Profile a batch size's power limits again once its stored profile is this many recurrences old (0: never).",
        0,
    )
    drift_reaction: str = setting(
        "What a recurrence opened by drift does to the bandit's history: window (forget the trials before it), "
        "reexplore (forget them but restart the walk from the size cheapest before it) or none.",
        "reexplore",
    )

    def __post_init__(self) -> None:
        require(
            isinstance(self.job_id, str) and bool(JOB_ID_PATTERN.fullmatch(self.job_id)),
            "job_id",
            self.job_id,
            JOB_ID_ALLOWED,
        )
        sizes = self.batch_sizes
        require(
            isinstance(sizes, (list, tuple)) and len(sizes) > 0 and all(is_int(b) and b > 0 for b in sizes),
            "batch_sizes",
            sizes,
            "a non-empty list of positive integers",
        )
        require(len(set(sizes)) == len(sizes), "batch_sizes", sizes, "distinct values (no duplicates)")
        object.__setattr__(self, "batch_sizes", tuple(sorted(sizes)))
        require(
            is_int(self.default_batch_size) and self.default_batch_size in self.batch_sizes,
            "default_batch_size",
            self.default_batch_size,
            f"one of batch_sizes {list(self.batch_sizes)}",
        )
        require(
            is_number(self.target_metric) and math.isfinite(self.target_metric),
            "target_metric",
            self.target_metric,
            "a finite number",
        )
        require(isinstance(self.higher_is_better, bool), "higher_is_better", self.higher_is_better, "true or false")
        require(
            isinstance(self.metric_name, str)
            and len(self.metric_name) <= 64
            and re.fullmatch(r"[\w-]+(/[\w-]+)*", self.metric_name or "") is not None,
            "metric_name",
            self.metric_name,
            "1-64 letters, digits, '_' or '-', in parts joined by '/' (a TFEvent directory: train/accuracy)",
        )
        for name in ("max_epochs", "max_attempts", "num_gpus"):
            value = getattr(self, name)
            require(is_int(value) and value > 0, name, value, "a positive integer")
        require(
            self.max_attempts <= MAX_ATTEMPTS,
            "max_attempts",
            self.max_attempts,
            f"1-{MAX_ATTEMPTS} (each attempt is a nested branch of the compiled pipeline, which has no loops)",
        )
        zero_means = {"num_pruning_rounds": "none", "window_size": "all history", "reprofile_after": "never"}
        for name, zero in zero_means.items():
            value = getattr(self, name)
            require(is_int(value) and value >= 0, name, value, f"an integer >= 0 (0 = {zero})")
        require(is_int(self.seed), "seed", self.seed, "an integer")
        require(
            self.drift_reaction in DRIFT_REACTIONS, "drift_reaction", self.drift_reaction, ", ".join(DRIFT_REACTIONS)
        )
        require(
            is_number(self.eta_knob) and 0.0 <= self.eta_knob <= 1.0,
            "eta_knob",
            self.eta_knob,
            "a number in [0, 1]",
        )
        require(
            self.beta_knob is None
            or (is_number(self.beta_knob) and math.isfinite(self.beta_knob) and self.beta_knob > 1.0),
            "beta_knob",
            self.beta_knob,
            "a number > 1, or null to disable early stopping",
        )
        require(
            is_number(self.max_power_w) and math.isfinite(self.max_power_w) and self.max_power_w > 0,
            "max_power_w",
            self.max_power_w,
            "a positive number of watts (the GPU's maximum power limit)",
        )
        object.__setattr__(self, "target_metric", float(self.target_metric))
        object.__setattr__(self, "eta_knob", float(self.eta_knob))
        object.__setattr__(self, "max_power_w", float(self.max_power_w))
        if self.beta_knob is not None:
            object.__setattr__(self, "beta_knob", float(self.beta_knob))

    @property
    def cost_model(self) -> CostModel:
        """How this job prices a trial (zeus_kfp.cost): its eta, max power and GPUs."""
        return CostModel(eta=self.eta_knob, max_power_w=self.max_power_w, num_gpus=self.num_gpus)

    def reached(self, metric: float) -> bool:
        """Whether `metric` meets the target, in the job's direction."""
        return meets_target(metric, self.target_metric, higher_is_better=self.higher_is_better)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["batch_sizes"] = list(self.batch_sizes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobSpec:
        """Build from a dict (JSON, a spec file); unknown keys are an error, not silently dropped. A run
        setting is refused as one, saying where it goes (a stored spec record written when the JobSpec still
        held the gate's settings is read by zeus_kfp.store.catalog, which drops them)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        run = [name for name in unknown if name in RUN_SETTINGS]
        if run:
            where = "no JobSpec field: a run setting (zeus_kfp.run_settings), given beside the job's spec"
            raise JobSpecError(run[0], data[run[0]], f"{where} (--{RUN_SETTINGS[run[0]]}, or a run parameter)")
        if unknown:
            raise JobSpecError(unknown[0], data[unknown[0]], f"one of the JobSpec fields {sorted(known)}")
        values = dict(data)
        if isinstance(values.get("batch_sizes"), list):
            values["batch_sizes"] = tuple(values["batch_sizes"])
        required = [f.name for f in fields(cls) if f.default is MISSING]
        absent = [name for name in required if name not in values]
        if absent:
            raise JobSpecError(absent[0], None, "a value (required field)")
        return cls(**values)

    def diff(self, other: JobSpec) -> dict[str, tuple[Any, Any]]:
        """Fields whose values differ, as {field: (self's, other's)}: what a changed spec changed."""
        mine, theirs = self.to_dict(), other.to_dict()
        return {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}

    def with_changes(self, **changes: Any) -> JobSpec:
        return replace(self, **changes)


@dataclass(frozen=True)
class TrialResult:
    """What one trial produced. `cost` is computed from energy and time by the job's cost function."""

    batch_size: int
    status: TrialStatus
    time_s: float
    energy_j: float
    num_epochs: int
    cost: float
    power_limit_w: float | None = None
    metric: float | None = None
    simulated: bool = False
    reason: str = ""
    # Where the figures come from, for people: "measured (nvml)", "simulated (GPU model)",
    # "simulated (trace: cifar100/v100)". `simulated` says the same for machines.
    source: str = ""

    def __post_init__(self) -> None:
        """Every way a result is made (build, from_dict/from_json, dataclasses.replace) passes here, so a
        result that exists is well-formed: the store keeps the first one for good and the bandit learns
        from its cost. Numbers are stored as floats (a JSON 300 becomes 300.0), so equal results compare equal."""
        require(is_int(self.batch_size) and self.batch_size > 0, "batch_size", self.batch_size, "a positive integer")
        object.__setattr__(self, "status", _finished_status(self.status))
        object.__setattr__(self, "time_s", _figure("time_s", self.time_s))
        object.__setattr__(self, "energy_j", _figure("energy_j", self.energy_j))
        require(
            is_int(self.num_epochs) and self.num_epochs >= 0,
            "num_epochs",
            self.num_epochs,
            f"an integer from 0 to {INT64_MAX}",
        )
        object.__setattr__(self, "cost", _figure("cost", self.cost))
        limit = self.power_limit_w
        require(
            limit is None or (is_number(limit) and math.isfinite(limit) and limit > 0),
            "power_limit_w",
            limit,
            "null or a finite number of watts > 0",
        )
        require(
            self.metric is None or (is_number(self.metric) and math.isfinite(self.metric)),
            "metric",
            self.metric,
            "null or a finite number",
        )
        require(isinstance(self.simulated, bool), "simulated", self.simulated, "true or false")
        require(isinstance(self.reason, str), "reason", self.reason, "a string")
        require(isinstance(self.source, str), "source", self.source, "a string")
        if limit is not None:
            object.__setattr__(self, "power_limit_w", float(limit))
        if self.metric is not None:
            object.__setattr__(self, "metric", float(self.metric))

    @classmethod
    def build(
        cls,
        spec: Pricing,
        *,
        batch_size: int,
        status: TrialStatus | str,
        time_s: float,
        energy_j: float,
        num_epochs: int,
        power_limit_w: float | None = None,
        metric: float | None = None,
        simulated: bool = False,
        reason: str = "",
        source: str = "",
    ) -> TrialResult:
        """A result from a trial's measurements, priced by `spec`'s cost model: the job's JobSpec, or the
        trial's own settings in a training child (zeus_kfp.train.env.TrialEnv), which carry the same three.

        A non-finite metric (a script that diverged reports a NaN loss) is a trial that ran, not bad
        input: it is kept as no metric, with a note in `reason`, so its energy and time still count.
        """
        time_s, energy_j = _figure("time_s", time_s), _figure("energy_j", energy_j)  # before pricing them
        if is_number(metric) and not math.isfinite(metric):
            note = f"the last {spec.metric_name} was {metric!r}, not a number to compare with the target"
            metric = None
            if isinstance(reason, str):  # else __post_init__ refuses it
                reason = f"{reason}; {note}" if reason else note
        return cls(
            batch_size=batch_size,
            status=_finished_status(status),
            time_s=time_s,
            energy_j=energy_j,
            num_epochs=num_epochs,
            cost=spec.cost_model.cost(energy_j, time_s),
            power_limit_w=power_limit_w,
            metric=metric,
            simulated=simulated,
            reason=reason,
            source=source,
        )

    @property
    def reached(self) -> bool:
        return self.status is TrialStatus.REACHED

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        data["reached"] = self.reached
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        """From `to_dict`'s shape; keys that are not fields (`reached`, derived; a result file's extras)
        are ignored. Checked like every result (__post_init__); whether it is this job's result (its
        batch size, its cost) is `check_result_for`'s question."""
        require(isinstance(data, dict), "result", type(data).__name__, "a JSON object of TrialResult fields")
        required = [f.name for f in fields(cls) if f.default is MISSING]
        absent = [name for name in required if name not in data]
        if absent:
            raise JobSpecError(absent[0], None, "a value (required field of a trial result)")
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    def to_json(self) -> str:
        """How a result travels between pipeline steps (train's `result_json` output) and files."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> TrialResult:
        """From `to_json`'s text (a pipeline step's output): checked as `from_dict` checks."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError):
            raise JobSpecError("result", str(text)[:80], "a JSON object of TrialResult fields") from None
        return cls.from_dict(data)


@dataclass(frozen=True)
class TrialOutcome:
    """A finished trial as its runner hands it back: the result, the power profile it measured (None or
    empty: nothing to store, e.g. it trained at a reused profile), the model it saved and its output's tail.
    One type for every runner: a script (zeus_kfp.train), a cluster launch (zeus_kfp.launch) and a trace replay
    (zeus_kfp.simulate.trace_trial)."""

    result: TrialResult
    profile: PowerProfile | None
    model_path: Path | None = None
    log_tail: str = ""


@dataclass(frozen=True)
class Decision:
    """The next trial as a policy decided it and the store records it: its batch size, the early-stop
    cost threshold (None: no early stop), the policy's stage ("exploration", "exploitation", ...) and
    why, for people. Here, not in zeus_kfp.policy, because the store keeps it and imports no policy."""

    batch_size: int
    cost_threshold: float | None
    stage: str
    reason: str


def live_threshold(dispatched: float | None, current: float | None) -> float | None:
    """The threshold a running trial stops at: the lower of the one it was dispatched with (which a policy
    may have capped below its rule) and the job's early stop as it is now (the policy's own rule,
    `Policy.stop_threshold`: zeus-nsdi23's beta x the cheapest reached recurrence, as Zeus's server checks
    `beta_knob * min_cost` at every report). None stands for no threshold."""
    if dispatched is None or current is None:
        return current if dispatched is None else dispatched
    return min(dispatched, current)
