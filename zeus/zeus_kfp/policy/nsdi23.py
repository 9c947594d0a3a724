"""`zeus-nsdi23`: Zeus's published batch-size policy, kept as the baseline the default must beat.

Faithful to ml-energy/zeus `PruningGTSBatchSizeOptimizer` (zeus/_legacy/policy/optimizer.py):
`num_pruning_rounds` rounds of pruning exploration from the default batch size, then Gaussian
Thompson sampling over the survivors, where each arm's rewards are every observation of that
size (windowed to the last `window_size`), including the not-reached ones from exploration.
Zeus keeps that as mutable optimizer state; here it is computed from the history (zeus_kfp.policy.tally: the
walk and each arm's count, sum and spread of costs), rebuilt from the whole history on every call.

Concurrency (Zeus's `concurrency=True`, its Alibaba-trace simulation and its batch-size server):
while an exploration trial is in flight, another recurrence gets the cheapest converged size so far
(or the default), never a second copy of the exploration slot; its result joins the arm's rewards but
does not advance the walk unless it is the size the walk waits for. Such a concurrent trial never
holds the exploration back, even if it is never reported (Zeus's server gives it its own trial type,
which its explorer does not read): the exploration of the size the walk waits for is a trial of that
size dispatched after the walk's last step (`concurrent_exploration`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zeus_kfp.job import JobSpec
from zeus_kfp.policy.base import ArmState, Decision
from zeus_kfp.policy.gts import Posterior, posterior, posterior_of, thompson_pick
from zeus_kfp.policy.history import HistoryView, decision_rng, read_history
from zeus_kfp.policy.pruning import PruningState, feasible_default
from zeus_kfp.trials import Trial


def concurrent_exploration(spec: JobSpec, view: HistoryView, state: PruningState) -> Decision | None:
    """Zeus's rule for a recurrence that overlaps an exploration trial (zeus-nsdi23): while the size the
    walk waits for is being explored elsewhere, run the cheapest converged size (or the default) rather
    than a duplicate exploration slot. None when it is not. (`default` has its own rule, which also
    explores meanwhile: zeus_kfp.policy.turning_walk.)

    The size is being explored when a trial of it, dispatched after the observation that made the walk
    wait for it, has no result yet (the dispatch order is the trial number). A trial of that size
    dispatched before then was a concurrent one (the walk was exploring another size): unreported, it
    does not hold the exploration back, as in Zeus's server, where a concurrent trial has its own type.
    The one case a history cannot tell apart: a concurrent trial of that size handed out after the walk's
    last step was dispatched but before its result came back counts as the exploration. A concurrent
    trial runs the cheapest converged size, which is where a new round starts, so there the batch size
    handed out is the same either way (round 2's 512 in tests/policy/test_zeus_server_scenario.py)."""
    expected = state.expected
    assert expected is not None  # only while exploring
    if not view.in_flight(expected, after=state.waiting_since):
        return None
    size = view.best_reached_size or feasible_default(view.feasible, spec.default_batch_size)
    return Decision(
        size,
        view.threshold(spec),
        "exploration-concurrent",
        f"exploration of {expected} is in flight; running the cheapest converged size {size}",
    )


class ZeusNSDI23Policy:
    """Pruning exploration, then Gaussian Thompson sampling (Zeus, NSDI'23)."""

    name = "zeus-nsdi23"

    @staticmethod
    def _pruning(view: HistoryView) -> PruningState:
        walk = view.tally.pruning_walk()
        assert walk is not None  # a view exists only while some size is feasible
        return walk.pruning_state()

    @staticmethod
    def _posterior(spec: JobSpec, view: HistoryView, batch_size: int) -> Posterior:
        """The arm's posterior over its mean reward (-cost), from every observation or the window's."""
        if spec.window_size > 0:
            return posterior(-np.array([entry[0] for entry in view.window(batch_size)], dtype=float))
        arm = view.tally.arm(batch_size)
        return posterior_of(arm.n, -arm.total, -arm.mean, arm.m2 / arm.n if arm.n else 0.0)

    def decide(self, spec: JobSpec, history: Sequence[Trial], seed: int) -> Decision:
        view = read_history(spec, history)
        threshold = view.threshold(spec)
        state = self._pruning(view)
        if not state.done:
            concurrent = concurrent_exploration(spec, view, state)
            if concurrent is not None:
                return concurrent
            why = f"pruning round {state.round + 1}: exploring batch size {state.expected}"
            return Decision(state.expected, threshold, "exploration", why)
        arms = list(state.survivors)
        posts = [self._posterior(spec, view, b) for b in arms]
        rng = decision_rng(seed, view.num_records)
        # Zeus needs two observations per arm; a window of one can only ever hold one.
        needed = 1 if spec.window_size == 1 else 2
        batch_size, why = thompson_pick(arms, posts, rng, min_observations=needed)
        return Decision(batch_size, threshold, "exploitation", f"Thompson sampling over {arms}: {why}")

    def stop_threshold(self, spec: JobSpec, history: Sequence[Trial]) -> float | None:
        """Zeus's rule: beta x the lowest spend of a recurrence that reached."""
        return read_history(spec, history).threshold(spec)

    def arm_states(self, spec: JobSpec, history: Sequence[Trial]) -> list[ArmState]:
        view = read_history(spec, history)
        state = self._pruning(view)
        stage = "exploitation" if state.done else "exploration"
        out = []
        for b in spec.batch_sizes:
            post = self._posterior(spec, view, b)
            observed = post.num_observations > 0
            if b not in view.feasible:
                arm_stage, pruned = "oom", True
            else:
                pruned = b not in state.survivors
                arm_stage = "pruned" if pruned else stage
            # posterior_mean is reported as a cost (the negated reward), which is what people read.
            mean = -post.mean if observed else None
            out.append(
                ArmState(b, arm_stage, post.num_observations, mean, post.precision if observed else None, pruned)
            )
        return out
