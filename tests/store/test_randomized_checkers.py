"""The randomized interleaving checkers (checkers.py, interleave.py) at a small size, with fixed seeds.

Each run replays from its seed, so a failure here names seeds that fail the same way on any machine, at
any load: `.venv/bin/python benchmarks/store_checkers.py --size small --checkers log --seeds 17` replays
seed 17.
The suite runs the CI size below (about 3 s on one core, every fault kind met); benchmarks/store_checkers.py
runs the same checkers at any size: `--size small --first-seed 0 --runs 300 --checkers consensus` is what the
suite ran before (consensus 300, log 150, store 60 seeds), and without options its full size (figures in
benchmarks/RESULTS.md).
"""

from __future__ import annotations

from collections import Counter

import pytest
from checkers import Outcome, run
from interleave import Faults, MemoryBackend, Scheduler, deterministic, unavailable

from zeus_kfp.store import StoreUnavailableError

# CPU seconds: consensus 0.2, log 0.9, store 1.5; every fault kind is met at least 4 times in each checker.
SEEDS = {"consensus": range(100), "log": range(50), "store": range(20)}
FAULT_KINDS = ("lost answers", "late PUTs", "late PUTs landed", "failed lists", "failed gets", "slow lists", "crashes")


@pytest.fixture(scope="module")
def outcomes() -> dict[str, list[Outcome]]:
    """Each checker's runs, made when a test first asks for that checker (`-k log` makes the log checker's only)."""

    class Lazy(dict):
        def __missing__(self, name: str) -> list[Outcome]:
            self[name] = [run(name, seed) for seed in SEEDS[name]]
            return self[name]

    return Lazy()


@pytest.mark.parametrize("checker", list(SEEDS))
def test_no_run_of_a_checker_finds_a_violation(outcomes, checker):
    found = [(o.seed, v) for o in outcomes[checker] for v in o.violations]
    replay = f".venv/bin/python benchmarks/store_checkers.py --size small --checkers {checker} --seeds"
    assert not found, f"{len(found)} violations; replay with `{replay} {found[0][0]}`:\n" + "\n".join(
        f"seed {seed}: {violation}" for seed, violation in found[:20]
    )


@pytest.mark.parametrize("checker", list(SEEDS))
def test_the_runs_met_every_fault_and_got_answers_despite_them(outcomes, checker):
    """A checker that injected nothing, or whose workers were never answered, would pass vacuously."""
    counts = sum((o.counts for o in outcomes[checker]), Counter())
    assert all(counts[kind] for kind in FAULT_KINDS), counts
    answered = {"consensus": "proposes answered", "log": "appends acknowledged", "store": "dispatches answered"}
    assert counts[answered[checker]] > counts["runs"], counts


@pytest.mark.parametrize("checker", list(SEEDS))
def test_a_run_replays_exactly_from_its_seed(checker):
    first, again = run(checker, 5), run(checker, 5)
    assert (first.digest, first.counts, first.violations) == (again.digest, again.counts, again.violations)
    assert run(checker, 6).digest != first.digest


def _one_request(scheduler: Scheduler, op: str, *args: object) -> object:
    """What one worker's single request came back as (its result or its error)."""
    got: list[object] = []

    def body(backend) -> None:
        try:
            got.append(getattr(backend, op)(*args))
        except StoreUnavailableError as exc:
            got.append(exc)

    scheduler.run([body])
    return got[0]


def test_a_late_put_is_answered_with_an_error_and_lands_only_later():
    scheduler = Scheduler(0, Faults(late_put=1.0, land=0.0))
    assert isinstance(_one_request(scheduler, "put", "a/k", b"x"), StoreUnavailableError)
    assert scheduler.memory.objects == {} and scheduler.late == [("a/k", b"x")]
    scheduler.land_late()
    assert scheduler.memory.objects == {"a/k": b"x"}


def test_a_slow_list_shows_every_key_there_when_it_began_and_any_that_landed_meanwhile():
    shown: set[str] = set()
    for seed in range(12):
        memory = MemoryBackend()
        memory.put("a/1", b"")

        def lister(backend) -> None:
            shown.add(",".join(backend.list("a/")))

        def writer(backend) -> None:
            backend.put("a/2", b"")

        Scheduler(seed, Faults(slow_list=1.0), memory).run([lister, writer])
    assert shown == {"a/1", "a/1,a/2"}  # a/1 always; a/2 on some seeds only (landed while the LIST ran)


def test_deterministic_restores_the_protocols_clock_and_randomness():
    from zeus_kfp.store import consensus

    before = (consensus.time, consensus.random, consensus.uuid)
    with deterministic(3):
        assert consensus.time is not before[0]
    assert (consensus.time, consensus.random, consensus.uuid) == before
    assert "injected" in str(unavailable("x"))
