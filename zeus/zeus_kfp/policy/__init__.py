"""Batch-size policies: pure functions of (spec, history, seed) -> Decision, selected by name.

Policies are named by their algorithm. `zeus-nsdi23` is Zeus's published policy (the baseline);
`turning-walk` is this project's own, measured against it in the same simulator
(benchmarks/policy.py). `default` is an alias for the recommended policy, so a run parameter or a
schedule that says `default` follows the recommendation, and the stored decisions name the algorithm
that actually decided.
"""

from __future__ import annotations

from zeus_kfp.policy.base import ArmState, Decision, Policy
from zeus_kfp.policy.history import NoFeasibleBatchSizeError
from zeus_kfp.policy.nsdi23 import ZeusNSDI23Policy
from zeus_kfp.policy.turning_walk import TurningWalkPolicy

_POLICIES: dict[str, type] = {
    TurningWalkPolicy.name: TurningWalkPolicy,
    ZeusNSDI23Policy.name: ZeusNSDI23Policy,
}
POLICY_NAMES: tuple[str, ...] = tuple(sorted(_POLICIES))  # the algorithms
ALIASES: dict[str, str] = {"default": TurningWalkPolicy.name}
ALLOWED_POLICIES = ", ".join([*POLICY_NAMES, *(f"{alias} (= {name})" for alias, name in ALIASES.items())])


def policy_label(name: str) -> str:
    """How output names a policy: an alias with the algorithm it stands for, e.g. 'default (turning-walk)'."""
    return f"{name} ({ALIASES[name]})" if name in ALIASES else name


def get_policy(name: str) -> Policy:
    """The policy called `name` (an algorithm's name or an alias); a ValueError naming the field `policy`
    and the allowed names otherwise."""
    cls = _POLICIES.get(ALIASES.get(name, name))
    if cls is None:
        raise ValueError(f"invalid policy={name!r}: allowed {ALLOWED_POLICIES}")
    return cls()


__all__ = [
    "ALIASES",
    "ALLOWED_POLICIES",
    "POLICY_NAMES",
    "ArmState",
    "Decision",
    "NoFeasibleBatchSizeError",
    "Policy",
    "get_policy",
]
