"""zeus_kfp.simulate.paired: which jobs a policy costs more on than the baseline, beyond the noise of a few runs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from zeus_kfp.simulate.paired import paired_verdict


def noisy(rng: np.random.Generator, level: float, runs: int = 10) -> np.ndarray:
    """`runs` costs around `level`, each with its own 5 % log-normal noise."""
    return level * np.exp(rng.normal(0.0, 0.05, runs))


def test_a_job_costing_half_again_as_much_is_costlier_and_a_tie_is_neither() -> None:
    rng = np.random.default_rng(7)
    base = [noisy(rng, 100.0) for _ in range(3)]
    ours = [base[0] * 1.5, base[1] * np.exp(rng.normal(0.0, 0.05, 10)), base[2] / 1.5]
    verdict = paired_verdict(ours, base)
    assert verdict.costlier == (True, False, False)
    assert verdict.cheaper == (False, False, True)


def test_one_trapped_run_in_ten_raises_the_mean_but_is_not_a_significant_loss() -> None:
    """The heavy tail seen on generated jobs (benchmarks/HISTORY.md): cheaper in nine runs, trapped in one."""
    base = [np.full(10, 100.0)]
    ours = [np.array([90.0] * 9 + [400.0])]
    assert np.mean(ours[0]) > np.mean(base[0])
    verdict = paired_verdict(ours, base)
    assert verdict.costlier == (False,) and verdict.cheaper == (False,)


def test_the_correction_over_many_jobs_drops_a_finding_one_test_alone_would_make() -> None:
    """Job 0's p-value is under 5 % by itself; among 40 ties (p near 0.5) Benjamini-Hochberg needs it below
    5 % x 1/41, so it is not flagged. The reference p-value is scipy's one-sample test on the differences."""
    diff = np.array([0.05, 0.02, 0.04, -0.01, 0.03, 0.01, 0.02, 0.0, 0.03, -0.02])
    alone = stats.ttest_1samp(diff, 0.0, alternative="greater").pvalue
    assert 0.05 / 41 < alone < 0.05
    rng = np.random.default_rng(3)
    base = [np.full(10, 100.0)] + [noisy(rng, 100.0) for _ in range(40)]
    ours = [base[0] * np.exp(diff)] + [b[::-1].copy() for b in base[1:]]
    assert paired_verdict(ours[:1], base[:1]).costlier == (True,)
    assert paired_verdict(ours, base).costlier[0] is False


def test_bad_input_names_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        paired_verdict([[1.0]], [[1.0]])
    with pytest.raises(ValueError, match="same count"):
        paired_verdict([[1.0, 2.0]], [])
    with pytest.raises(ValueError, match="rate"):
        paired_verdict([[1.0, 2.0]], [[1.0, 2.0]], rate=1.5)
