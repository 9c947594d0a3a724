"""What a person reads: a short trace-backed run into a tmp store, its piped output, and `show`/`jobs`
at 80 columns (the console script as a real process, output piped: not a terminal)."""

from __future__ import annotations

import json
import re

import pytest
from rich.console import Console

from ux.cli_process import run_cli
from zeus_kfp.cli.tables import Column, fitted
from zeus_kfp.report.units import si
from zeus_kfp.store import open_store

ANSI = "\x1b["
# recurrence, attempt, batch size, power limit, cost (J, SI prefix), status: every essential cell whole
TRIAL_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+) W\s+(\d+(?:\.\d+)?)(?: ([kMG]))?\s+([a-z_]+)(?:\s|$)")
SCALE = {None: 1.0, "k": 1e3, "M": 1e6, "G": 1e9}


@pytest.mark.slow
def test_a_short_trace_run_reads_well_piped_and_at_80_columns(tmp_path) -> None:
    """One run (the slow part) feeds every check: a test each would run it once per xdist worker."""
    args = ["run", "--trace", "squad/v100", "-r", "2", "--store", "store", "--runs-dir", "runs", "--plots-dir", "plots"]
    proc = run_cli(*args, cwd=tmp_path, COLUMNS="80")
    assert proc.returncode == 0, proc.stderr
    shown = run_cli("show", "example", "--store", "store", "--json", cwd=tmp_path)  # read by two checks
    assert shown.returncode == 0, shown.stderr
    check_the_piped_run(proc)
    check_show_at_80_columns(tmp_path)
    check_jobs_at_80_columns_and_the_machine_forms(tmp_path, json.loads(shown.stdout))
    check_one_baseline_everywhere(proc, tmp_path, json.loads(shown.stdout))


def check_one_baseline_everywhere(proc, work, data: dict) -> None:
    """run, show (text and JSON), the plot's dashed line and the KFP report all use one default configuration
    cost, the trace's expectation for a trace-backed job (the simulator's "default config" row over 2
    recurrences), and say the same savings."""
    from PIL import Image

    from zeus_kfp.simulate.engine import expected_figures
    from zeus_kfp.simulate.trace_trial import TraceBackend

    spec = open_store(str(work / "store")).get_job("example")
    expected = expected_figures(spec, TraceBackend.parse("trace:squad/v100").trace())[0].cost
    baseline = re.search(r"^default config \(batch size \d+, max power\): (\S+ \S+) a recurrence \(expected from the "
                         r"trace squad/v100", proc.stdout, re.M)  # fmt: skip
    assert baseline is not None and baseline.group(1) == si(expected, "J")
    shown = run_cli("show", "example", "--store", "store", cwd=work, COLUMNS="200")
    saving = [line for line in proc.stdout.splitlines() if line.startswith("saving vs the default config: ")]
    assert len(saving) == 1 and saving[0] in shown.stdout and baseline.group(0) in shown.stdout
    assert data["default_config_cost"]["cost"] == expected
    assert f"{data['saving']['cumulative']:+.1%}" in saving[0]
    table = re.search(r"^\s+default config\s+(\S+ \S+)\s", proc.stdout, re.M)  # the simulator's row, 2 recurrences
    assert table is not None and table.group(1) == si(2 * expected, "").strip()
    with Image.open(work / "plots" / "example" / "cost_per_recurrence.png") as png:
        assert png.text["Description"].startswith(f"default config: {expected!r} J")
        assert png.text["Title"].endswith(", simulated (trace: squad/v100)")  # the tables' words
        assert "y: cost (J, eta=0.5)" in png.text["Comment"]
    reports = list((work / "runs" / "example").glob("local-*/*/report-after-attempt-*/markdown"))
    assert len(reports) == 2 and all(f"would cost about {expected:,.1f}" in r.read_text() for r in reports)
    assert "posterior sd (J)" in shown.stdout and "e-0" not in shown.stdout + proc.stdout  # no 2.013e-08


def table_rows(text: str, title: str) -> list[str]:
    """The body rows of the table printed under `title` (up to the next blank-ish line or note)."""
    lines = text.splitlines()
    start = lines.index(title)
    rule = next(i for i in range(start, len(lines)) if set(lines[i]) == {"─"})
    rows = []
    for line in lines[rule + 1 :]:
        if not line.strip() or (line.startswith("  ") and not line.strip()[0].isdigit()):
            break
        rows.append(line)
    return rows


def check_the_piped_run(proc) -> None:
    """One plain line per step, no ANSI, tables within 80 columns and nothing cut."""
    assert ANSI not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    for i in (1, 2):  # "[i/2] recurrence i: step": the run's count, then the job's recurrence number, once known
        steps = [line[len(f"[{i}/2] ") :] for line in proc.stdout.splitlines() if line.startswith(f"[{i}/2] ")]
        named = [re.sub(r" \(batch size \d+, \w+\)$", "", s) for s in steps[1:]]
        assert steps[0].startswith("starting (local-")
        assert named == ["gate", "preprocess"] + [
            f"recurrence {i}: {step}"
            for step in ("attempt 1: bandit", "attempt 1: train", "attempt 1: feedback", "report")
        ]
        assert re.search(r": attempt 1: train \(batch size \d+, exploration\)$", steps[4])
        assert f"\nrecurrence {i}: reached the target" in proc.stdout  # the table says the same number
    tables = proc.stdout.split("recurrence 1: ")[1].split("cumulative over")[0]
    assert max(len(line) for line in tables.splitlines()) <= 80 and "…" not in tables


def check_show_at_80_columns(work) -> None:
    """`COLUMNS=80 zeus-kfp show example`: no batch size, power limit, cost or status cut; the source once."""
    proc = run_cli("show", "example", "--store", "store", cwd=work, COLUMNS="80")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert ANSI not in out and "…" not in out
    stored = open_store(str(work / "store")).trials("example")
    rows = table_rows(out, "trials")
    assert len(rows) == len(stored) == 2
    for line, trial in zip(rows, stored.itertuples(index=False), strict=True):
        assert len(line) <= 80
        rec, attempt, batch, watts, cost, prefix, status = TRIAL_ROW.match(line).groups()
        assert (int(rec), int(attempt), int(batch)) == (trial.recurrence, trial.attempt, trial.batch_size)
        assert int(watts) == round(trial.power_limit_w) and status == trial.status
        assert float(cost) * SCALE[prefix] == pytest.approx(trial.cost, rel=5e-3)  # three significant digits
    assert "figures: simulated (trace: squad/v100)" in out
    assert out.count("simulated (trace") == 1  # said once, not per row
    for line in out.splitlines():
        if "─" in line or line.startswith(("recurrence", "batch size", "  ")):
            assert len(line) <= 80, line


def check_jobs_at_80_columns_and_the_machine_forms(work, data: dict) -> None:
    listed = run_cli("jobs", "--store", "store", cwd=work, COLUMNS="80")
    assert listed.returncode == 0 and re.search(r"^example\s+completed\s+32\s", listed.stdout, re.M)
    assert max(len(line) for line in listed.stdout.splitlines()[1:]) <= 80
    wide = run_cli("show", "example", "--store", "store", "--wide", cwd=work, COLUMNS="80")
    assert "recurrence id" in wide.stdout and max(len(line) for line in wide.stdout.splitlines()) > 80
    stored = open_store(str(work / "store")).trials("example")
    assert [t["status"] for t in data["trials"]] == list(stored["status"])
    assert data["cost_unit"] == "J" and data["job"]["job_id"] == "example"


def test_fitted_drops_the_least_important_optional_columns_and_never_an_essential_one() -> None:
    columns = [Column("id", keep=True), Column("status", keep=True), Column("energy"), Column("note")]
    rows = [["1", "cost_exceeded", "12.3 kJ", "a long note"], ["22", "reached", "1 J", "x"]]
    out = Console(width=80)
    # Natural widths 2, 13, 7, 11 plus 3 between columns: 42 wide in all.
    table, hidden = fitted("t", columns, rows, 42)
    assert hidden == [] and len(table.columns) == 4
    table, hidden = fitted("t", columns, rows, 41)
    assert hidden == ["note"] and [c.header for c in table.columns] == ["id", "status", "energy"]
    table, hidden = fitted("t", columns, rows, 10)  # too narrow even for the essentials: they stay whole
    assert hidden == ["energy", "note"]
    with out.capture() as captured:
        out.print(table)
    assert "cost_exceeded" in captured.get() and "…" not in captured.get()
    assert fitted("t", columns, rows, None)[1] == []


def test_an_optional_column_without_any_value_is_left_out_and_not_reported_hidden() -> None:
    columns = [Column("batch size", keep=True), Column("metric"), Column("time")]
    table, hidden = fitted("t", columns, [["32", "-", "2 h"], ["64", "-", "1 h"]], 80)
    assert [c.header for c in table.columns] == ["batch size", "time"] and hidden == []
    table, _ = fitted("t", columns, [["32", "-", "2 h"], ["64", "0.93", "1 h"]], 80)
    assert [c.header for c in table.columns] == ["batch size", "metric", "time"]


@pytest.mark.slow
def test_run_goes_through_the_recurrence_gate_and_says_what_it_skipped(tmp_path) -> None:
    """`zeus-kfp run` exercises the same gate as a schedule, for any job (the gate's settings are run settings: they
    say how a run runs, not what the job is): with a day's period the second run is not due and trains nothing,
    and a skipped run is not a failure. (--force through kfp.local: tests/kfp/test_kfp_gate.py.)"""
    args = ["run", "--trace", "squad/v100", "--store", "store", "--runs-dir", "runs", "--plots-dir", "plots",
            "--job-id", "gated", "--attempts", "1", "--period-s", "86400"]  # fmt: skip
    proc = run_cli(*args, "-r", "2", cwd=tmp_path, COLUMNS="120")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^run local-\S+: skipped: not due \(trained nothing\)$", proc.stdout, re.M), proc.stdout
    runs = open_store(str(tmp_path / "store")).recurrences("gated")
    assert runs["why"].tolist() == ["first", "not due"]
    bad = run_cli(*args, "--max-running", "-2", cwd=tmp_path)
    allowed = "allowed an integer from 0 to 9223372036854775807 (0: no cap)"
    assert bad.returncode == 2 and f"invalid max_running=-2: {allowed}" in bad.stderr
