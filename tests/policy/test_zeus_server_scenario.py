"""Zeus's own server test of the pruning stage, replayed through `zeus-nsdi23`.

ml-energy/zeus, tests/optimizer/batch_size/test_server.py, `test_exploration_stage`: two pruning rounds
from the default 1024 over [32, 64, 256, 512, 1024, 2048, 4096]. Before each exploration result is
reported, a second request comes in (a concurrent job); its trial is never reported. Each exploration
converges at random (2 in 3), except 1024 and 512, which always do, 512 the cheapest (12 s against
14.438 s), so round 2 starts from 512. The test asserts that every first request gets the next size
of the walk (down from the round's default, then up; a miss ends the direction) and that the second
request during the exploration of 512 in round 1 gets 1024.

What this catches: the concurrent trials of round 1 (at 1024 and 512) are still unreported when round
2 explores 1024; they must not count as an exploration of 1024 in flight (Zeus hands out 1024, not the
cheapest size).
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.policy import get_policy
from zeus_kfp.trials import Trial

# Zeus's test job (tests/optimizer/batch_size/conftest.py, Helpers.get_fake_job_config): its cost is
# eta * energy + (1 - eta) * max_power * time with max_power 3000 (Zeus prices time at `max_power` as
# given; here that is one GPU at 3000 W).
ZEUS_JOB = JobSpec(
    job_id="test-exploration-stage",
    batch_sizes=(32, 64, 256, 512, 1024, 4096, 2048),
    default_batch_size=1024,
    target_metric=0.5,
    max_epochs=100,
    eta_knob=0.5,
    beta_knob=2.0,
    num_pruning_rounds=2,
    window_size=5,
    seed=1,
    max_power_w=3000.0,
)
ENERGY_J = 3000.123


def _finished(trial: Trial, converged: bool, time_s: float) -> Trial:
    """The trial as Zeus's report leaves it (98 epochs and converged, or 100 = max_epochs and not)."""
    cost = ZEUS_JOB.cost_model.cost(ENERGY_J, time_s)
    status = TrialStatus.REACHED if converged else TrialStatus.NOT_REACHED
    return dataclasses.replace(trial, status=status, cost=cost, time_s=time_s, energy_j=ENERGY_J)


def _concurrent_size(round_: int, bs: int) -> int:
    """What Zeus hands the second request while `bs` is being explored.

    Zeus's test writes `assert response.json()["batch_size"] == cur_default_bs if trial == 1 and bs == 512
    else 512`, which Python reads as `(assert ... == 1024) if ... else 512`: it checks 1024 during round 1's
    exploration of 512, and nothing (the constant 512) elsewhere. Zeus's server (explorer.py, a dispatched
    exploration -> CreateConcurrentTrial at `job.min_cost_batch_size`, the default until a result comes
    and then the cheapest one reported) gives 1024 during round 1's 1024 and 512 too, and 512 from then on,
    which is the 512 the test's else branch names."""
    return 1024 if round_ == 1 and bs in (1024, 512) else 512


def replay_exploration_stage(rng: random.Random) -> tuple[list[tuple[int, int, int]], list[Trial], set]:
    """Zeus's test_exploration_stage step by step through zeus-nsdi23: (trial, Zeus's size, ours) per
    request, the history at the end, and the (round, direction) of each exploration that missed.
    Convergence is drawn from `rng` as Zeus's test draws it."""
    policy = get_policy("zeus-nsdi23")
    history: list[Trial] = []
    steps: list[tuple[int, int, int]] = []
    misses: set[tuple[int, str]] = set()

    def request(expected: int) -> Trial:
        number = len(history) + 1  # the dispatch order is the trial number
        decision = policy.decide(ZEUS_JOB, history, ZEUS_JOB.seed)
        steps.append((number, expected, decision.batch_size))
        history.append(Trial(number, number, decision.batch_size, TrialStatus.DISPATCHED))
        return history[-1]

    default, sizes = 1024, [32, 64, 256, 512, 1024, 4096, 2048]  # Zeus's order, as its test indexes it
    for round_ in (1, 2):
        idx = sizes.index(default)
        down, up = sorted(sizes[: idx + 1], reverse=True), sorted(sizes[idx + 1 :])
        converged_sizes = []
        for name, direction in (("down", down), ("up", up)):
            for bs in direction:
                explored = request(bs)
                request(_concurrent_size(round_, bs))  # never reported
                converged, time_s = rng.choice([True, True, False]), 14.438
                if bs == 1024:
                    converged = True
                if bs == 512:
                    converged, time_s = True, 12.0
                history[explored.trial - 1] = _finished(explored, converged, time_s)
                if not converged:
                    misses.add((round_, name))
                    break
                converged_sizes.append(bs)
        sizes, default = sorted(converged_sizes), 512
    return steps, history, misses


@pytest.mark.parametrize("draws", range(12))
def test_zeus_exploration_stage_proposes_what_zeus_proposes(draws):
    steps, history, _ = replay_exploration_stage(random.Random(draws))
    wrong = [(n, want, got) for n, want, got in steps if want != got]
    assert not wrong, f"(trial, Zeus's size, ours) where they differ: {wrong}"
    # Round 2 explored 1024 while round 1's concurrent trials at 1024 (trials 2 and 4) were unreported.
    unreported = [t.trial for t in history if t.status == TrialStatus.DISPATCHED and t.batch_size == 1024]
    assert unreported[:2] == [2, 4]
    # Both rounds are done: Zeus goes on to its bandit (explorer.py returns the converged sizes).
    assert get_policy("zeus-nsdi23").decide(ZEUS_JOB, history, ZEUS_JOB.seed).stage == "exploitation"


def test_the_draws_cover_a_miss_in_each_direction_of_each_round():
    """The draws above end a direction early, down and up, in both rounds: the scenario is not only the
    walk where everything converges."""
    covered = set().union(*(replay_exploration_stage(random.Random(draws))[2] for draws in range(12)))
    assert covered == {(1, "down"), (1, "up"), (2, "down"), (2, "up")}
