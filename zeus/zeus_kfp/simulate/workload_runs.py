"""Entry points over the engine: build a simulator for a named workload, run seeds, write JSON.

The CLI and benchmarks/policy.py both go through here, so they measure the same thing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from zeus_kfp.policy import get_policy
from zeus_kfp.simulate.engine import SimulationResult, Simulator
from zeus_kfp.simulate.trace import SHIPPED_POWER_TRACES, cached_trace, load_workload_trace, shipped_trace
from zeus_kfp.simulate.workloads import get_workload


def build_simulator(
    workload: str,
    *,
    train_trace: str | Path | None = None,
    power_trace: str | Path | None = None,
    eta: float = 0.5,
    beta: float | None = 2.0,
    max_attempts: int | None = None,
) -> Simulator:
    """A simulator for a named workload (see WORKLOADS) on the given traces (default: shipped train + V100).

    `power_trace` is a CSV path or the name of a shipped GPU trace (v100, a40). max_attempts: tries per
    recurrence (None: Zeus's 20; `zeus-kfp run` compiles 5 attempts)."""
    w = get_workload(workload)
    if power_trace is not None and str(power_trace) in SHIPPED_POWER_TRACES:
        power_trace = shipped_trace(str(power_trace))
    train = cached_trace(str(train_trace or shipped_trace("train")), "train")
    power = cached_trace(str(power_trace or shipped_trace("v100")), "power")
    trace = load_workload_trace(
        train, power, dataset=w.dataset, network=w.network, optimizer=w.optimizer, target_metric=w.target_metric
    )
    spec = w.spec(trace, eta=eta, beta=beta)
    if max_attempts is not None:
        spec = spec.with_changes(max_attempts=max_attempts)
    label = Path(str(power_trace or "v100")).stem.removeprefix("summary_power_")
    return Simulator(spec, trace, f"simulated (trace: {workload}/{label})")


def simulate_seeds(
    simulator: Simulator, policy: str, seeds: list[int], num_recurrences: int | None = None, in_flight: int = 1
) -> list[SimulationResult]:
    """One simulation per seed under the named policy."""
    chosen = get_policy(policy)
    return [simulator.run(chosen, seed, num_recurrences, in_flight) for seed in seeds]


def results_to_json(results: list[SimulationResult], *, workload: str, train_trace: str, power_trace: str) -> dict:
    """The JSON the CLI writes: figures averaged over seeds at the top, one entry per seed below."""

    def mean(key: str) -> dict[str, float]:
        figs = [getattr(r, key).to_dict() for r in results]
        return {k: float(np.mean([f[k] for f in figs])) for k in figs[0]}

    return {
        "policy_name": results[0].policy,
        "workload": workload,
        "train_trace": train_trace,
        "power_trace": power_trace,
        "num_recurrences": results[0].num_recurrences,
        "policy": mean("totals"),
        "default": mean("default"),
        "oracle": mean("oracle"),
        "cost_over_oracle": float(np.mean([r.cost_over_oracle for r in results])),
        "seeds": [r.to_dict() for r in results],
    }


def write_json(data: dict, path: str | Path) -> None:
    Path(path).write_text(json.dumps(data, indent=1, allow_nan=False))
