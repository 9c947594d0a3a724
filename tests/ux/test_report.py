"""zeus_kfp.report on frames shaped like the store's, with numbers worked out by hand."""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread
from PIL import Image

from ux.frames import SPEC, bandit_frame, profiles_frame, trial_row, trials_frame
from zeus_kfp.report import default_config_cost, markdown_report, per_recurrence, recurrence_metrics, write_plots
from zeus_kfp.report.markdown import MAX_MARKDOWN_CHARS
from zeus_kfp.report.numbers import select_recurrence

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# cost = 0.5 * E + 0.5 * 300 W * t: r1 25000; r2 7000 + 15000; r3 13750 (the dispatched trial has no cost).
# Baseline: trial 1 (bs 128, 200 W) scaled by its profile's cost rate at 300 W over 200 W:
# (0.5*280+150)/100 / ((0.5*195+150)/90) = 2.9 / 2.75.
BASELINE = 25000.0 * 2.9 / 2.75


def test_per_recurrence_sums_every_finished_trial_of_a_recurrence() -> None:
    rec = per_recurrence(trials_frame())
    assert rec["recurrence"].tolist() == [1, 2, 3]
    assert rec["cost"].tolist() == pytest.approx([25000.0, 22000.0, 13750.0])
    assert rec["energy_j"].tolist() == pytest.approx([20000.0, 17000.0, 11000.0])
    assert rec["trials"].tolist() == [1, 2, 1]
    assert rec["batch_sizes"].tolist() == ["128", "64 -> 256", "256"]
    assert rec["reached"].tolist() == [True, True, True]


def test_default_config_cost_scales_the_default_batch_size_to_max_power() -> None:
    baseline = default_config_cost(trials_frame(), profiles_frame(), SPEC)
    assert baseline.cost == pytest.approx(BASELINE)
    assert "scaled to the max power limit" in baseline.how
    # Without a profile the trial's own cost is the estimate, and the report says so.
    unscaled = default_config_cost(trials_frame(), profiles_frame().iloc[0:0], SPEC)
    assert unscaled.cost == pytest.approx(25000.0)
    assert "at their power limit" in unscaled.how


def test_no_baseline_without_a_reached_trial_at_the_default_batch_size() -> None:
    trials = pd.DataFrame([trial_row(1, 1, 1, 128, "not_reached", energy_j=1.0, time_s=1.0)])
    baseline = default_config_cost(trials, profiles_frame(), SPEC)
    assert baseline.cost is None
    assert "default batch size 128" in baseline.how


def test_recurrence_metrics_are_that_recurrences_totals_and_saving() -> None:
    metrics = recurrence_metrics(trials_frame(), profiles_frame(), SPEC, 3)
    assert metrics["cost"] == pytest.approx(13750.0)
    assert metrics["energy_j"] == pytest.approx(11000.0)
    assert metrics["time_s"] == pytest.approx(55.0)
    assert metrics["reached"] == 1.0
    assert metrics["saving_percent"] == pytest.approx(100 * (1 - 13750.0 / BASELINE), rel=1e-5)


def test_select_recurrence_names_the_known_ids_on_a_typo() -> None:
    assert select_recurrence(trials_frame(), None)["recurrence"].unique().tolist() == [3]
    assert select_recurrence(trials_frame(), "run-2")["trial"].tolist() == [2, 3]
    with pytest.raises(ValueError, match=r"recurrence_id='run-9'.*run-1"):
        select_recurrence(trials_frame(), "run-9")


def _png_title(path) -> str:
    with Image.open(path) as img:
        return img.info.get("Title", "")


def test_write_plots_writes_four_real_pngs_marked_simulated(tmp_path) -> None:
    paths = write_plots(trials_frame(), profiles_frame(), bandit_frame(), SPEC, tmp_path / "plots")
    assert [p.name for p in paths] == [
        "cost_per_recurrence.png",
        "batch_size_per_trial.png",
        "posterior.png",
        "power_profile.png",
    ]
    for path in paths:
        assert path.read_bytes()[:8] == PNG_MAGIC
        pixels = imread(path)
        assert pixels.shape[0] >= 300 and pixels.shape[1] >= 600
        # Real content: many distinct colours, not a blank canvas.
        assert len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 50
        # The figures' source in the words the tables use ("figures: simulated (GPU model)").
        assert _png_title(path).startswith("mnist-nightly") and _png_title(path).endswith(", simulated (GPU model)")


def test_measured_data_is_not_labelled_simulated(tmp_path) -> None:
    paths = write_plots(trials_frame(False), profiles_frame(False), bandit_frame(), SPEC, tmp_path)
    assert len(paths) == 4
    assert not any("simulated" in _png_title(p) for p in paths)
    md = markdown_report(trials_frame(False), profiles_frame(False), bandit_frame(), SPEC, paths)
    assert "imulated" not in md


def test_write_plots_leaves_out_figures_without_data(tmp_path) -> None:
    empty = trials_frame().iloc[0:0]
    paths = write_plots(empty, profiles_frame().iloc[0:0], bandit_frame().iloc[0:0], SPEC, tmp_path)
    assert paths == []
    md = markdown_report(empty, profiles_frame().iloc[0:0], bandit_frame().iloc[0:0], SPEC, paths)
    assert "No finished trial yet" in md
    assert md.count("_no data for this figure yet_") == 4


def test_markdown_embeds_the_pngs_and_reports_the_saving(tmp_path) -> None:
    trials, profiles, state = trials_frame(), profiles_frame(), bandit_frame()
    paths = write_plots(trials, profiles, state, SPEC, tmp_path)
    md = markdown_report(trials, profiles, state, SPEC, paths)
    assert md.startswith("# zeus-kfp: job `mnist-nightly`")
    assert "**Simulated GPU.**" in md
    assert "## Recurrence 3 (`run-3`)" in md
    assert f"saved {1 - 13750.0 / BASELINE:+.1%}" in md
    embedded = re.findall(r"!\[([^\]]+)\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", md)
    assert [alt for alt, _ in embedded] == ["cost per recurrence", "batch size per trial", "posterior", "power profile"]
    for (_, data), path in zip(embedded, paths, strict=True):
        assert base64.b64decode(data) == path.read_bytes()
    # The trials table of recurrence 3 lists its finished trial, not the dispatched one.
    table = md.split("### Trials of this recurrence")[1].split("###")[0]
    assert "| 3 | 1 | 256 |" in table and "dispatched" not in table
    # An earlier recurrence can be the subject.
    md2 = markdown_report(trials, profiles, state, SPEC, paths, recurrence=2)
    assert "## Recurrence 2 (`run-2`)" in md2 and "64 -> 256" in md2


def test_a_report_too_long_for_the_kfp_ui_is_rebuilt_compact(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The KFP UI cuts Markdown at MAX_MARKDOWN_CHARS; past that the report shrinks instead."""
    rows = [
        trial_row(r, r, 1, SPEC.batch_sizes[r % 4], "reached", energy_j=1000.0 + r, time_s=10.0) for r in range(1, 201)
    ]
    trials = pd.DataFrame(rows)
    paths = write_plots(trials, profiles_frame(), bandit_frame(), SPEC, tmp_path)
    full = markdown_report(trials, profiles_frame(), bandit_frame(), SPEC, paths)
    assert len(full) <= MAX_MARKDOWN_CHARS and "### All recurrences" in full
    monkeypatch.setattr("zeus_kfp.report.markdown.MAX_MARKDOWN_CHARS", len(full) - 1)
    compact = markdown_report(trials, profiles_frame(), bandit_frame(), SPEC, paths)
    assert len(compact) < len(full) * 0.7
    assert "### The last 30 of 200 recurrences" in compact and "## Recurrence 200 (`run-200`)" in compact
    assert "| 170 | run-170 |" not in compact and "| 171 | run-171 |" in compact
    embedded = re.findall(r"\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", compact)
    assert len(embedded) == 4
    for data in embedded:
        with Image.open(io.BytesIO(base64.b64decode(data))) as img:
            assert img.format == "PNG" and img.size[0] >= 600


def test_a_failed_trials_reason_shows_on_one_line_with_its_tail(tmp_path) -> None:
    trials = trials_frame()
    reason = "exit code 1: Traceback (most recent call last):\n" + "  File x.py, line 3\n" * 20 + "OSError: disk | full"
    trials.loc[1, ["status", "reason"]] = ["failed", reason]
    md = markdown_report(trials, profiles_frame(), bandit_frame(), SPEC, [], recurrence=2)
    row = next(line for line in md.splitlines() if line.startswith("| 2 | 1 | 64 |"))
    assert "| failed |" in row and row.endswith("OSError: disk \\| full |") and "exit code 1" in row
    assert len(row) < 300


def test_no_posterior_figure_before_any_observation(tmp_path) -> None:
    state = bandit_frame().assign(posterior_mean=None, posterior_precision=None)
    paths = write_plots(trials_frame(), profiles_frame(), state, SPEC, tmp_path)
    assert "posterior.png" not in [p.name for p in paths] and len(paths) == 3


def test_a_recurrence_with_only_dispatched_trials_is_reported_not_crashed(tmp_path) -> None:
    trials = pd.concat([trials_frame(), pd.DataFrame([trial_row(4, 6, 1, 64, "dispatched", energy_j=0, time_s=0)])])
    md = markdown_report(trials, profiles_frame(), bandit_frame(), SPEC, [], recurrence=4)
    assert "No finished trial yet in recurrence 4" in md
    assert recurrence_metrics(trials, profiles_frame(), SPEC, 4) == {}


def test_a_limit_profiling_did_not_choose_is_never_shown_as_chosen(tmp_path) -> None:
    """Trial 4 (bs 256) ran measure only (the GPU's limits could not be set) and trial 2 (bs 64) unprofiled:
    the tables say so beside the watts, the power plot draws no star for trial 4 and names both trials."""
    from rich.console import Console

    from zeus_kfp.cli.trial_view import print_trials
    from zeus_kfp.power.gpu import MEASURE_ONLY_NOTE
    from zeus_kfp.train.progress import UNPROFILED_NOTE
    from zeus_kfp.trials import trials_of

    trials = trials_frame()
    trials.loc[trials["trial"] == 4, "reason"] = MEASURE_ONLY_NOTE
    trials.loc[trials["trial"] == 2, "reason"] = f"target not reached in 5 epochs; {UNPROFILED_NOTE}"
    out = Console(width=200, record=True)
    print_trials(out, "trials", trials_of(trials), ["trial", "batch_size", "power_limit_w", "status"])
    rows = {int(line.split()[0]): line for line in out.export_text().splitlines() if line.strip()[:1].isdigit()}
    assert (
        "200 W measure only" in rows[4]
        and "200 W unprofiled" in rows[2]
        and rows[1].rstrip().endswith("200 W   reached")
    )
    paths = write_plots(trials, profiles_frame(), bandit_frame(), SPEC, tmp_path)
    with Image.open(tmp_path / "power_profile.png") as png:
        notes = png.text["Description"]
        assert "y: cost per unit of work (J; star: chosen, x: measure only)" in png.text["Comment"]
    assert notes == (
        "measure only: trials 4 (batch size 256), at the limit in force; "
        "unprofiled: trials 2 (batch size 64), at the limit in force"
    )
    md = markdown_report(trials, profiles_frame(), bandit_frame(), SPEC, paths, recurrence=3)
    assert "| 3 | 1 | 256 | 200 W measure only |" in md


def test_the_posterior_says_grey_is_pruned_only_where_a_grey_arm_is_drawn(tmp_path) -> None:
    state = bandit_frame()
    write_plots(trials_frame(), profiles_frame(), state.assign(pruned=False), SPEC, tmp_path / "none")
    write_plots(trials_frame(), profiles_frame(), state.assign(pruned=True), SPEC, tmp_path / "all")
    with Image.open(tmp_path / "none" / "posterior.png") as png:
        assert png.text["Comment"] == "x: batch size | y: expected cost (J, posterior mean +- 1 sd)"
    with Image.open(tmp_path / "all" / "posterior.png") as png:
        assert png.text["Comment"].startswith("x: batch size (grey: pruned) |")
