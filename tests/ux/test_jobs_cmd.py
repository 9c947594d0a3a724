"""`zeus-kfp jobs` / `zeus-kfp show` and `recurrence_report` against a real local store."""

from __future__ import annotations

import json
import re

import pytest
from PIL import Image
from typer.testing import CliRunner

from ux.frames import SPEC
from ux.store_data import populate
from zeus_kfp.cli import app
from zeus_kfp.steps.report import recurrence_report
from zeus_kfp.store import open_store

BASELINE = 25000.0 * 2.9 / 2.75  # see test_report.py


@pytest.fixture
def store_dir(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "220")  # rich wraps tables to the terminal width
    path = tmp_path / "store"
    store = open_store(str(path))
    populate(store)
    other = SPEC.with_changes(job_id="resnet-weekly")
    store.ensure_job(other, owner="bob")
    store.set_phase(other.job_id, "completed")
    return path


def run(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_jobs_lists_and_filters(store_dir) -> None:
    result = run("jobs", "--store", str(store_dir))
    assert result.exit_code == 0, result.output
    assert re.search(r"^mnist-nightly\s+running\s+128\s+accuracy >= 0.9\s+32,64,128,256\s+alice", result.output, re.M)
    assert re.search(r"^resnet-weekly\s+completed\s+128\s+accuracy >= 0.9\s+32,64,128,256\s+bob", result.output, re.M)
    completed = run("jobs", "--store", str(store_dir), "--phase", "completed")
    assert "resnet-weekly" in completed.output and "mnist-nightly" not in completed.output
    mine = run("jobs", "--store", str(store_dir), "--owner", "alice")
    assert "mnist-nightly" in mine.output and "resnet-weekly" not in mine.output


def test_jobs_json_is_the_store_listing(store_dir) -> None:
    result = run("jobs", "--store", str(store_dir), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    listed = {job["job_id"]: (job["owner"], job["phase"], job["batch_sizes"]) for job in data["jobs"]}
    assert listed == {
        "mnist-nightly": ("alice", "running", [32, 64, 128, 256]),
        "resnet-weekly": ("bob", "completed", [32, 64, 128, 256]),
    }


def test_jobs_rejects_an_unknown_phase_naming_the_allowed_ones(store_dir) -> None:
    result = CliRunner().invoke(app, ["jobs", "--store", str(store_dir), "--phase", "done"])
    assert result.exit_code == 2
    assert "invalid phase='done'" in result.output and "'running', 'completed'" in result.output


def test_jobs_reads_the_store_from_the_environment(store_dir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEUS_KFP_STORE", str(store_dir))
    assert "mnist-nightly" in run("jobs").output


def test_show_prints_trials_savings_profile_state_and_writes_plots(store_dir, tmp_path) -> None:
    plots = tmp_path / "plots"
    result = run("show", "mnist-nightly", "--store", str(store_dir), "--plots", str(plots))
    assert result.exit_code == 0, result.output
    out = result.output
    # Trial 3: 12 kJ in 60 s at eta 0.5 and 300 W: 0.5 * 12000 + 0.5 * 300 * 60 = 15,000 J.
    assert re.search(r"^\s+2\s+2\s+256\s+200 W\s+15 k\s+reached\s+12 kJ\s+1 min\s+0\.91\s+3\s+3\s+run-2", out, re.M)
    # Recurrence 2: 64 (5 kJ, 30 s, 7,000 J) then 256 (12 kJ, 60 s, 15,000 J).
    assert re.search(r"^\s+2\s+yes\s+64 -> 256\s+22 k\s+17 kJ\s+1\.5 min\s+run-2", out, re.M)
    assert f"saving vs the default config: recurrence 3 {1 - 13750 / BASELINE:+.1%}" in out
    assert "power profile" in out and "where the bandit stands" in out
    # The default policy's view of the trials, worked by hand: 64's miss (7,000 J) is charged the retry
    # at 256 it forced (15,000 J), 22 k; 256 reached twice, (15,000 + 13,750) / 2; 32 is only dispatched.
    assert re.search(r"^\s+32\s+skipped\s+0\s+-\s+yes", out, re.M)
    assert re.search(r"^\s+64\s+pruned\s+1\s+22 k\s+yes", out, re.M)
    assert re.search(r"^\s+128\s+exploitation\s+1\s+25 k\s+no", out, re.M)
    assert re.search(r"^\s+256\s+exploitation\s+2\s+14\.4 k\s+no", out, re.M)
    assert "figures: simulated GPU" in out
    written = sorted(p.name for p in plots.iterdir())
    assert written == ["batch_size_per_trial.png", "cost_per_recurrence.png", "posterior.png", "power_profile.png"]
    for path in plots.iterdir():
        with Image.open(path) as img:
            assert img.format == "PNG" and img.size[0] >= 600
        assert str(path) in out


def test_show_a_job_without_trials(store_dir) -> None:
    result = run("show", "resnet-weekly", "--store", str(store_dir))
    assert result.exit_code == 0 and "no trials yet" in result.output


def test_show_an_unknown_job_says_how_to_list_them(store_dir) -> None:
    result = CliRunner().invoke(app, ["show", "nope", "--store", str(store_dir)])
    assert result.exit_code == 2
    assert "no job 'nope'" in result.output and "zeus-kfp jobs --store" in result.output


def test_recurrence_report_reads_the_store(store_dir, tmp_path) -> None:
    latest = recurrence_report(str(store_dir), "mnist-nightly", None, tmp_path / "latest")
    assert latest.metrics["cost"] == pytest.approx(13750.0)
    assert latest.metrics["energy_j"] == pytest.approx(11000.0)
    assert latest.metrics["time_s"] == pytest.approx(55.0)
    assert latest.metrics["saving_percent"] == pytest.approx(100 * (1 - 13750.0 / BASELINE), rel=1e-5)
    assert "## Recurrence 3 (`run-3`)" in latest.markdown and "**Simulated GPU.**" in latest.markdown
    assert len(latest.plots) == 4 and all(p.parent == tmp_path / "latest" for p in latest.plots)
    second = recurrence_report(str(store_dir), "mnist-nightly", "run-2", tmp_path / "second")
    assert second.metrics["cost"] == pytest.approx(22000.0) and second.metrics["trials"] == 2.0
    assert "## Recurrence 2 (`run-2`)" in second.markdown
    with pytest.raises(ValueError, match="recurrence_id='run-7'"):
        recurrence_report(str(store_dir), "mnist-nightly", "run-7", tmp_path / "bad")


def test_jobs_and_show_read_an_s3_store(s3_store_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same commands against the S3 server on 127.0.0.1 (credentials from ZEUS_S3_* env only)."""
    monkeypatch.setenv("COLUMNS", "220")
    monkeypatch.setenv("ZEUS_S3_SECRET_KEY", "sekret-xyz-123")  # the test server accepts any key
    populate(open_store(s3_store_uri))
    listed = run("jobs", "--store", s3_store_uri)
    assert listed.exit_code == 0 and "mnist-nightly" in listed.output
    shown = run("show", "mnist-nightly", "--store", s3_store_uri)
    assert shown.exit_code == 0, shown.output
    assert f"saving vs the default config: recurrence 3 {1 - 13750 / BASELINE:+.1%}" in shown.output
    assert "sekret-xyz-123" not in shown.output + listed.output


def test_show_keeps_long_histories_readable(store_dir) -> None:
    result = run("show", "mnist-nightly", "--store", str(store_dir), "--last", "2")
    assert result.exit_code == 0, result.output
    assert "trials (last 2 of 5; --last to see more)" in result.output
    assert "recurrences (last 2 of 3; --last to see more)" in result.output
    assert not re.search(r"\brun-1\b", result.output.split("recurrences (last")[1].split("default config")[0])
    # The saving still uses the whole history (the baseline comes from recurrence 1).
    assert f"saving vs the default config: recurrence 3 {1 - 13750 / BASELINE:+.1%}" in result.output


def test_compact_writes_one_snapshot_then_finds_nothing_to_do_and_show_reads_the_same(store_dir) -> None:
    before = run("show", SPEC.job_id, "--store", str(store_dir), "--json").output
    first = run("compact", SPEC.job_id, "--store", str(store_dir))
    assert first.exit_code == 0 and "wrote a snapshot of slots 1.." in first.output
    assert list((store_dir / "jobs" / SPEC.job_id / "snapshots").glob("*.parquet"))
    again = run("compact", SPEC.job_id, "--store", str(store_dir))
    assert again.exit_code == 0 and "already compact" in again.output
    assert run("show", SPEC.job_id, "--store", str(store_dir), "--json").output == before
    unknown = CliRunner().invoke(app, ["compact", "nope", "--store", str(store_dir)])
    assert unknown.exit_code == 2 and "no job 'nope'" in unknown.output


def test_show_lists_the_gates_answers_with_the_drift_statistic(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each run the recurrence gate answered: the recurrence it opened and why, or why it was skipped, and the
    statistic its drift detector stored (what the gate compared with the threshold)."""
    from zeus_kfp.store import GateRequest

    monkeypatch.setenv("COLUMNS", "220")
    store = open_store(str(tmp_path / "store"))
    spec = SPEC.with_changes(job_id="gated")
    store.ensure_job(spec)

    def ask(rid: str, stat: float | None) -> None:  # never due by time (period 1e9 s), one at a time
        request = GateRequest(1e9, 1, spec.max_attempts, 86400.0, False, "psi", stat, 0.2)
        store.open_recurrence(spec.job_id, rid, request)
        store.end_recurrence(spec.job_id, rid, "done")  # frees the slot: the next run is judged on drift alone

    ask("run-a", None)
    ask("run-b", 0.05)
    ask("run-c", 0.4375)
    result = run("show", "gated", "--store", str(tmp_path / "store"))
    assert result.exit_code == 0, result.output
    assert re.search(r"^\s*1\s+opened: first\s+psi n/a \(threshold 0\.2\)\s.*run-a\s*$", result.output, re.M), (
        result.output
    )
    assert re.search(r"^\s*-\s+skipped: no drift\s+psi 0\.05 \(threshold 0\.2\)\s.*run-b\s*$", result.output, re.M)
    assert re.search(r"^\s*2\s+opened: drift\s+psi 0\.4375 \(threshold 0\.2\)\s.*run-c\s*$", result.output, re.M)
    data = json.loads(run("show", "gated", "--store", str(tmp_path / "store"), "--json").output)
    assert [(r["recurrence"], r["why"], r["drift_stat"]) for r in data["runs"]] == [
        (1, "first", None), (None, "no drift", 0.05), (2, "drift", 0.4375),
    ]  # fmt: skip
    assert store.drift_recurrences("gated") == [2]
