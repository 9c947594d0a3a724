"""The job model: what a recurring training job is, what one trial produced, and what it cost.

Everything above this module (policies, store, simulator, pipeline) speaks in these types,
so they are validated once, here, where they enter: a bad field raises `JobSpecError`
naming the field, the value and what is allowed.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import MISSING, asdict, dataclass, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zeus.errors import FieldError

if TYPE_CHECKING:  # a profile is a pandas table; the job model itself never needs pandas
    import pandas as pd

# A DNS-1123 label: safe as an object-key segment and as (part of) a Kubernetes name.
JOB_ID_PATTERN = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
JOB_ID_ALLOWED = "1-63 characters of lowercase letters, digits and '-', starting and ending with a letter or digit"


class JobSpecError(FieldError):
    """A job setting is out of range. Carries the field so callers (CLI, pipeline) can point at it."""


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


def zeus_cost(energy_j: float, time_s: float, *, eta: float, max_power_w: float, num_gpus: int) -> float:
    """Zeus's cost (NSDI'23, eq. 2): a weighted sum of energy and time, time priced at full power.

    eta = 1 counts energy only; eta = 0 counts time only (in joules the GPUs could have drawn).
    """
    return eta * energy_j + (1.0 - eta) * max_power_w * num_gpus * time_s


def zeus_cost_rate(power_w: float, throughput: float, *, eta: float, max_power_w: float, num_gpus: int) -> float:
    """Zeus's cost per unit of work at `power_w` (all GPUs together) and `throughput` units/s: the JIT
    profiler's objective. One unit takes 1/throughput s and power/throughput J, priced by `zeus_cost`
    itself, so this is the same formula, not a second one. Infinite when nothing was done."""
    if not throughput > 0:
        return math.inf
    return zeus_cost(power_w / throughput, 1.0 / throughput, eta=eta, max_power_w=max_power_w, num_gpus=num_gpus)


def _require(ok: bool, field_name: str, value: Any, allowed: str) -> None:
    if not ok:
        raise JobSpecError(field_name, value, allowed)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class JobSpec:
    """A recurring training job and the knobs of its energy optimization.

    The spec is stored with the job on its first recurrence; later recurrences must present
    the same spec (see `diff`), because the bandit's history is only comparable under it.
    """

    job_id: str
    batch_sizes: tuple[int, ...]
    default_batch_size: int
    target_metric: float
    max_epochs: int
    higher_is_better: bool = True
    metric_name: str = "accuracy"
    eta_knob: float = 0.5
    beta_knob: float | None = 2.0
    max_attempts: int = 5
    num_pruning_rounds: int = 2
    window_size: int = 0
    seed: int = 0
    num_gpus: int = 1
    max_power_w: float = 300.0
    # Re-profile a batch size once its stored power profile is this many recurrences old (0: never,
    # as Zeus does). See zeus.power.reuse.
    reprofile_after: int = 0

    def __post_init__(self) -> None:
        _require(
            isinstance(self.job_id, str) and bool(JOB_ID_PATTERN.fullmatch(self.job_id)),
            "job_id",
            self.job_id,
            JOB_ID_ALLOWED,
        )
        sizes = self.batch_sizes
        _require(
            isinstance(sizes, (list, tuple)) and len(sizes) > 0 and all(_is_int(b) and b > 0 for b in sizes),
            "batch_sizes",
            sizes,
            "a non-empty list of positive integers",
        )
        _require(len(set(sizes)) == len(sizes), "batch_sizes", sizes, "distinct values (no duplicates)")
        object.__setattr__(self, "batch_sizes", tuple(sorted(sizes)))
        _require(
            _is_int(self.default_batch_size) and self.default_batch_size in self.batch_sizes,
            "default_batch_size",
            self.default_batch_size,
            f"one of batch_sizes {list(self.batch_sizes)}",
        )
        _require(
            _is_number(self.target_metric) and math.isfinite(self.target_metric),
            "target_metric",
            self.target_metric,
            "a finite number",
        )
        _require(isinstance(self.higher_is_better, bool), "higher_is_better", self.higher_is_better, "true or false")
        _require(
            isinstance(self.metric_name, str) and re.fullmatch(r"[\w-]{1,64}", self.metric_name or "") is not None,
            "metric_name",
            self.metric_name,
            "1-64 letters, digits, '_' or '-'",
        )
        for name in ("max_epochs", "max_attempts", "num_gpus"):
            value = getattr(self, name)
            _require(_is_int(value) and value > 0, name, value, "a positive integer")
        zero_means = {"num_pruning_rounds": "none", "window_size": "all history", "reprofile_after": "never"}
        for name, zero in zero_means.items():
            value = getattr(self, name)
            _require(_is_int(value) and value >= 0, name, value, f"an integer >= 0 (0 = {zero})")
        _require(_is_int(self.seed), "seed", self.seed, "an integer")
        _require(
            _is_number(self.eta_knob) and 0.0 <= self.eta_knob <= 1.0,
            "eta_knob",
            self.eta_knob,
            "a number in [0, 1]",
        )
        _require(
            self.beta_knob is None
            or (_is_number(self.beta_knob) and math.isfinite(self.beta_knob) and self.beta_knob > 1.0),
            "beta_knob",
            self.beta_knob,
            "a number > 1, or null to disable early stopping",
        )
        _require(
            _is_number(self.max_power_w) and math.isfinite(self.max_power_w) and self.max_power_w > 0,
            "max_power_w",
            self.max_power_w,
            "a positive number of watts (the GPU's maximum power limit)",
        )
        object.__setattr__(self, "target_metric", float(self.target_metric))
        object.__setattr__(self, "eta_knob", float(self.eta_knob))
        object.__setattr__(self, "max_power_w", float(self.max_power_w))
        if self.beta_knob is not None:
            object.__setattr__(self, "beta_knob", float(self.beta_knob))

    def cost(self, energy_j: float, time_s: float) -> float:
        """This job's cost of spending `energy_j` (all its GPUs together) over `time_s`."""
        return zeus_cost(energy_j, time_s, eta=self.eta_knob, max_power_w=self.max_power_w, num_gpus=self.num_gpus)

    def cost_rate(self, power_w: float, throughput: float) -> float:
        """This job's cost per unit of work at `power_w` (all its GPUs together) and `throughput` units/s."""
        return zeus_cost_rate(
            power_w, throughput, eta=self.eta_knob, max_power_w=self.max_power_w, num_gpus=self.num_gpus
        )

    def reached(self, metric: float) -> bool:
        """Whether `metric` meets the target, in the job's direction."""
        return metric >= self.target_metric if self.higher_is_better else metric <= self.target_metric

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["batch_sizes"] = list(self.batch_sizes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobSpec:
        """Build from a dict (JSON, a stored row); unknown keys are an error, not silently dropped."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
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

    @classmethod
    def build(
        cls,
        spec: JobSpec,
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
        status = TrialStatus(status)
        _require(status.finished, "status", status.value, "a finished status (not 'dispatched')")
        _require(_is_number(time_s) and time_s >= 0, "time_s", time_s, "a number >= 0")
        _require(_is_number(energy_j) and energy_j >= 0, "energy_j", energy_j, "a number >= 0")
        _require(_is_int(num_epochs) and num_epochs >= 0, "num_epochs", num_epochs, "an integer >= 0")
        return cls(
            batch_size=batch_size,
            status=status,
            time_s=float(time_s),
            energy_j=float(energy_j),
            num_epochs=num_epochs,
            cost=spec.cost(energy_j, time_s),
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
        """From `to_dict`'s shape; keys that are not fields (`reached`, derived) are ignored."""
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        values["status"] = TrialStatus(values["status"])
        return cls(**values)

    def to_json(self) -> str:
        """How a result travels between pipeline steps (train's `result_json` output) and files."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> TrialResult:
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True)
class TrialOutcome:
    """A finished trial as its runner hands it back: the result, the power profile it measured (None or
    empty: nothing to store, e.g. it trained at a reused profile), the model it saved and its output's tail.
    One type for every runner: a script (zeus.train), a cluster launch (zeus.launch) and a trace replay
    (zeus.simulate.trial)."""

    result: TrialResult
    profile: pd.DataFrame | None
    model_path: Path | None = None
    log_tail: str = ""


@dataclass(frozen=True)
class TrialSummary:
    """One row of a job's trial table, as people read it: what `zeus-kfp run` prints from the store and
    what `zeus-kfp simulate` prints from the simulator (the same columns, so the two read alike).

    `stage` and `cost_threshold` are the bandit's decision; `source` says where the figures come from
    (TrialResult.source); `profiled`: whether the trial measured a power profile (False: it trained at a
    reused one; None: not known, as in the store's table). `cost` and the other figures are None for a
    trial that has no result."""

    recurrence: int
    attempt: int
    trial: int
    batch_size: int
    status: str
    power_limit_w: float | None
    cost: float | None
    energy_j: float | None
    time_s: float | None
    metric: float | None = None
    simulated: bool = False
    reason: str = ""
    source: str = ""
    stage: str = ""
    cost_threshold: float | None = None
    profiled: bool | None = None

    @property
    def reached(self) -> bool:
        return self.status == TrialStatus.REACHED.value


@dataclass(frozen=True)
class TrialRecord:
    """One trial as the policies see it: an entry of the job's history, finished or only dispatched.

    `recurrence` orders recurrences; `trial` orders trials within the job. `cost` is None while
    the trial is only dispatched.
    """

    recurrence: int
    trial: int
    batch_size: int
    status: TrialStatus
    cost: float | None = None
    time_s: float | None = None
    energy_j: float | None = None

    @property
    def finished(self) -> bool:
        return self.status.finished
