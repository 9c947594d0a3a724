"""The progress counters collected with a plain script's metrics, wherever real tools print them.

Each idiom is read with the simplest pattern a user writes (two groups, name and value) or Katib's default
`name=value`; the expected observations (metric, value, epoch, step) are written out by hand. A number is a
counter only where it is named as one (zeus_kfp.train.collectors.counters): the last tests show the numbers
that are not.
"""

from __future__ import annotations

import pytest

from zeus_kfp.train.collectors import CollectorSpec
from zeus_kfp.train.collectors.counters import line_counters
from zeus_kfp.train.collectors.observation import LineReader
from zeus_kfp.train.metric_watch import MetricWatch
from zeus_kfp.train.metrics import compile_patterns


def read(lines: list[str], *patterns: str) -> list[tuple]:
    """The observations' keys of `lines` read in order as one source."""
    reader = LineReader(compile_patterns(list(patterns) or None))
    return [o.key() for line in lines for o in reader.read(line)]


def test_keras_verbose_2_epoch_line_carries_to_the_metrics_line_after_it():
    lines = [
        "Epoch 1/3",
        "1563/1563 - 5s - 3ms/step - accuracy: 0.8100 - loss: 0.5200 - val_accuracy: 0.8000 - val_loss: 0.5500",
        "Epoch 2/3",
        "1563/1563 - 4s - 3ms/step - accuracy: 0.8600 - loss: 0.4100 - val_accuracy: 0.8500 - val_loss: 0.4400",
    ]
    assert read(lines, r"(val_accuracy): ([0-9.]+)") == [
        ("epoch", 1.0, 1, None), ("val_accuracy", 0.8, 1, None),
        ("epoch", 2.0, 2, None), ("val_accuracy", 0.85, 2, None),
    ]  # fmt: skip


def test_a_counter_in_the_metric_line_outside_the_pattern():
    assert read(["Epoch 1: train_loss=1.000 val_acc=0.4500"], r"(val_acc)=([0-9.]+)") == [("val_acc", 0.45, 1, None)]
    assert read(["epoch 3 | loss 0.41 | val_acc 0.8100"], r"(val_acc) ([0-9.]+)") == [("val_acc", 0.81, 3, None)]
    assert read(["[epoch 3, step 1200] loss=0.25 val_acc=0.7"], r"(val_acc)=([0-9.]+)") == [("val_acc", 0.7, 3, 1200)]
    assert read(["Iteration 300: val_acc=0.5"], r"(val_acc)=([0-9.]+)") == [("val_acc", 0.5, None, 300)]


def test_a_line_with_a_counter_and_no_metric_is_progress_named_by_its_counter():
    lines = ["step=200 loss=0.31", "step=400 loss=0.22", "Epoch 1: val_acc=0.6"]
    assert read(lines, r"(val_acc)=([0-9.]+)") == [
        ("step", 200.0, None, 200), ("step", 400.0, None, 400), ("val_acc", 0.6, 1, 400),
    ]  # fmt: skip
    both = read(["[epoch 2, step 1200]"], r"(val_acc)=([0-9.]+)")
    assert both == [("epoch", 2.0, 2, 1200), ("step", 1200.0, 2, 1200)]


def test_huggingface_trainer_dict_lines_with_fractional_epochs():
    """Trainer prints Python dicts (single quotes, not JSON); its epoch is fractional between evaluations."""
    lines = [
        "{'loss': 0.6931, 'grad_norm': 1.25, 'learning_rate': 4.5e-05, 'epoch': 0.32}",
        "{'loss': 0.5512, 'grad_norm': 1.5, 'learning_rate': 4e-05, 'epoch': 0.64}",
        "{'eval_loss': 0.5, 'eval_accuracy': 0.8, 'eval_runtime': 1.5, 'epoch': 1.0}",
    ]
    got = read(lines, r"'(eval_accuracy)': ([0-9.]+)")
    assert got == [("epoch", 0.32, 0.32, None), ("epoch", 0.64, 0.64, None), ("eval_accuracy", 0.8, 1, None)]
    assert [type(key[2]) for key in got] == [float, float, int]  # a whole epoch is an int, a fraction a float


def test_python_logging_lines_with_their_timestamps_and_default_format():
    lines = [
        "2026-12-07 10:00:01,123 INFO step=100 loss=0.5",
        "2026-12-07 10:00:02,456 INFO step=200 loss=0.4",
        "INFO:train:epoch 2 val_acc=0.81",
    ]
    assert read(lines, r"(val_acc)=([0-9.]+)") == [
        ("step", 100.0, None, 100), ("step", 200.0, None, 200), ("val_acc", 0.81, 2, 200),
    ]  # fmt: skip
    assert read(lines[:1]) == [("step", 100.0, None, 100), ("loss", 0.5, None, 100)]  # Katib's default pattern


def test_the_patterns_own_counter_wins_and_global_step_before_step():
    pattern = r"ep(?P<epoch>\d+) (?P<name>acc)=(?P<value>[0-9.]+)"
    assert read(["ep5 acc=0.9 (epoch 7 of the schedule)"], pattern) == [("acc", 0.9, 5, None), ("epoch", 5.0, 5, None)]
    assert read(['{"loss": 0.5, "step": 3, "global_step": 103}']) == [
        ("loss", 0.5, None, 103), ("step", 3.0, None, 103), ("global_step", 103.0, None, 103),
    ]  # fmt: skip
    assert line_counters("iter 5 step 7 global_step 107") == {"step": 107}


def test_a_line_that_repeats_the_counters_in_force_says_nothing_new():
    lines = ["Epoch 3/10", "INFO epoch 3 still loading", "Epoch 3/10", "Epoch 4/10"]
    assert read(lines, r"(val_acc)=([0-9.]+)") == [("epoch", 3.0, 3, None), ("epoch", 4.0, 4, None)]


def test_a_progress_bar_redrawn_with_carriage_returns_counts_its_last_redraw():
    bar = "Epoch 1:  50%|#####     | 5/10 [00:01<00:01]\rEpoch 1: 100%|##########| 10/10 [00:02<00:00, val_acc=0.7]"
    assert read([bar]) == [("val_acc", 0.7, 1, None)]
    assert line_counters("step 10\rstep 20\rstep 30") == {"step": 30}


def test_json_records_name_counters_as_keys_and_carry_like_any_line():
    lines = ['{"metric": "accuracy", "value": 0.5, "epoch": 2, "iteration": 40}', '{"metric": "loss", "value": 0.3}']
    assert read(lines) == [("accuracy", 0.5, 2, 40), ("loss", 0.3, 2, 40)]


@pytest.mark.parametrize(
    "line",
    [
        "1563/1563 - 5s - 3ms/step - loss: 0.41",  # Keras's time per step
        "12s/epoch - 3ms/step",
        "steps_per_epoch=100 epoch_time=3.2 num_epochs: 10",  # names that contain a counter's name
        "Epochs: 10, steps: 500",  # plurals: a setting, not a counter
        "batch 17/500 loss 0.5",  # not a counter name
        "100it [00:01, 60.2it/s]",  # tqdm's iterations
        "train-step=5 Loss/step 4 val.step: 3",  # part of another name
        "step -1 epoch -2",  # negative
        "step 3.5",  # a step is whole
        "epoch 1.2.3",  # a version, not an epoch
        "took 3 steps at epoch_ 4",
    ],
)
def test_numbers_not_named_as_counters_are_never_counters(line):
    assert line_counters(line) == {}
    assert all(key[2:] == (None, None) for key in read([line]))


def test_the_named_counter_forms_people_print():
    assert line_counters("Epoch 3/10") == {"epoch": 3}
    assert line_counters("EPOCH: 3") == {"epoch": 3}
    assert line_counters("finished epoch 4.") == {"epoch": 4}
    assert line_counters("Step [100/500]") == {"step": 100}
    assert line_counters("'epoch': 2.5, \"global_step\": 7") == {"epoch": 2.5, "step": 7}
    assert line_counters("iter: 30") == {"step": 30}


def test_huggingface_trainer_5s_quoted_values_carry_the_epoch():
    """transformers 5.25's Trainer (disable_tqdm=True), as printed by a real run here: every value is quoted."""
    assert line_counters("{'loss': '0.09869', 'grad_norm': '0.2143', 'learning_rate': '0.007552', 'epoch': '2'}") == {
        "epoch": 2
    }
    line = "{'eval_loss': '0.1303', 'eval_accuracy': '0.9707', 'eval_runtime': '0.845', 'epoch': '1'}"
    assert line_counters(line) == {"epoch": 1}
    assert line_counters("{'loss': '0.6931', 'epoch': '0.32'}") == {"epoch": 0.32}
    assert line_counters("'epoch': 'abc'") == {} and line_counters("'epoch': '3x'") == {}


def test_stdout_collector_spec_names_both_streams():
    assert CollectorSpec().describe() == "stdOut collector (the script's stdout and stderr)"


def test_fractional_epochs_count_as_the_epoch_they_are_part_of_for_the_missing_metric_verdict():
    """HuggingFace's loss lines within an epoch are not epochs of output: a metric that comes with the first
    evaluation (epoch 1.0) is not declared missing at epoch 0.64."""
    watch = MetricWatch("eval_accuracy", "stdOut collector")
    reader = LineReader(compile_patterns([r"'(eval_accuracy)': ([0-9.]+)"]))
    for line in ["{'loss': 0.69, 'epoch': 0.32}", "{'loss': 0.55, 'epoch': 0.64}", "{'loss': 0.5, 'epoch': 1.0}"]:
        watch.on_line(line)
        for observation in reader.read(line):
            watch.on_observation(observation)
    assert watch.missing() is None
    watch.on_line("{'loss': 0.45, 'epoch': 1.32}")  # into the second epoch, and no evaluation came
    assert "never reported 'eval_accuracy' in its first 2 epochs of output" in (watch.missing() or "")
