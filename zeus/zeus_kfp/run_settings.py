"""How a run of a job runs, beside what the job is: `RunSettings` travels with a `JobSpec`, never inside it.

A JobSpec is the job's identity (zeus_kfp.job): its first recurrence stores it, and a later run that presents a
different one is refused, because the bandit's history is only comparable under one spec. Run settings say when a
run opens a recurrence and how long a trial may go unheard of: the recurrence gate's period, cap and drift detector
(zeus_kfp.steps.gate) and the dispatch timeout (zeus_kfp.steps.abandoned). They may differ from one schedule or
submission of the job to the next, so they are never stored with the job and never compared with the stored spec;
each gated begin entry records the ones it ran under (zeus_kfp.store.gating). Optuna draws the same line: a Study
is what is optimized, `optimize(n_trials, timeout, ...)` how one call runs.

Declared like the JobSpec's settings (`setting(...)`, zeus_kfp.settings): the gate component's parameters, the
pipeline's run parameters and the CLI's options derive from these fields.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from zeus_kfp.errors import JobSpecError, require
from zeus_kfp.settings import INT64_MAX, is_int, is_number, setting

NO_DRIFT = "none"
# The built-in drift detectors (zeus_kfp.steps.drift_detectors), each with its default threshold on its statistic:
# a data fingerprint that changed (1) or not (0); the relative change of the row count; the largest per-column PSI
# (0.2: the usual "significant shift"); the largest per-column Kolmogorov-Smirnov statistic. Or module:function.
DRIFT_DETECTORS = {"none": None, "fingerprint": 0.5, "rows": 0.1, "psi": 0.2, "ks": 0.1}
DRIFT_FUNCTION = re.compile(r"^[^\s:]+:[A-Za-z_]\w*$")
DRIFT_ALLOWED = f"one of {', '.join(DRIFT_DETECTORS)}, or a function module:function or /path/file.py:function"
# The default `dispatch_timeout_s`: a day. A recurring job's trial that runs longer than its own
# period (nightly at most, as a rule) would overlap the next recurrence anyway; raise it for longer ones.
DEFAULT_DISPATCH_TIMEOUT_S = 24 * 3600.0
DISPATCH_TIMEOUT_ALLOWED = "a number of seconds >= 0 (0: every unfinished trial of another attempt counts as lost)"


def _number(value: Any) -> bool:
    return is_number(value) and math.isfinite(value)


def check_dispatch_timeout(value: object) -> float:
    """The dispatch timeout as a float, or JobSpecError naming dispatch_timeout_s (the bandit step takes this one
    run setting alone)."""
    require(_number(value) and value >= 0, "dispatch_timeout_s", value, DISPATCH_TIMEOUT_ALLOWED)  # type: ignore[operator]
    return float(value)  # type: ignore[arg-type]


@dataclass(frozen=True)
class RunSettings:
    """How a run of the job runs: when the recurrence gate opens a recurrence, and when an unfinished trial is lost.
    Every field has a default, so `RunSettings()` is a run that is always due, one at a time, without drift."""

    period_s: float = setting(
        "Seconds between recurrences: a run opens one once this long has passed since the last one began, or on "
        "drift; otherwise it is skipped and trains nothing (0: every run is due).",
        0.0,
    )
    max_running: int = setting(
        "Recurrences of the job running at once at most, counted in the store across every schedule and "
        "submission; a run past it is skipped (0: no cap).",
        1,
    )
    drift_detector: str = setting(
        "What detects drift in drift_data, which opens a recurrence before its period: none, fingerprint, rows, "
        "psi, ks, or a function module:function.",
        NO_DRIFT,
    )
    drift_threshold: float = setting(
        "The detector's statistic above which the data drifted (0: the detector's default: fingerprint 0.5, "
        "rows 0.1, psi 0.2, ks 0.1, a function 0).",
        0.0,
    )
    drift_data: str = setting(
        "The input data the drift detector reads: a Parquet or CSV file, or a directory of them.", ""
    )
    dispatch_timeout_s: float = setting(
        "Seconds after which a trial that never reported (its process was killed or lost) is recorded failed by "
        "the next bandit step, and its recurrence no longer holds a slot under max_running (default a day; 0 when "
        "nothing else runs the job).",
        DEFAULT_DISPATCH_TIMEOUT_S,
        option="dispatch-timeout",
    )

    def __post_init__(self) -> None:
        period, cap, threshold, detector = self.period_s, self.max_running, self.drift_threshold, self.drift_detector
        require(_number(period) and period >= 0, "period_s", period, "a number of seconds >= 0 (0: every run is due)")
        require(is_int(cap) and cap >= 0, "max_running", cap, f"an integer from 0 to {INT64_MAX} (0: no cap)")
        known = isinstance(detector, str) and (detector in DRIFT_DETECTORS or DRIFT_FUNCTION.fullmatch(detector))
        require(bool(known), "drift_detector", detector, DRIFT_ALLOWED)
        require(_number(threshold) and threshold >= 0,
                 "drift_threshold", threshold, "a number >= 0 (0: the detector's default)")  # fmt: skip
        require(isinstance(self.drift_data, str), "drift_data", self.drift_data, "a path (a string)")
        wanted = f"a Parquet or CSV file or directory for the {detector!r} detector to read"
        require(detector == NO_DRIFT or bool(self.drift_data), "drift_data", self.drift_data, wanted)
        object.__setattr__(self, "period_s", float(period))
        object.__setattr__(self, "drift_threshold", float(threshold))
        object.__setattr__(self, "dispatch_timeout_s", check_dispatch_timeout(self.dispatch_timeout_s))

    @property
    def gate_threshold(self) -> float:
        """The drift threshold the gate applies: the setting, else the built-in detector's default (a user
        function's default is 0: any positive statistic is drift)."""
        return self.drift_threshold or DRIFT_DETECTORS.get(self.drift_detector) or 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSettings:
        """From a dict (pipeline parameters, options); unknown keys are an error, not silently dropped."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise JobSpecError(unknown[0], data[unknown[0]], f"one of the run settings {sorted(known)}")
        return cls(**data)

    def with_changes(self, **changes: Any) -> RunSettings:
        return replace(self, **changes)
