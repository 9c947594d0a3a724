"""The one shape of an input error: which field, what value, what is allowed.

Why one class: the job spec, the ZEUS_* trial environment, the GPU backend choice, the store's
identifiers and the cluster commands all report bad input the same way, and the CLI and the
pipeline steps show `field`, `value` and `allowed` without caring which layer raised it.
"""

from __future__ import annotations

from typing import Any


class FieldError(ValueError):
    """`field` has a value that is not allowed; the message says what is."""

    def __init__(self, field_name: str, value: Any, allowed: str) -> None:
        self.field = field_name
        self.value = value
        self.allowed = allowed
        super().__init__(f"invalid {field_name}={value!r}: allowed {allowed}")


class JobSpecError(FieldError):
    """A job setting is out of range. Carries the field so callers (CLI, pipeline) can point at it.
    (Here, not in zeus_kfp.job, so that zeus_kfp.profiles, which zeus_kfp.job's TrialOutcome holds, can raise it.)"""


def require(ok: bool, field_name: str, value: Any, allowed: str) -> None:
    """JobSpecError naming `field_name` and what is allowed, unless `ok`: the one check every setting's
    validation (zeus_kfp.job, zeus_kfp.run_settings) goes through."""
    if not ok:
        raise JobSpecError(field_name, value, allowed)
