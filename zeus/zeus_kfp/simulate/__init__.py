"""Trace-driven simulator over the Zeus NSDI'23 traces: how good is a batch-size policy?

Typical use (also what `zeus-kfp simulate` and benchmarks/policy.py do):

    sim = build_simulator("squad", power_trace=shipped_trace("a40"))
    results = simulate_seeds(sim, "default", [1, 2, 3])
    results[0].cost_over_oracle, results[0].rows, results[0].history
"""

from zeus_kfp.cost import Figures
from zeus_kfp.simulate.engine import SimulationResult, Simulator
from zeus_kfp.simulate.trace import SHIPPED_POWER_TRACES, load_workload_trace, shipped_trace
from zeus_kfp.simulate.workload_runs import build_simulator, results_to_json, simulate_seeds, write_json
from zeus_kfp.simulate.workloads import WORKLOADS, Workload, get_workload

__all__ = [
    "SHIPPED_POWER_TRACES",
    "WORKLOADS",
    "Figures",
    "SimulationResult",
    "Simulator",
    "Workload",
    "build_simulator",
    "get_workload",
    "load_workload_trace",
    "results_to_json",
    "shipped_trace",
    "simulate_seeds",
    "write_json",
]
