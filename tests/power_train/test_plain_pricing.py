"""Zeus's early stop prices training, not the script's start-up, on a real meter (NVML, zeusd).

A plain trial on a meter is charged from the first report of a step counter (the start of training);
a script that reports only at epoch ends is charged from its start, and its first epoch, which holds
the start-up, never prices the next one. The meter stands in under a manual clock, so every figure
here is exact and no outcome depends on how busy the machine is.
"""

from __future__ import annotations

import pytest

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.power import EnergyMonitor, PowerModel
from zeus_kfp.train.collectors import CollectorSpec, StdoutCollector
from zeus_kfp.train.plain import PlainTrial
from zeus_kfp.train.progress import ProfilingOptions
from zeus_kfp.train.session import TRIAL_WINDOW

from .test_progress import MeterStandIn

SPEC = JobSpec(job_id="pricing", batch_sizes=(16,), default_batch_size=16, target_metric=0.9, max_epochs=8,
               max_power_w=250.0)  # fmt: skip
STARTUP_S = 100.0  # far longer than an epoch (1 s)


def per_second() -> float:
    """What a real second costs at 250 W on the stand-in (its time runs 1 / speed(250 W), about 2 % slower)."""
    model = PowerModel()
    stretched = 1.0 / model.relative_throughput(250.0)
    return SPEC.cost_model.cost(model.power_w(250.0) * stretched, stretched)


def trial(gpu: MeterStandIn, threshold: float) -> PlainTrial:
    monitor = EnergyMonitor(gpu)
    monitor.begin_window(TRIAL_WINDOW)  # the runner opens it as it starts the script
    spec = CollectorSpec()
    return PlainTrial(
        SPEC,
        batch_size=16,
        cost_threshold=threshold,
        collector_spec=spec,
        collector=StdoutCollector(spec.patterns()),
        gpu=gpu,
        monitor=monitor,
        options=ProfilingOptions(warmup_iters=1000, profile_iters=1000),  # a step counter never leaves 250 W here
    )


def feed(plain: PlainTrial, gpu: MeterStandIn, lines: list[tuple[float, str]]) -> None:
    """Each (seconds later, line) as the script prints it; the runner polls after every line."""
    for seconds, line in lines:
        gpu.now += seconds
        plain.on_line(line)
        if plain.poll() is not None:
            return


def test_a_script_reporting_only_epochs_is_not_stopped_by_its_start_up():
    """Old rule: after epoch 1 the predicted cost was twice (start-up + epoch 1), over 202 s' worth, past a
    threshold of 120 s' worth: stopped. Now epoch 1 prices nothing; epoch 2 prices epoch 3 (about a second)."""
    gpu = MeterStandIn()
    plain = trial(gpu, threshold=120.0 * per_second())
    epochs = [(STARTUP_S + 1.0, "epoch=1 accuracy=0.5"), (1.0, "epoch=2 accuracy=0.7"), (1.0, "epoch=3 accuracy=0.95")]
    feed(plain, gpu, epochs)
    assert plain.status is TrialStatus.REACHED and plain.metrics == [0.5, 0.7, 0.95]
    assert not plain.progress.from_training_start  # charged from its start: nothing marks the end of start-up
    assert plain.epoch_costs[0] == pytest.approx(101.0 * per_second())  # start-up and epoch 1, charged
    assert plain.epoch_prices == plain.epoch_costs[1:]  # never the first: epoch 2 (250 W) and epoch 3 (225 W)
    assert plain.epoch_prices[0] == pytest.approx(per_second())


def test_the_first_epoch_still_stops_a_trial_whose_cost_so_far_passes_the_threshold():
    gpu = MeterStandIn()
    plain = trial(gpu, threshold=50.0 * per_second())  # less than the start-up alone
    feed(plain, gpu, [(STARTUP_S + 1.0, "epoch=1 accuracy=0.5"), (1.0, "epoch=2 accuracy=0.95")])
    assert plain.status is TrialStatus.COST_EXCEEDED and "passed the threshold" in plain.reason


def test_a_step_counter_marks_the_start_of_training_and_the_start_up_is_not_charged():
    gpu = MeterStandIn()
    plain = trial(gpu, threshold=10.0 * per_second())
    lines = [(STARTUP_S + 0.1, "step=1")]
    for epoch, accuracy in ((1, 0.5), (2, 0.7), (3, 0.95)):
        lines += [(0.1, f"step={10 * (epoch - 1) + s}") for s in range(2, 11)] if epoch == 1 else [
            (0.1, f"step={10 * (epoch - 1) + s}") for s in range(1, 11)
        ]  # fmt: skip
        lines.append((0.0, f"epoch={epoch} accuracy={accuracy}"))
    feed(plain, gpu, lines)
    assert plain.status is TrialStatus.REACHED and plain.progress.from_training_start
    # From the first step report on: 2.9 s of training (the 0.1 s before the first report is not charged either).
    cost = plain.monitor.peek(TRIAL_WINDOW)
    assert SPEC.cost_model.cost(cost.total_energy_j, cost.time_s) == pytest.approx(2.9 * per_second())
    # On a meter epoch 1 is never a price (whatever came before the first evaluation is in it); epoch 2 is
    assert plain.epoch_prices == plain.epoch_costs[1:] and plain.epoch_costs[0] == pytest.approx(0.9 * per_second())
    assert plain.epoch_prices[0] == pytest.approx(1.0 * per_second())
