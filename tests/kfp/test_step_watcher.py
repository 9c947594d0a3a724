"""What `zeus-kfp run` shows of each step (pipelines.local.StepWatcher): the train step's decision read from
the store's dispatch record, typed, and the lines no store holds read with the StepLine their step prints.

Fed the text kfp.local prints (its task lines verbatim) and the steps' own lines as the steps print them,
against a real local store."""

from __future__ import annotations

import functools
import io

from pipelines.local import StepWatcher, _dispatched
from zeus_kfp.job import Decision, JobSpec
from zeus_kfp.steps.step_lines import LOST_TRIAL, MODEL, NO_MODEL, RECURRENCE, TRIAL_LOG
from zeus_kfp.store import open_store

SPEC = JobSpec(job_id="watched", batch_sizes=(8, 16), default_batch_size=8, target_metric=0.9, max_epochs=2)


def watch(tmp_path, text: str) -> tuple[list[tuple[str, int | None]], StepWatcher]:
    store = open_store(str(tmp_path / "store"))
    store.ensure_job(SPEC)
    store.begin_recurrence(SPEC.job_id, "rec-1")
    # two concurrent decisions: the stage the old stdout regex cut to "exploration"
    store.dispatch_trial(SPEC.job_id, "rec-1", 1, Decision(16, None, "exploration-concurrent", "a twin runs"))
    steps: list[tuple[str, int | None]] = []
    watcher = StepWatcher(
        io.StringIO(),
        lambda step, recurrence: steps.append((step, recurrence)),
        functools.partial(_dispatched, store, SPEC.job_id, "rec-1"),
    )
    watcher.write(text)
    return steps, watcher


def test_the_train_line_says_the_decision_the_store_recorded_with_its_whole_stage(tmp_path) -> None:
    text = (
        "\x1b[32mExecuting task 'preprocess'\x1b[0m\n"
        + RECURRENCE.say("3 (rec-1)")
        + "\nExecuting task 'attempt-1-bandit'\n"
        + "attempt 1: batch size 999 (exploitation: a line nobody parses any more)\n"
        + "Executing task 'attempt-1-train'\n"
        + TRIAL_LOG.say("/runs/rec-1/attempt-1-train/trial_log")
        + "\n"
        + MODEL.say(f"{NO_MODEL} (the script saved no model)")
        + "\nExecuting task 'attempt-2-bandit'\n"
        + LOST_TRIAL.say("trial 7 (recurrence 2, attempt 1, batch size 8) recorded as failed: lost")
        + "\nExecuting task 'attempt-2-train'\nExecuting task 'report-after-attempt-2'\n"
    )
    steps, watcher = watch(tmp_path, text)
    assert steps == [
        ("preprocess", None),
        ("attempt 1: bandit", 3),
        ("attempt 1: train (batch size 16, exploration-concurrent)", 3),
        ("attempt 2: bandit", 3),
        ("trial 7 (recurrence 2, attempt 1, batch size 8) recorded as failed: lost", 3),
        ("attempt 2: train", 3),  # no dispatch recorded for attempt 2: no detail, nothing made up
        ("report", 3),
    ]
    assert watcher.recurrence == 3
    assert [(f.attempt, f.log, f.model) for f in watcher.trial_files()] == [
        (1, "/runs/rec-1/attempt-1-train/trial_log", "")
    ]


def test_a_line_arriving_in_pieces_is_read_once_whole(tmp_path) -> None:
    steps, watcher = watch(tmp_path, "Executing task 'attempt-1-tr")
    assert steps == []
    watcher.write("ain'\n")
    assert steps == [("attempt 1: train (batch size 16, exploration-concurrent)", None)]
