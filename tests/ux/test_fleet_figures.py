"""The fleet view's numbers on frames built by hand (ux.frames), so every expected figure is worked out here, not
by the code under test: the baseline's energy and time, a window, the totals, the plot's stacks, the metrics."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from ux.frames import SPEC, profiles_frame, trial_row, trials_frame
from zeus_kfp.errors import FieldError
from zeus_kfp.fleet.exporter import PREFIX, FleetCollector, families
from zeus_kfp.fleet.figures import (
    DEFAULT_CARBON_INTENSITY,
    EXPLOITATION,
    EXPLORATION,
    J_PER_KWH,
    Fleet,
    job_figures,
    job_stage,
)
from zeus_kfp.fleet.fleet_markdown import markdown, metrics
from zeus_kfp.fleet.plot import cumulative_by_job, plot_fleet
from zeus_kfp.fleet.read import matching_jobs, namespace_of, parse_when
from zeus_kfp.report import default_config_cost, savings_of

ROOT = Path(__file__).resolve().parents[2]
# ux.frames: trial 1 (batch size 128, the default, at 200 W) reached with 20 kJ in 100 s. Its profile: 280 W and
# 100 samples/s at 300 W (max), 195 W and 90 samples/s at 200 W. At max power the same work takes
# energy 20000 * (280/100) / (195/90) and time 100 * (1/100) / (1/90).
BASE_ENERGY = 20000.0 * (280 / 100) / (195 / 90)
BASE_TIME = 100.0 * 90 / 100
BASE_COST = 25000.0 * 2.9 / 2.75  # tests/ux/test_report.py's, by the cost rates
POLICY_ENERGY = 20000.0 + 17000.0 + 11000.0  # r1, r2 (missed 5 kJ + reached 12 kJ), r3 (the dispatched one has none)
POLICY_TIME = 100.0 + 90.0 + 55.0
ENDS = {1: "2026-01-01T00:00Z", 2: "2026-01-02T00:00Z", 3: "2026-01-03T00:00Z"}


def dated(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame["ended_at"] = pd.to_datetime(frame["recurrence"].map(ENDS), utc=True)
    return frame


def arms(*stages: str) -> pd.DataFrame:
    return pd.DataFrame({"batch_size": range(len(stages)), "stage": list(stages)})


def test_the_baseline_carries_the_default_configurations_energy_and_time_scaled_to_max_power():
    baseline = default_config_cost(trials_frame(), profiles_frame(), SPEC)
    assert baseline.cost == pytest.approx(BASE_COST)
    assert baseline.energy_j == pytest.approx(BASE_ENERGY)
    assert baseline.time_s == pytest.approx(BASE_TIME)
    unscaled = default_config_cost(trials_frame(), profiles_frame().iloc[0:0], SPEC)  # no profile: as measured
    assert (unscaled.energy_j, unscaled.time_s) == pytest.approx((20000.0, 100.0))


def test_what_a_job_saved_is_as_many_default_recurrences_less_what_its_recurrences_spent():
    saved = savings_of(trials_frame(), profiles_frame(), SPEC).saved()
    assert saved.energy_j == pytest.approx(3 * BASE_ENERGY - POLICY_ENERGY)
    assert saved.time_s == pytest.approx(3 * BASE_TIME - POLICY_TIME)
    assert saved.cost == pytest.approx(3 * BASE_COST - (25000.0 + 22000.0 + 13750.0))


def test_job_figures_convert_the_saving_and_a_failed_recurrence_is_waste_apart():
    failed = trial_row(4, 6, 1, 256, "failed", energy_j=3000.0, time_s=10.0)
    trials = dated(pd.concat([trials_frame(), pd.DataFrame([failed])], ignore_index=True))
    trials.loc[trials["recurrence"] == 4, "ended_at"] = pd.Timestamp("2026-01-04T00:00Z")
    figures, timeline = job_figures(SPEC, trials, profiles_frame(), arms(EXPLORATION, EXPLOITATION),
                                    carbon_intensity=400.0)  # fmt: skip
    energy_saved = 3 * BASE_ENERGY - POLICY_ENERGY
    assert figures.recurrences == 4 and figures.counted == 3
    assert figures.energy_used_j == pytest.approx(POLICY_ENERGY + 3000.0)
    assert figures.energy_saved_j == pytest.approx(energy_saved)
    assert figures.co2_avoided_g == pytest.approx(energy_saved / 3.6e6 * 400.0)
    assert figures.gpu_hours_saved == pytest.approx((3 * BASE_TIME - POLICY_TIME) * SPEC.num_gpus / 3600)
    assert (figures.failed_trials, figures.failed_recurrences, figures.failed_energy_j) == (1, 1, 3000.0)
    assert figures.saving == pytest.approx(savings_of(trials, profiles_frame(), SPEC).cumulative)
    assert figures.stage == EXPLORATION and figures.exploring
    assert timeline["recurrence"].tolist() == [1, 2, 3]  # the failed recurrence saved nothing and cost nothing here
    assert timeline["energy_saved_j"].sum() == pytest.approx(energy_saved)


def test_a_window_counts_the_recurrences_that_ended_in_it_against_the_whole_historys_baseline():
    trials = dated(trials_frame())
    since, until = datetime(2026, 1, 2, tzinfo=UTC), datetime(2026, 1, 3, tzinfo=UTC)
    figures, _ = job_figures(SPEC, trials, profiles_frame(), arms(EXPLORATION), since=since, until=until)
    assert figures.recurrences == 1  # r2 only: r3 ended at `until`, which is left out
    assert figures.energy_saved_j == pytest.approx(BASE_ENERGY - 17000.0)
    assert figures.saving == pytest.approx(1 - 22000.0 / BASE_COST)


def test_a_job_without_a_baseline_has_no_saving_and_the_total_says_which():
    missed = pd.DataFrame([trial_row(1, 1, 1, 64, "not_reached", energy_j=500.0, time_s=5.0)])
    lone, _ = job_figures(SPEC.with_changes(job_id="new"), dated(missed), profiles_frame(), arms(EXPLORATION))
    known, timeline = job_figures(SPEC, dated(trials_frame()), profiles_frame(), arms(EXPLOITATION))
    fleet = Fleet("file:///s", [known, lone], timeline)
    total = fleet.total()
    assert lone.saving is None and lone.energy_used_j == 500.0
    assert total["energy_saved_j"] == pytest.approx(known.energy_saved_j)
    assert total["energy_used_j"] == pytest.approx(known.energy_used_j + 500.0)
    assert total["without_baseline"] == ["new"] and total["exploring"] == 1
    assert "no saving yet" in markdown(fleet)
    assert json.loads(json.dumps(fleet.to_dict()))["total"]["recurrences"] == 4


def test_the_job_stage_is_exploration_while_any_batch_size_explores():
    assert job_stage(arms(EXPLOITATION, EXPLORATION)) == EXPLORATION
    assert job_stage(arms(EXPLOITATION, "pruned")) == EXPLOITATION
    assert job_stage(arms()) == "not started"


def test_the_plot_stacks_each_jobs_cumulative_saving_in_kwh(tmp_path):
    timeline = pd.DataFrame(
        {
            "job_id": ["a", "b", "a"],
            "recurrence": [1, 1, 2],
            "at": pd.to_datetime(["2026-01-01", "2026-01-02", "2026-01-03"], utc=True),
            "energy_saved_j": [3.6e6, -1.8e6, 7.2e6],
        }
    )
    cumulative = cumulative_by_job(timeline)
    assert cumulative["a"].tolist() == pytest.approx([1.0, 1.0, 3.0])
    assert cumulative["b"].tolist() == pytest.approx([0.0, -0.5, -0.5])
    png = plot_fleet(Fleet("file:///s", [], timeline), tmp_path / "fleet.png")
    from PIL import Image

    with Image.open(png) as img:
        assert img.info["Description"] == "total 2.5 kWh"
    assert plot_fleet(Fleet("file:///s", [], timeline.iloc[0:0]), tmp_path / "none.png") is None


def test_the_prometheus_families_have_conventional_names_units_and_labels():
    figures, timeline = job_figures(SPEC, dated(trials_frame()), profiles_frame(), arms(EXPLORATION))
    fleet = Fleet("s3://mlpipeline/private/team-a/zeus-kfp", [figures], timeline, namespace="team-a")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(lambda: fleet))
    from prometheus_client import generate_latest

    parsed = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
    saved = parsed[PREFIX + "energy_saved_joules"]
    assert saved.type == "gauge"
    (sample,) = saved.samples
    assert sample.labels == {"job": SPEC.job_id, "namespace": "team-a"}
    assert sample.value == pytest.approx(figures.energy_saved_j)
    assert parsed[PREFIX + "energy_used_joules"].type == "counter"  # exposed as ..._total
    assert parsed[PREFIX + "gpu_time_saved_seconds"].samples[0].value == pytest.approx(figures.gpu_hours_saved * 3600)
    stages = {s.labels["stage"]: s.value for s in parsed[PREFIX + "bandit_stage"].samples}
    assert stages[EXPLORATION] == 1.0 and stages["exploitation"] == 0.0
    for family in families(fleet):  # units in the names, as Prometheus' naming guide asks
        assert family.name.startswith(PREFIX)
        assert family.name.split("_")[-1] in {"joules", "seconds", "grams", "ratio", "kwh", "stage", "recurrences",
                                              "trials"}, family.name  # fmt: skip


def test_a_store_read_that_fails_serves_the_last_fleet_and_counts_the_failure():
    figures, timeline = job_figures(SPEC, dated(trials_frame()), profiles_frame(), arms(EXPLORATION))
    answers = [Fleet("file:///s", [figures], timeline)]
    now = [0.0]

    def read() -> Fleet:
        if not answers:
            raise OSError("store unreachable")
        return answers.pop()

    collector = FleetCollector(read, refresh_s=10.0, clock=lambda: now[0])
    now[0] = 11.0
    names = {f.name: f for f in collector.collect()}
    assert names[PREFIX + "energy_saved_joules"].samples[0].value == pytest.approx(figures.energy_saved_j)
    assert names[PREFIX + "fleet_read_errors"].samples[0].value == 1.0


def test_the_kfp_metrics_are_the_totals_in_the_units_their_names_say():
    figures, timeline = job_figures(SPEC, dated(trials_frame()), profiles_frame(), arms(EXPLORATION))
    values = metrics(Fleet("file:///s", [figures], timeline))
    assert values["energy_saved_kwh"] == pytest.approx((3 * BASE_ENERGY - POLICY_ENERGY) / J_PER_KWH, rel=1e-5)
    assert values["jobs_exploring"] == 1.0


def test_when_and_which_jobs_are_read_as_people_type_them():
    now = datetime(2026, 3, 31, 12, tzinfo=UTC)
    assert parse_when("since", "30d", now) == datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert parse_when("since", "2026-03-01", now) == datetime(2026, 3, 1, tzinfo=UTC)
    assert parse_when("until", "2026-03-01T06:00+02:00", now) == datetime(2026, 3, 1, 4, tzinfo=UTC)
    with pytest.raises(FieldError, match="since"):
        parse_when("since", "last month", now)
    assert matching_jobs(["a-1", "a-2", "b"], ["a-*"]) == ["a-1", "a-2"]
    assert matching_jobs(["a-1", "b"], []) == ["a-1", "b"]
    with pytest.raises(FieldError, match="'c'"):
        matching_jobs(["a-1", "b"], ["b", "c"])
    assert namespace_of("s3://mlpipeline/private/team-a/zeus-kfp") == "team-a"
    assert namespace_of("file:///tmp/store") == ""


def test_every_default_carbon_intensity_is_the_cited_one():
    """The CLI, the component and the pipeline cannot import zeus_kfp.fleet.figures' constant at their definition
    (pandas at `--help`; a component's source stands alone): each states it, and this keeps them one."""
    from zeus_kfp.cli import fleet_cmd
    from zeus_kfp.components.fleet import fleet_report

    assert fleet_cmd.DEFAULT_CARBON_INTENSITY == DEFAULT_CARBON_INTENSITY
    default = fleet_report.component_spec.inputs["carbon_intensity"].default
    assert default == DEFAULT_CARBON_INTENSITY


def test_the_grafana_dashboard_queries_only_series_the_exporter_serves():
    import re

    dashboard = json.loads((ROOT / "deploy" / "grafana" / "zeus-kfp-fleet.json").read_text())
    figures, timeline = job_figures(SPEC, dated(trials_frame()), profiles_frame(), arms(EXPLORATION))
    served = set()
    for family in FleetCollector(lambda: Fleet("file:///s", [figures], timeline)).collect():
        served |= {s.name for s in family.samples}
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert exprs
    used = {name for expr in exprs for name in re.findall(r"\bzeus_kfp_\w+", expr)}
    assert used and used <= served, used - served
