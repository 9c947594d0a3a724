"""`show` and `fleet` say a job's failed trials the same way on every line, through the `zeus-kfp` console script.

The store is a real one in a temporary directory, its trials written through the Store's public API (a crash, a
trial lost with no figures, a recurrence that failed once and then reached), so the numbers are known by hand:
cost = 0.5 * energy + 0.5 * 300 W * time (ux.frames.SPEC).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from ux.cli_process import run_cli
from ux.frames import SPEC
from zeus_kfp.job import Decision, TrialResult
from zeus_kfp.store import open_store

JOB = SPEC.job_id
# (recurrence, batch size, status, energy J, time s): r1 reached at the default; r2 crashed (160 J, 2 s: cost 380);
# r3's trial was lost, recorded failed with no figures; r4 failed once (100 J, 1 s: cost 200) then reached.
TRIALS = [
    (1, 128, "reached", 20000.0, 100.0),
    (2, 128, "failed", 160.0, 2.0),
    (3, 64, "failed", 0.0, 0.0),
    (4, 64, "failed", 100.0, 1.0),
    (4, 128, "reached", 18000.0, 90.0),
]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("failed-figures")
    store = open_store(str(work / "store"))
    store.ensure_job(SPEC)
    attempts: dict[int, int] = {}
    for recurrence, batch_size, status, energy_j, time_s in TRIALS:
        rid = f"run-{recurrence}"
        store.begin_recurrence(JOB, rid)
        attempt = attempts[recurrence] = attempts.get(recurrence, 0) + 1
        store.dispatch_trial(JOB, rid, attempt, Decision(batch_size, None, "exploration", "by hand"))
        result = TrialResult.build(SPEC, batch_size=batch_size, status=status, time_s=time_s, energy_j=energy_j,
                                   num_epochs=3, metric=0.95 if status == "reached" else None, simulated=True,
                                   source="simulated (GPU model)")  # fmt: skip
        store.finish_trial(JOB, rid, attempt, result)
    return work


def show(work: Path, *args: str) -> str:
    proc = run_cli("show", JOB, "--store", "store", *args, cwd=work, COLUMNS="160")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_every_row_of_a_failed_recurrence_carries_what_its_trials_spent(work):
    text = show(work, "--wide")
    rows = {}
    for line in text.split("recurrences\n")[1].splitlines()[2:6]:
        cells = line.split()
        rows[int(cells[0])] = cells
    # recurrence, reached, batch sizes, cost, energy, time: the failed trials' own figures, never 0 J in 0 s
    assert rows[2][1:8] == ["failed", "128", "380", "160", "J", "2", "s"]
    assert rows[3][1:8] == ["failed", "64", "0", "0", "J", "0", "s"]
    assert rows[4][1:9] == ["yes", "64", "->", "128", "22.7", "k", "18.1", "kJ"]  # 200 + 22500 J; 100 + 18000 J
    assert rows[4][9:11] == ["1.52", "min"]  # 1 + 90 s


def test_the_failed_runs_line_counts_what_it_says_and_the_cumulative_line_names_both(work):
    text = show(work)
    (waste,) = [line for line in text.splitlines() if line.startswith("failed runs")]
    assert waste == (
        "failed runs (no model; left out of the saving): 3 trial(s) in 3 recurrence(s), 2 of them with no other "
        "trial: cost 580 J, energy 260 J, time 3 s"
    )
    (summary,) = [line for line in text.splitlines() if "cumulative" in line]
    assert summary.endswith("over 2 counted, 2 failed and left out")
    data = json.loads(show(work, "--json"))
    assert data["failed"] == {
        "trials": 3, "energy_j": 260.0, "cost": 580.0, "time_s": 3.0, "recurrences_left_out": [2, 3]
    }  # fmt: skip
    assert [r["saving"] is None for r in data["saving"]["per_recurrence"]] == [False, True, True, False]


def test_fleet_counts_the_same_failed_trials_and_plots_into_a_directory_or_a_png(work):
    (work / "plots").mkdir()
    proc = run_cli("fleet", "--store", "store", "--json", "--plot", "plots", cwd=work)
    assert proc.returncode == 0, proc.stderr
    (job,) = json.loads(proc.stdout)["jobs"]
    assert (job["failed_trials"], job["failed_recurrences"], job["failed_energy_j"]) == (3, 2, 260.0)
    assert job["simulated"] is True
    png = work / "plots" / "fleet.png"
    assert proc.stderr.strip() == f"wrote {Path('plots') / 'fleet.png'}" and png.is_file()
    title = Image.open(png).text["Title"]
    assert "simulated: no GPU was measured" in title
    named = run_cli("fleet", "--store", "store", "--plot", "out/saved", cwd=work, COLUMNS="160")
    assert named.returncode == 0, named.stderr
    assert (work / "out" / "saved.png").is_file() and not (work / "out" / "saved").exists()
    assert "total" in named.stdout  # the table too, after the plot
    again = run_cli("fleet", "--store", "store", "--plot", "out/saved.png", cwd=work)
    assert again.returncode == 0 and not (work / "out" / "saved.png.png").exists()
