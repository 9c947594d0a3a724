"""The recurrence gate's cap under concurrency: two schedules and manual submissions of one job start runs at
once, each in its own process calling the gate step's function on a real store (a local directory, and S3
through the stand-ins: SeaweedFS-like racy, whose conditional PUT is a check-then-write; Kubeflow 1.10's
MinIO, which ignores the condition; Kubeflow 1.11's least-privilege per-namespace key). The store takes no lock:
each gate appends its request, and the log's agreed slot order decides (zeus/zeus_kfp/store/gating.py). The cap must
hold in every round, every process must be told what the store holds, and the numbers stay dense."""

from __future__ import annotations

import pytest
from store_workers import gate_run, run_clients

from zeus_kfp.store import open_store

STORES = [
    "local",
    "racy",
    "ignored",
    "least-privilege",
]  # Kubeflow 1.10's MinIO ignores conditions; 1.11's key is namespaced
CAP = 2
ROUNDS = 2
# Two schedules' ticks and a manual `submit --force`, two runs of each per round: six gates racing for two slots.
PLANS = [(who, CAP, ROUNDS) for who in ("schedule-a", "schedule-b", "submit") for _ in range(2)]


@pytest.mark.slow
@pytest.mark.parametrize("any_store_uri", STORES, indirect=True)
def test_two_schedules_and_a_manual_submit_never_exceed_the_cap(any_store_uri):
    job = "gate-race"
    reports, _ = run_clients(gate_run, list(enumerate(PLANS)), [job], any_store_uri, 0, True)
    errors = [r[2] for r in reports if r[0] == "error"]
    assert not errors, errors[0]
    store = open_store(any_store_uri)
    runs = store.recurrences(job)
    assert len(runs) == len(PLANS) * ROUNDS  # every gate asked once
    for round_ in range(ROUNDS):
        mine = runs[runs["recurrence_id"].str.endswith(f"-r{round_}")]
        # Nothing runs when a round starts (the last round's recurrences reached), and nothing ends during it:
        # exactly CAP of its six runs open a recurrence, the rest are skipped for want of a slot, forced or not.
        assert int(mine["opened"].sum()) == CAP
        assert set(mine.loc[~mine["opened"], "why"]) == {"no free slot"}
    # each process was told what the store holds for its run
    told = {rid: opened for _, _, answers in reports for rid, opened in answers}
    assert told == dict(zip(runs["recurrence_id"], runs["opened"], strict=True))
    assert runs.loc[runs["opened"], "recurrence"].tolist() == list(range(1, CAP * ROUNDS + 1))  # dense, in slot order
    trials = store.trials(job)
    assert sorted(trials["recurrence_id"]) == sorted(runs.loc[runs["opened"], "recurrence_id"])  # only opened ones
    assert store.problems == []
