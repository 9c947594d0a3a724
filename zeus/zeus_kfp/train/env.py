"""The ZEUS_* environment variables through which a train step configures a Zeus-aware script.

Why environment variables: the user's script is a separate process started from an arbitrary
command line (as in Zeus's PyTorchJob example); the environment is the one channel every
launcher (subprocess, KFP, Kubernetes) passes through unchanged. Both sides use this module,
so a variable's name and format live in exactly one place.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from zeus_kfp.cost import CostModel
from zeus_kfp.errors import FieldError
from zeus_kfp.job import JobSpec, JobSpecError, meets_target
from zeus_kfp.power.profile_params import MIN_WINDOW_ALLOWED, valid_min_window_s
from zeus_kfp.settings import settings_of
from zeus_kfp.train.live_threshold import current_threshold

# The job settings a trial carries from its JobSpec, declared there with `trial=True` (zeus_kfp.settings), under
# the same names on both sides: `for_trial` copies them in, `spec` rebuilds a JobSpec from them for the
# script's TrialResult. Each is ZEUS_<NAME> in the script's environment.
SPEC_FIELDS = tuple(f.name for f in settings_of(JobSpec) if f.setting.trial)

ENV_VARS = {
    "batch_size": "ZEUS_BATCH_SIZE",
    **{name: f"ZEUS_{name.upper()}" for name in SPEC_FIELDS},
    "cost_threshold": "ZEUS_COST_THRESHOLD",
    "warmup_iters": "ZEUS_WARMUP_ITERS",
    "profile_iters": "ZEUS_PROFILE_ITERS",
    "min_window_s": "ZEUS_MIN_WINDOW_S",
    "use_optimal_limit": "ZEUS_USE_OPTIMAL_PL",
    "log_dir": "ZEUS_LOG_DIR",
    "data_dir": "ZEUS_DATA_DIR",
    "gpu": "ZEUS_GPU",
    "profile_path": "ZEUS_PROFILE_PATH",
    "seed": "ZEUS_SEED",
    "threshold_file": "ZEUS_THRESHOLD_FILE",
}


class TrialEnvError(FieldError):
    """A ZEUS_* variable is missing or malformed; names the variable and what it allows."""


def _bool(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes")


@dataclass(frozen=True)
class TrialEnv:
    """One trial's settings as a Zeus-aware script sees them: the trial's own, and the job settings of
    SPEC_FIELDS, declared here too (this class is the script's API) with the JobSpec's types and defaults
    (tests/test_job_fields.py holds the two to each other)."""

    batch_size: int
    target_metric: float
    max_epochs: int
    log_dir: str
    metric_name: str = "accuracy"
    higher_is_better: bool = True
    eta_knob: float = 0.5
    max_power_w: float = 300.0
    num_gpus: int = 1
    cost_threshold: float | None = None
    warmup_iters: int = 10
    profile_iters: int = 40
    # Shortest profiling window in seconds; None: the GPU backend's (1 s on NVML, whose energy counter
    # advances in ~100 ms steps; 0 on the simulated GPU). See zeus_kfp.power.profiler.
    min_window_s: float | None = None
    use_optimal_limit: bool = True
    data_dir: str | None = None
    gpu: str = "auto"
    profile_path: str | None = None
    job_id: str = "local"
    # The trial's own seed (zeus_kfp.seeds.trial_seed): a script may seed its RNGs with it, so a trial is
    # reproducible and a retried one draws the same data order.
    seed: int | None = None
    # Where the train step keeps the live threshold (zeus_kfp.train.live_threshold): read at every epoch end,
    # it lowers `cost_threshold` once a concurrent recurrence reaches cheaper. In the trial's work directory,
    # or in a cluster trial's pods the ConfigMap's mounted file. None: the dispatched one only.
    threshold_file: str | None = None

    def __post_init__(self) -> None:
        if not valid_min_window_s(self.min_window_s):
            raise TrialEnvError("min_window_s", self.min_window_s, MIN_WINDOW_ALLOWED)

    @classmethod
    def for_trial(cls, spec: JobSpec, *, batch_size: int, log_dir: str, **overrides: object) -> TrialEnv:
        """The settings of one trial of `spec` (what the runner hands to a Zeus-aware script)."""
        carried = {name: getattr(spec, name) for name in SPEC_FIELDS}
        return cls(batch_size=batch_size, log_dir=log_dir, **carried, **overrides)

    def to_env(self) -> dict[str, str]:
        out = {}
        for field, name in ENV_VARS.items():
            value = getattr(self, field)
            if value is None:
                continue
            out[name] = ("1" if value else "0") if isinstance(value, bool) else str(value)
        return out

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TrialEnv:
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        kinds = {f: t for f, t in cls.__annotations__.items()}
        for field, name in ENV_VARS.items():
            raw = env.get(name)
            if raw is None or raw == "":
                continue
            kind = kinds[field]
            try:
                if "bool" in kind:
                    values[field] = _bool(raw)
                elif kind.startswith("int"):
                    values[field] = int(raw)
                elif kind.startswith("float"):
                    values[field] = float(raw)
                    if not math.isfinite(values[field]):
                        raise ValueError(raw)
                else:
                    values[field] = raw
            except ValueError:
                raise TrialEnvError(name, raw, f"a {kind.split(' ')[0]}") from None
        for field in ("batch_size", "target_metric", "max_epochs", "log_dir"):
            if field not in values:
                raise TrialEnvError(ENV_VARS[field], None, "a value (set by the train step; required)")
        if not valid_min_window_s(values.get("min_window_s")):
            raise TrialEnvError(ENV_VARS["min_window_s"], env.get(ENV_VARS["min_window_s"]), MIN_WINDOW_ALLOWED)
        return cls(**values)

    @property
    def cost_model(self) -> CostModel:
        """How this trial is priced (TrialResult.build takes the env itself: it carries the metric's name too)."""
        return CostModel(eta=self.eta_knob, max_power_w=self.max_power_w, num_gpus=self.num_gpus)

    def current_threshold(self) -> float | None:
        """The early-stop threshold now: `cost_threshold`, lowered by the live threshold file when it holds a
        lower one (a missing or unreadable file changes nothing)."""
        return current_threshold(self.cost_threshold, self.threshold_file)

    def reached(self, metric: float) -> bool:
        """Whether `metric` meets the job's target, in the job's direction."""
        return meets_target(metric, self.target_metric, higher_is_better=self.higher_is_better)

    def check(self) -> TrialEnv:
        """This env, its job settings checked by the job's own rules (JobSpec's): a variable out of range
        is a TrialEnvError naming it, before the trial starts. Returns self."""
        try:
            carried = {name: getattr(self, name) for name in SPEC_FIELDS}
            JobSpec(batch_sizes=(self.batch_size,), default_batch_size=self.batch_size, **carried)
        except JobSpecError as exc:
            field = ENV_VARS.get(exc.field, exc.field)
            raise TrialEnvError(field, exc.value, exc.allowed) from None
        return self
