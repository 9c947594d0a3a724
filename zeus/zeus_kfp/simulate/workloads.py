"""The six NSDI'23 workloads with the job settings Zeus used for them (shared/traces/README.md)."""

from __future__ import annotations

from dataclasses import dataclass

from zeus_kfp.job import JobSpec
from zeus_kfp.simulate.trace import WorkloadTrace, cached_trace, load_workload_trace, shipped_trace

# Zeus's simulator gives up on a recurrence after 20 tries; the simulated jobs use the same limit.
ZEUS_MAX_TRIES = 20


@dataclass(frozen=True)
class Workload:
    """A trace workload: which trace rows it is, and the job settings Zeus simulated it with."""

    name: str
    dataset: str
    network: str
    optimizer: str
    target_metric: float
    max_epochs: int
    default_batch_size: int

    def spec(self, trace: WorkloadTrace, *, seed: int = 0, eta: float = 0.5, beta: float | None = 2.0) -> JobSpec:
        """The job as simulated on `trace`: b0 clamped to the largest size the GPU's trace has."""
        sizes = trace.batch_sizes
        below = [b for b in sizes if b <= self.default_batch_size]
        b0 = below[-1] if below else sizes[0]
        return JobSpec(
            job_id=f"sim-{self.name}",
            batch_sizes=sizes,
            default_batch_size=b0,
            target_metric=self.target_metric,
            max_epochs=self.max_epochs,
            eta_knob=eta,
            beta_knob=beta,
            max_attempts=ZEUS_MAX_TRIES,
            seed=seed,
            max_power_w=trace.max_power_w,
        )


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("librispeech", "librispeech", "deepspeech2", "adamw", 40.0, 16, 192),
        Workload("cifar100", "cifar100", "shufflenetv2", "adadelta", 0.6, 100, 1024),
        Workload("imagenet", "imagenet", "resnet50", "adadelta", 0.65, 100, 256),
        Workload("squad", "squad", "bert_base_uncased", "adamw", 84.0, 6, 32),
        Workload("sentiment140", "sentiment140", "bert_base_uncased", "adamw", 0.84, 10, 128),
        Workload("movielens-1m", "movielens-1m", "ncf", "adam", 0.41, 100, 1024),
    )
}


def get_workload(name: str) -> Workload:
    """The workload called `name`; a ValueError naming the field `workload` and the allowed names otherwise."""
    if name not in WORKLOADS:
        raise ValueError(f"invalid workload={name!r}: allowed {', '.join(WORKLOADS)}")
    return WORKLOADS[name]


def load_shipped(workload: str, gpu: str) -> WorkloadTrace:
    """A workload's trace on one of the shipped GPUs (SHIPPED_POWER_TRACES)."""
    w = get_workload(workload)
    train = cached_trace(str(shipped_trace("train")), "train")
    power = cached_trace(str(shipped_trace(gpu)), "power")
    return load_workload_trace(
        train, power, dataset=w.dataset, network=w.network, optimizer=w.optimizer, target_metric=w.target_metric
    )
