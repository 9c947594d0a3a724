"""Which generated jobs one policy costs more on than another, beyond the noise of a few simulations.

Why: "cheaper on every job" compared by the mean of a few simulations per job counts a job as lost when a
policy's mean came out 0.1 % higher by chance, and a job whose cost has a heavy tail (one trapped run in
ten) can go either way on five runs. With the same simulation seeds for both policies a job's runs are
pairs, and a one-sided paired t-test on the log of the cost asks whether the policy costs more on that
job; over hundreds of jobs the Benjamini-Hochberg procedure (scipy's `false_discovery_control`) keeps the
share of false findings among the jobs called costlier at the chosen rate. Simulated costs only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import false_discovery_control, ttest_1samp

FALSE_DISCOVERY_RATE = 0.05  # the usual 5 %: about one job in twenty of those flagged may be flagged by chance


@dataclass(frozen=True)
class PairedVerdict:
    """Per job, in the order given: whether the policy costs significantly more, or less, than the baseline."""

    costlier: tuple[bool, ...]
    cheaper: tuple[bool, ...]


def paired_verdict(
    ours: Sequence[Sequence[float]], baseline: Sequence[Sequence[float]], rate: float = FALSE_DISCOVERY_RATE
) -> PairedVerdict:
    """`ours[j][k]` and `baseline[j][k]`: job j's cost in simulation k (the same seed for both). Each direction
    is tested on its own, one-sided, and corrected over the jobs at false-discovery rate `rate`. A job whose
    runs are equal pair for pair (a test has no spread to judge) is neither."""
    if len(ours) != len(baseline):
        count = f"{len(ours)} jobs against the baseline's {len(baseline)}"
        raise ValueError(f"invalid ours: {count}: allowed the same count")
    if not 0.0 < rate < 1.0:
        raise ValueError(f"invalid rate={rate!r}: allowed a number between 0 and 1")
    diffs = []
    for j, (a, b) in enumerate(zip(ours, baseline, strict=True)):
        if len(a) != len(b) or len(a) < 2:
            raise ValueError(f"invalid runs of job {j}: {len(a)} and {len(b)}: allowed the same count, at least 2")
        diffs.append(np.log(np.asarray(a, dtype=float)) - np.log(np.asarray(b, dtype=float)))
    return PairedVerdict(_flags(diffs, "greater", rate), _flags(diffs, "less", rate))


def _flags(diffs: list[np.ndarray], side: str, rate: float) -> tuple[bool, ...]:
    tested = [j for j, d in enumerate(diffs) if not np.allclose(d, 0.0, rtol=0.0, atol=1e-12)]
    out = [False] * len(diffs)
    if not tested:
        return tuple(out)
    p = np.array([_p_value(diffs[j], side) for j in tested])
    adjusted = false_discovery_control(p)
    for j, q in zip(tested, adjusted, strict=True):
        out[j] = bool(q <= rate)
    return tuple(out)


def _p_value(diff: np.ndarray, side: str) -> float:
    """The one-sided paired p-value; a difference with no spread is certain in its own direction."""
    if np.allclose(diff, diff[0], rtol=0.0, atol=1e-12):  # a t statistic needs a spread
        return 0.0 if (diff[0] > 0) == (side == "greater") else 1.0
    return float(ttest_1samp(diff, 0.0, alternative=side).pvalue)  # the paired test on the differences
