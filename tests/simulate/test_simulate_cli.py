"""`zeus-kfp simulate` end to end on a shipped workload, a few recurrences."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from zeus_kfp.cli import app

runner = CliRunner()


def test_simulate_writes_figures_and_one_row_per_recurrence(tmp_path):
    out = tmp_path / "sim.json"
    args = ["simulate", "--workload", "sentiment140", "--policy", "zeus-nsdi23", "--seeds", "1", "2"]
    result = runner.invoke(app, [*args, "--recurrences", "6", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "oracle" in result.output and "default" in result.output
    data = json.loads(out.read_text())
    assert data["policy_name"] == "zeus-nsdi23" and data["num_recurrences"] == 6
    assert [s["seed"] for s in data["seeds"]] == [1, 2]
    for run in data["seeds"]:
        for key in ("policy", "default", "oracle"):
            assert set(run[key]) == {"cost", "energy_j", "time_s"} and run[key]["cost"] > 0
        assert len(run["recurrences"]) == 6
        assert run["recurrences"][0]["batch_sizes"][0] == 128  # b0 first
        assert sum(r["cost"] for r in run["recurrences"]) == run["policy"]["cost"]
    # The default config and the oracle do not depend on the policy: same per-recurrence figures.
    assert data["seeds"][0]["oracle"] == data["seeds"][1]["oracle"]


def test_simulate_rejects_bad_names_with_allowed_values(tmp_path):
    result = runner.invoke(app, ["simulate", "--workload", "mnist"])
    assert result.exit_code == 2 and "workload='mnist'" in result.output and "librispeech" in result.output
    result = runner.invoke(app, ["simulate", "--workload", "squad", "--policy", "greedy"])
    assert result.exit_code == 2 and "turning-walk, zeus-nsdi23, default (= turning-walk)" in result.output
    result = runner.invoke(app, ["simulate", "--workload", "squad", "--seeds", "1", "x"])
    assert result.exit_code == 2 and "seeds" in result.output
    for bad in ("-3", "5-2", "1-", "1-x"):  # negative, reversed or half ranges
        result = runner.invoke(app, ["simulate", "--workload", "squad", "--seeds", bad])
        assert result.exit_code == 2 and f"invalid seeds='{bad}'" in result.output, (bad, result.output)


def test_simulate_takes_a_seed_range(tmp_path):
    out = tmp_path / "seeds.json"
    args = ["simulate", "--workload", "squad", "--recurrences", "2", "--seeds", "3-5", "7", "--json", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert [s["seed"] for s in json.loads(out.read_text())["seeds"]] == [3, 4, 5, 7]
    result = runner.invoke(app, ["simulate", "--workload", "squad", "--power-trace", str(tmp_path / "no.csv")])
    assert result.exit_code == 2 and "not found" in result.output


def test_simulate_help_explains_every_option():
    result = runner.invoke(app, ["simulate", "--help"])
    assert result.exit_code == 0
    for option in ("--workload", "--policy", "--train-trace", "--power-trace", "--seeds", "--recurrences", "--json"):
        assert option in result.output
