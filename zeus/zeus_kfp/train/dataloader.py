"""ZeusDataLoader: a torch DataLoader that profiles power limits and enforces the trial's budget.

Why wrap the DataLoader: every training loop already pulls batches from one, so per-step hooks
come for free without touching the user's loop. A Zeus-aware script changes three lines:

    train_loader = ZeusDataLoader(train_set, shuffle=True)        # batch size from ZEUS_BATCH_SIZE
    eval_loader = ZeusDataLoader(eval_set, split="eval", trial=train_loader.trial)
    for epoch in train_loader.epochs():
        for x, y in train_loader: ...
        for x, y in eval_loader: ...
        train_loader.report_metric(accuracy)

A train step is the time between handing out a batch and being asked for the next one, so
it covers the user's forward, backward and optimizer step.

Under torchrun ZEUS_BATCH_SIZE is the *global* batch size: each rank loads its share
(batch_size / world size) through a DistributedSampler (made here unless the script passes a
sampler), and the profiler counts every rank's samples (zeus_kfp.train.distributed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from zeus_kfp.power.gpu import GPU
from zeus_kfp.train.env import TrialEnv
from zeus_kfp.train.session import ZeusTrial

SPLITS = ("train", "eval")


def batch_samples(batch: Any, default: int) -> int:
    """How many samples a batch holds (first tensor's leading dimension)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else default
    if isinstance(batch, (list, tuple)) and batch:
        return batch_samples(batch[0], default)
    if isinstance(batch, dict) and batch:
        return batch_samples(next(iter(batch.values())), default)
    return default


class ZeusDataLoader(DataLoader):
    """A DataLoader configured by the ZEUS_* environment (see zeus_kfp.train.env)."""

    def __init__(
        self,
        dataset: Dataset,
        *,
        split: str = "train",
        trial: ZeusTrial | None = None,
        env: TrialEnv | None = None,
        gpu: GPU | None = None,
        batch_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        if split not in SPLITS:
            raise ValueError(f"invalid split={split!r}: allowed {', '.join(SPLITS)}")
        if trial is None:
            if split == "eval":
                raise ValueError("invalid trial=None for split='eval': allowed the train loader's .trial")
            trial = ZeusTrial(env or TrialEnv.from_env(), gpu=gpu)
        self.trial = trial
        self.split = split
        if batch_size is None:
            batch_size = trial.local_batch_size
        elif split == "train" and batch_size != trial.local_batch_size:
            raise ValueError(
                f"invalid batch_size={batch_size}: allowed only {trial.local_batch_size} "
                f"(ZEUS_BATCH_SIZE={trial.env.batch_size} over {trial.ranks.info.world_size} rank(s); "
                "the batch size is the trial's, chosen by the bandit)"
            )
        info = trial.ranks.info
        if info.distributed and kwargs.get("sampler") is None and kwargs.get("batch_sampler") is None:
            shuffle = bool(kwargs.pop("shuffle", False))  # each rank its own shard, shuffled the same way
            seed = trial.env.seed or 0
            kwargs["sampler"] = DistributedSampler(dataset, info.world_size, info.rank, shuffle=shuffle, seed=seed)
        self._epoch = 0
        super().__init__(dataset, batch_size=batch_size, **kwargs)
        if split == "train":
            trial.num_train_samples = len(dataset)  # type: ignore[arg-type]
            trial.steps_per_epoch = len(self)

    def epochs(self) -> Iterator[int]:
        return self.trial.epochs()

    def report_metric(self, value: float) -> None:
        self.trial.report_metric(value)

    def save_model(self, model: object) -> Any:
        return self.trial.save_model(model)

    def __iter__(self) -> Iterator[Any]:
        self.trial.start()
        profiler = self.trial.profiler
        gpu = self.trial.gpu
        if isinstance(self.sampler, DistributedSampler):
            self.sampler.set_epoch(self._epoch)  # a new shuffle each epoch, the same on every rank
        self._epoch += 1
        batches = super().__iter__()
        default = self.batch_size or 1
        world = self.trial.ranks.global_samples
        if self.split == "eval":
            if profiler is not None:
                profiler.on_eval_begin()
            samples = 0
            for batch in batches:
                n = batch_samples(batch, default)
                yield batch
                gpu.account_work(n)
                samples += n
            if profiler is not None:
                profiler.on_eval_end(world(samples))
            self.trial.eval_samples = world(samples)
            return
        for batch in batches:
            n = batch_samples(batch, default)
            if profiler is not None:
                profiler.on_step_begin()
            yield batch
            gpu.account_work(n)
            if profiler is not None:
                profiler.on_step_end(world(n))  # throughput counts every rank's samples
        if profiler is not None:
            profiler.on_epoch_end()
