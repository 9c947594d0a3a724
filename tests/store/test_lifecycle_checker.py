"""The lifecycle checker (lifecycle_checker.py) at a small size, with fixed seeds: a job deleted and made again
while a compactor and readers work on it, under the seed's interleaving and faults.

Each run replays from its seed: `.venv/bin/python benchmarks/store_checkers.py --size small --checkers lifecycle
--seeds 17` replays seed 17. benchmarks/store_checkers.py runs it at full size (figures in benchmarks/RESULTS.md).
"""

from __future__ import annotations

from collections import Counter

import pytest
from checkers import Outcome, run

# The suite's seed count (about 0.3 s a run on one idle core); the benchmark's --runs sets another.
SEEDS = range(40)
MET = ("deletes", "snapshots written", "reads answered", "reads told an error", "crashes", "failed lists")


@pytest.fixture(scope="module")
def outcomes() -> list[Outcome]:
    return [run("lifecycle", seed) for seed in SEEDS]


def test_no_run_finds_a_violation(outcomes):
    found = [(o.seed, v) for o in outcomes for v in o.violations]
    replay = ".venv/bin/python benchmarks/store_checkers.py --size small --checkers lifecycle --seeds"
    assert not found, f"{len(found)} violations; replay with `{replay} {found[0][0]}`:\n" + "\n".join(
        f"seed {seed}: {violation}" for seed, violation in found[:20]
    )


def test_the_runs_deleted_under_readers_and_compactions_and_met_faults(outcomes):
    """A run in which no delete met a reader or a compaction, or no fault struck, would pass vacuously."""
    counts = sum((o.counts for o in outcomes), Counter())
    assert all(counts[kind] for kind in MET), counts
    assert counts["runs"] == len(SEEDS) and counts["deletes"] >= len(SEEDS), counts


def test_a_run_replays_exactly_from_its_seed():
    first, again = run("lifecycle", 5), run("lifecycle", 5)
    assert (first.digest, first.counts, first.violations) == (again.digest, again.counts, again.violations)
    assert run("lifecycle", 6).digest != first.digest
