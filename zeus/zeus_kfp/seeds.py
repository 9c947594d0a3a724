"""Every random stream of a job, derived from (job seed, recurrence number, attempt).

Why derived, not drawn: the bandit and train steps run in fresh processes and may be retried,
recurrences may overlap, and the simulator replays the same job. A stream derived from where it
is used (which job seed, which recurrence, which attempt, for what) gives the same decision and
the same trace-backed trial in all of them: a retried step asks the same question with the same
seed, and `zeus-kfp run` and `zeus-kfp simulate` agree trial for trial (tests/simulate/test_equivalence.py).

The recurrence is the store's recurrence *number* (1, 2, ...), not the KFP run id: numbers are
what the simulator has too, and a retried step gets the same number back from the store.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from zeus_kfp.errors import FieldError

_DECISION, _TRIAL = 0, 1  # one stream per purpose, so a decision never shares draws with a trial


def _derive(job_seed: int, recurrence: int, attempt: int, purpose: int) -> int:
    """A 31-bit seed (it travels as a KFP int parameter) from the four numbers, well mixed."""
    entropy = [int(job_seed) % 2**64, int(recurrence), int(attempt), purpose]
    return int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint32)[0]) & 0x7FFFFFFF


def decision_seed(job_seed: int, recurrence: int, attempt: int) -> int:
    """The seed the bandit hands the policy for one attempt of one recurrence."""
    return _derive(job_seed, recurrence, attempt, _DECISION)


def trial_seed(job_seed: int, recurrence: int, attempt: int) -> int:
    """The seed of one trial's own randomness (a trace-backed trial's training path; ZEUS_SEED for scripts)."""
    return _derive(job_seed, recurrence, attempt, _TRIAL)


def seed_list(words: Iterable[str]) -> list[int]:
    """Job seeds from words, each a non-negative integer or an inclusive range A-B (numpy refuses negative
    seeds): what `zeus-kfp simulate --seeds` and the benchmarks' `--seeds` take."""
    seeds: list[int] = []
    for word in words:
        first, dash, last = word.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()) or (dash and int(last) < int(first)):
            raise FieldError(
                "seeds", word, "non-negative integers or ranges A-B with A <= B, e.g. --seeds 1 2 3 or 0-19"
            )
        seeds.extend(range(int(first), int(last or first) + 1))
    return seeds
