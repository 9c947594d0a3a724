"""Perturbed jobs (zeus_kfp.simulate.perturb): reproducible from a seed, and each change is the one asked for.

Expected figures are worked out here from the trace arrays (epochs x the cheapest per-limit cost), not
by the module under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from zeus_kfp.job import JobSpec
from zeus_kfp.simulate.engine import Figures, SimulationResult, oracle_batch_size
from zeus_kfp.simulate.perturb import KINDS, has_far_valley, move_minimum, perturbed_job
from zeus_kfp.simulate.trace import WorkloadTrace
from zeus_kfp.simulate.workload_runs import build_simulator
from zeus_kfp.summaries import RecurrenceSummary


def expected_cost(spec: JobSpec, trace: WorkloadTrace, b: int) -> float:
    """One run's expected cost at size b's cheapest limit (every run reaches: the sizes tested here)."""
    size = trace.sizes[b]
    per_epoch = [
        spec.eta_knob * e + (1 - spec.eta_knob) * spec.max_power_w * t
        for e, t in zip(size.energy_per_epoch, size.time_per_epoch, strict=True)
    ]
    return float(np.mean(size.target_epochs)) * min(per_epoch)


def always_reaching(spec: JobSpec, trace: WorkloadTrace) -> list[int]:
    return [
        b
        for b, s in trace.sizes.items()
        if not np.isnan(s.target_epochs).any() and s.target_epochs.max() <= spec.max_epochs
    ]


@pytest.mark.parametrize("workload", ["squad", "cifar100", "imagenet"])
def test_moved_minimum_lands_on_every_requested_size_with_the_measured_shape(workload):
    sim = build_simulator(workload, power_trace="a40", eta=0.5)
    spec, trace = sim.spec, sim.trace
    sizes = trace.batch_sizes
    reaching = always_reaching(spec, trace)
    before = {b: expected_cost(spec, trace, b) for b in reaching}
    old = min(before, key=before.get)
    for to in reaching:
        moved = move_minimum(spec, trace, to)
        after = {b: expected_cost(spec, moved, b) for b in reaching}
        assert min(after, key=after.get) == to == oracle_batch_size(spec, moved)
        assert after[to] == pytest.approx(before[to])
        # One step from the new minimum costs what one step from the old one did, relative to it.
        for step in (-1, 1):
            i, j = sizes.index(old) + step, sizes.index(to) + step
            if 0 <= i < len(sizes) and 0 <= j < len(sizes) and sizes[i] in before and sizes[j] in after:
                assert after[sizes[j]] / after[to] == pytest.approx(before[sizes[i]] / before[old])
        for b in sizes:  # epochs and misses are untouched
            np.testing.assert_array_equal(moved.sizes[b].target_epochs, trace.sizes[b].target_epochs)


def test_same_seed_same_job_other_seed_other_job():
    a, b = perturbed_job(11, 4), perturbed_job(11, 4)
    c = perturbed_job(12, 4)
    assert a.spec == b.spec and a.workload == b.workload
    for size in a.trace.batch_sizes:
        np.testing.assert_array_equal(a.trace.sizes[size].target_epochs, b.trace.sizes[size].target_epochs)
        np.testing.assert_array_equal(a.trace.sizes[size].energy_per_epoch, b.trace.sizes[size].energy_per_epoch)
    differs = (a.workload, a.gpu) != (c.workload, c.gpu) or any(
        not np.array_equal(a.trace.sizes[s].time_per_epoch, c.trace.sizes[s].time_per_epoch) for s in a.trace.sizes
    )
    assert differs


def test_epochs_to_target_are_scaled_per_job_and_noised_per_run():
    factors = []
    for index in range(0, 60, 3):  # "measured" jobs: only epochs and power are changed
        job = perturbed_job(5, index)
        assert job.kind == "measured"
        source = build_simulator(job.workload, power_trace=job.gpu, eta=job.spec.eta_knob)
        job_factor = job.spec.max_epochs / source.spec.max_epochs
        ratios = []
        for b, size in job.trace.sizes.items():
            old = source.trace.sizes[b].target_epochs
            assert np.array_equal(np.isnan(size.target_epochs), np.isnan(old))  # a miss stays a miss
            new = size.target_epochs[~np.isnan(old)]
            assert (new >= 1).all() and (new == np.round(new)).all()  # whole epochs
            big = old[~np.isnan(old)] >= 20  # rounding aside
            ratios.extend(new[big] / old[~np.isnan(old)][big])
        if len(ratios) >= 5:
            assert np.median(ratios) == pytest.approx(job_factor, rel=0.3)  # one factor for the whole job
            assert np.std(np.log(ratios)) > 0.02  # and noise per run
        factors.append(job_factor)
    assert min(factors) < 0.8 and max(factors) > 1.25  # scaled both ways


def test_default_optimal_jobs_start_at_the_optimum_and_the_others_keep_the_default():
    for index in range(30):
        job = perturbed_job(9, index)
        source = build_simulator(job.workload, power_trace=job.gpu, eta=job.spec.eta_knob)
        reaching = always_reaching(job.spec, job.trace)
        costs = {b: expected_cost(job.spec, job.trace, b) for b in reaching}
        optimum = min(costs, key=costs.get)
        if job.kind == "default-optimal":
            assert job.spec.default_batch_size == optimum
        else:
            assert job.spec.default_batch_size == source.spec.default_batch_size
        if job.kind == "moved" and len(reaching) > 2:
            assert optimum != job.spec.default_batch_size


def test_every_kind_is_generated_and_an_unknown_kind_is_refused():
    assert {perturbed_job(1, i).kind for i in range(3)} == set(KINDS)
    with pytest.raises(ValueError, match="kind"):
        perturbed_job(1, 0, kind="shifted")


def test_power_curves_are_tilted_so_the_cheapest_limit_can_move():
    moved = 0
    for index in range(0, 30, 3):
        job = perturbed_job(3, index)
        source = build_simulator(job.workload, power_trace=job.gpu, eta=job.spec.eta_knob)
        for b, size in job.trace.sizes.items():
            old = source.trace.sizes[b]
            per_epoch_new = job.spec.cost_model.cost(size.energy_per_epoch, size.time_per_epoch)
            per_epoch_old = source.spec.cost_model.cost(old.energy_per_epoch, old.time_per_epoch)
            moved += int(np.argmin(per_epoch_new) != np.argmin(per_epoch_old))
    assert moved > 0


def _result(costs: list[float], default_per_recurrence: float) -> SimulationResult:
    rows = [RecurrenceSummary("j", i + 1, f"r{i + 1}", (), True, c, 0.0, 0.0, True) for i, c in enumerate(costs)]
    n = len(costs)
    return SimulationResult(
        "p", 1, n, 1, Figures(sum(costs), 0, 0), Figures(default_per_recurrence * n, 0, 0), Figures(n, 0, 0),
        rows, [], [],
    )  # fmt: skip


def test_worst_excess_over_the_default_configuration_is_in_default_recurrences():
    # cumulative 15, 27, 32, 37 against 10, 20, 30, 40: 0.5, 0.7, 0.2, -0.3 default recurrences.
    assert _result([15, 12, 5, 5], 10.0).worst_excess_over_default() == pytest.approx(0.7)
    # Always cheaper than the default: the worst point is still below it.
    assert _result([9, 8, 8], 10.0).worst_excess_over_default() == pytest.approx(-0.1)


@pytest.mark.parametrize(
    ("costs", "default_index", "expected"),
    [
        ([5.0, 3.0, 1.0, 2.0, 0.5], 0, True),  # falls to 1.0, rises at 2.0, 0.5 lies past the rise
        ([5.0, 3.0, 1.0, 2.0, 3.0], 0, False),  # one minimum: nothing past the rise is cheaper
        ([0.5, 2.0, 1.0, 3.0, 5.0], 4, True),  # the same, walking down from the largest size
        ([3.0, 2.0, 1.0, 2.0, 0.9], 2, True),  # the default is the minimum walking down, not up
        ([1.0, 2.0, 3.0, 2.0, 1.5], 2, False),  # a maximum at the default: both valleys are walked into
        ([2.0, 1.0, 1.5, 1.2], 1, False),  # past the rise, but dearer than where the walk settled
        ([1.0, 2.0, 3.0], 0, False),  # the default is the minimum and the edge
    ],
)
def test_a_far_valley_is_a_cheaper_size_past_a_rise_from_where_the_walk_settles(costs, default_index, expected):
    assert has_far_valley(costs, default_index) is expected
