"""Batch-size policies: pure functions of (spec, history, seed) -> Decision, selected by name.

`zeus-nsdi23` is Zeus's published policy (the baseline); `default` is this project's own,
measured against it in the same simulator (see benchmarks/policy.py).
"""

from __future__ import annotations

from zeus.policy.base import ArmState, Decision, Policy
from zeus.policy.default import DefaultPolicy
from zeus.policy.history import NoFeasibleBatchSizeError
from zeus.policy.nsdi23 import ZeusNSDI23Policy

_POLICIES: dict[str, type] = {
    DefaultPolicy.name: DefaultPolicy,
    ZeusNSDI23Policy.name: ZeusNSDI23Policy,
}
POLICY_NAMES: tuple[str, ...] = tuple(sorted(_POLICIES))


def get_policy(name: str) -> Policy:
    """The policy called `name`; a ValueError naming the field `policy` and the allowed names otherwise."""
    cls = _POLICIES.get(name)
    if cls is None:
        raise ValueError(f"invalid policy={name!r}: allowed {', '.join(POLICY_NAMES)}")
    return cls()


__all__ = ["POLICY_NAMES", "ArmState", "Decision", "NoFeasibleBatchSizeError", "Policy", "get_policy"]
