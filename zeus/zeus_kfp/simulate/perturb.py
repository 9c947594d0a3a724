"""Perturbed jobs: variants of the measured V100 and A40 traces, generated from a seed.

Why: a policy tuned on the 36 cells of the two traces can learn their six cost curves by heart, and a
user's job is always a curve it has not seen. These jobs keep what the traces say about how training
behaves (integer epochs, runs that miss, the spread between runs, a power curve per batch size) and
change what a rule could have been fitted to:

- epochs to target: every run's count scaled by one factor per job (max_epochs with it), and each run
  noised on its own (rounded to whole epochs, at least one);
- power curves: the power drawn at each limit tilted (which limit is cheapest moves), and each size's
  throughput scaled by its own factor (its per-epoch time and energy alike);
- the cost minimum (`kind`): "moved" to another batch size that always reaches the target, by scaling
  each size's per-epoch time and energy so that the cost curve, read from its minimum, is the measured
  one shifted there; "default-optimal": left where the rest put it, and the default batch size set to
  it (exploring can then only cost); "measured": left where the rest put it.

Only the shipped V100 and A40 traces are sources (the policy is judged on them and on jobs made from
them; other GPUs' traces are a held-out evaluation nobody may fit to). Every figure is simulated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zeus_kfp.job import JobSpec
from zeus_kfp.simulate.engine import Simulator, oracle_batch_size, reaching_figures
from zeus_kfp.simulate.trace import SHIPPED_POWER_TRACES, SizeTrace, WorkloadTrace
from zeus_kfp.simulate.workload_runs import build_simulator
from zeus_kfp.simulate.workloads import WORKLOADS

KINDS = ("measured", "moved", "default-optimal")
ETAS = (0.25, 0.5, 0.75)
# Each range is wide enough that no measured curve's figure is special, narrow enough that the job
# is still a training job: the six workloads' epochs to target span 3 to 80 epochs, their per-size
# throughputs and power curves differ by tens of percent between V100 and A40.
EPOCH_SCALE = (0.5, 2.0)  # the per-job factor on epochs to target (and max_epochs), log-uniform
EPOCH_NOISE = 0.15  # standard deviation of each run's own log-normal factor
POWER_TILT = 0.3  # power at limit p times (p / max limit) ** a, a uniform in [-POWER_TILT, POWER_TILT]
THROUGHPUT_NOISE = 0.1  # standard deviation of each size's log-normal factor on per-epoch time and energy
# Past the end of the measured curve a moved curve needs more sizes: each costs this much more than
# the one before it (the measured curves rise by 1.1x to 2x a step away from their minimum).
EDGE_STEP = 1.1


@dataclass(frozen=True)
class PerturbedJob:
    """One generated job: where it came from, how it was changed, and what to simulate."""

    index: int
    workload: str
    gpu: str
    kind: str
    spec: JobSpec
    trace: WorkloadTrace

    @property
    def name(self) -> str:
        return f"#{self.index} {self.workload}/{self.gpu} eta {self.spec.eta_knob} ({self.kind})"

    @property
    def far_valley(self) -> bool:
        """Whether the job's cost curve has a valley past a real rise from its default size (`has_far_valley`)."""
        return has_far_valley(
            run_costs(self.spec, self.trace), self.trace.batch_sizes.index(self.spec.default_batch_size)
        )

    def simulator(self) -> Simulator:
        source = f"simulated (perturbed job {self.index} from {self.workload}/{self.gpu})"
        return Simulator(self.spec, self.trace, source)


def perturbed_job(seed: int, index: int, kind: str | None = None) -> PerturbedJob:
    """Job `index` of the set generated from `seed`: the same arguments give the same job in any process.
    Its source cell and eta are drawn; its kind cycles through KINDS unless given."""
    rng = np.random.default_rng([seed, index])
    sources = [(w, g) for g in SHIPPED_POWER_TRACES for w in WORKLOADS]
    workload, gpu = sources[int(rng.integers(len(sources)))]
    eta = ETAS[int(rng.integers(len(ETAS)))]
    kind = KINDS[index % len(KINDS)] if kind is None else kind
    if kind not in KINDS:
        raise ValueError(f"invalid kind={kind!r}: allowed {', '.join(KINDS)}")
    source = build_simulator(workload, power_trace=gpu, eta=eta)
    spec, trace = perturb(source.spec.with_changes(job_id=f"perturbed-{seed}-{index}"), source.trace, rng, kind)
    return PerturbedJob(index, workload, gpu, kind, spec, trace)


def perturb(spec: JobSpec, trace: WorkloadTrace, rng: np.random.Generator, kind: str) -> tuple[JobSpec, WorkloadTrace]:
    """`spec` and `trace` changed as the module docstring says, with randomness from `rng`."""
    scale = math.exp(rng.uniform(math.log(EPOCH_SCALE[0]), math.log(EPOCH_SCALE[1])))
    tilt = rng.uniform(-POWER_TILT, POWER_TILT)
    spec = spec.with_changes(max_epochs=max(1, math.ceil(spec.max_epochs * scale)))
    sizes = {}
    for b in trace.batch_sizes:
        size = trace.sizes[b]
        noisy = size.target_epochs * scale * np.exp(rng.normal(0.0, EPOCH_NOISE, size.target_epochs.size))
        epochs = np.where(np.isnan(noisy), np.nan, np.maximum(1.0, np.round(noisy)))
        power = size.energy_per_epoch / size.time_per_epoch * (size.power_limits / trace.max_power_w) ** tilt
        time = size.time_per_epoch * math.exp(rng.normal(0.0, THROUGHPUT_NOISE))
        sizes[b] = SizeTrace(b, epochs, size.power_limits, time, time * power)
    trace = WorkloadTrace(sizes, trace.power_limits, trace.max_power_w)
    if kind == "default-optimal":
        return spec.with_changes(default_batch_size=oracle_batch_size(spec, trace)), trace
    if kind == "moved":
        # Another size than the minimum, and than the default where there is one (that is "default-optimal").
        others = [b for b in reaching_figures(spec, trace) if b != oracle_batch_size(spec, trace)]
        others = [b for b in others if b != spec.default_batch_size] or others
        if others:
            trace = move_minimum(spec, trace, others[int(rng.integers(len(others)))])
    return spec, trace


def run_costs(spec: JobSpec, trace: WorkloadTrace) -> np.ndarray:
    """Per size (ascending): the expected cost of one run at the size's cheapest power limit, a run that
    misses counted at max_epochs. The cost curve a moved minimum keeps the shape of."""
    out = []
    for b in trace.batch_sizes:
        size = trace.sizes[b]
        epochs = np.minimum(np.nan_to_num(size.target_epochs, nan=spec.max_epochs), spec.max_epochs)
        per_epoch = spec.cost_model.cost(size.energy_per_epoch, size.time_per_epoch)
        out.append(float(epochs.mean() * per_epoch.min()))
    return np.asarray(out)


def has_far_valley(costs: Sequence[float], default_index: int) -> bool:
    """Whether a cost curve (per size, ascending) has a size cheaper than where a walk from the default
    settles, past a real rise: walking each way from `default_index` while the cost falls, then any size
    beyond the first one that rises. Why: a policy that ends a direction at a rise (turning-walk, once its
    probes judge the rise real) cannot reach such a valley, while zeus-nsdi23, which walks on through a rise
    until a size misses or its early stop cuts one short, finds it behind any bump lower than that.
    benchmarks/policy.py counts these jobs among those a policy costs more on (benchmarks/RESULTS.md)."""
    for step in (-1, 1):
        k = default_index
        while 0 <= k + step < len(costs) and costs[k + step] < costs[k]:
            k += step
        beyond = costs[k + 2 :] if step > 0 else costs[: max(k - 1, 0)]  # past the size that rises
        if len(beyond) and min(beyond) < costs[k]:
            return True
    return False


def move_minimum(spec: JobSpec, trace: WorkloadTrace, to: int) -> WorkloadTrace:
    """`trace` with its cost curve (`run_costs`) shifted along the sizes so its minimum lies at size `to`:
    the size k steps from `to` costs what the size k steps from the old minimum did, relative to the
    minimum (past the measured curve's end, EDGE_STEP more per step). Done by scaling each size's
    per-epoch time and energy, so epochs, misses and the choice of power limit are left as they are;
    `to` itself is unchanged. The oracle moves to `to` when `to` always reaches the target."""
    sizes = trace.batch_sizes
    costs = run_costs(spec, trace)
    ratios = costs / costs.min()
    shift = sizes.index(to) - int(np.argmin(costs))
    out = {}
    for j, b in enumerate(sizes):
        k = j - shift
        edge = min(max(k, 0), len(sizes) - 1)
        wanted = costs[sizes.index(to)] * ratios[edge] * EDGE_STEP ** abs(k - edge)
        factor = wanted / costs[j]
        size = trace.sizes[b]
        out[b] = SizeTrace(
            b, size.target_epochs, size.power_limits, size.time_per_epoch * factor, size.energy_per_epoch * factor
        )
    return WorkloadTrace(out, trace.power_limits, trace.max_power_w)
