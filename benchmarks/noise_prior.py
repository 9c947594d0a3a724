"""Benchmark: the noise of one run's cost, per batch size, as the V100 and A40 traces measure it.

The policy's noise prior (`zeus_kfp.policy.turning_walk.Config.prior_cv`, `prior_weight`) says how noisy one
run of a size is before the job has repeated any. Here it is fitted to the traces: for each (workload, batch
size) with at least three runs that reached the target, the sample variance of epochs-to-target relative to
their mean (a run's cost is its epochs times a per-epoch cost, so the cost's relative noise is the epochs').
The sizes' true variances are modelled as scaled inverse chi-square (nu, s0^2), the conjugate prior whose nu
is its weight in runs; each sample variance over n - 1 degrees of freedom is then s0^2 times an F(n - 1, nu)
variate, and (nu, s0) are fitted by maximum likelihood. A size whose runs all took the same whole number of
epochs has a sample variance of zero, which this continuous model cannot hold: those are counted and left
out (they are low-noise sizes; the upper tail, which decides how often a turn is noise, comes from the rest).

Epochs to target come from summary_train.csv and do not depend on the GPU, so each size counts once.

    .venv/bin/python benchmarks/noise_prior.py
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from scipy.stats import f as f_dist

from zeus_kfp.simulate.trace import SHIPPED_POWER_TRACES
from zeus_kfp.simulate.workloads import WORKLOADS, load_shipped

PROFILED_NU = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 20.0)


def relative_variances() -> tuple[np.ndarray, np.ndarray, int]:
    """(sample relative variances, their degrees of freedom, sizes with zero spread left out)."""
    seen: dict[tuple[str, int], np.ndarray] = {}
    for workload in WORKLOADS:
        for gpu in SHIPPED_POWER_TRACES:
            for size, trace in load_shipped(workload, gpu).sizes.items():
                epochs = trace.target_epochs[~np.isnan(trace.target_epochs)]
                if len(epochs) >= 3:
                    seen[(workload, size)] = epochs
    spread = [(np.var(e, ddof=1) / np.mean(e) ** 2, len(e) - 1) for e in seen.values()]
    kept = [(v, d) for v, d in spread if v > 0]
    return np.array([v for v, _ in kept]), np.array([d for _, d in kept]), len(spread) - len(kept)


def negative_log_likelihood(nu: float, log_s0: float, variances: np.ndarray, dofs: np.ndarray) -> float:
    """-log L of (nu, s0): variance / s0^2 ~ F(dof, nu), with the Jacobian of the scaling."""
    return float(-np.sum(f_dist.logpdf(variances / np.exp(2 * log_s0), dofs, nu) - 2 * log_s0))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="the same run (it takes about a second)")
    parser.parse_args(argv)
    variances, dofs, zeros = relative_variances()
    best = minimize(lambda p: negative_log_likelihood(np.exp(p[0]), p[1], variances, dofs), [np.log(4), np.log(0.1)],
                    method="Nelder-Mead")  # fmt: skip
    nu, s0 = float(np.exp(best.x[0])), float(np.exp(best.x[1]))
    print(f"sizes with >= 3 runs reaching the target: {len(variances) + zeros} ({zeros} with zero spread left out)")
    print(f"sample cv per size: median {np.median(np.sqrt(variances)):.3f}, "
          f"range {np.sqrt(variances.min()):.3f}-{np.sqrt(variances.max()):.3f}")  # fmt: skip
    print(f"fitted noise prior: s0 (cv) {s0:.3f}, nu (weight in runs) {nu:.2f}")
    print("profile likelihood of nu (-log L above the best; above 1.92 lies outside the 95 % interval):")
    for fixed in PROFILED_NU:
        profile = minimize_scalar(lambda ls, nu=fixed: negative_log_likelihood(nu, ls, variances, dofs))
        print(f"  nu {fixed:5.1f}: +{profile.fun - best.fun:.2f}")
    print("reproduce: .venv/bin/python benchmarks/noise_prior.py")


if __name__ == "__main__":
    main()
