"""What `zeus-kfp run` shows of each step (pipelines.step_watcher.StepWatcher): each step started as the step
itself tells it (zeus_kfp.steps.step_events), the train step's decision read from the store's dispatch record,
typed, and the lines no store holds read with the StepLine their step prints.

Fed what the steps write, in the order they write it: their events through the step functions' own
`tell` (the variable set as the runner sets it), their lines as the steps print them, against a real local store.
No kfp.local wording anywhere: a line of it changes nothing."""

from __future__ import annotations

import functools
import io

import pytest

from zeus_kfp.job import Decision, JobSpec
from zeus_kfp.pipelines.local import _dispatched
from zeus_kfp.pipelines.step_watcher import StepWatcher
from zeus_kfp.steps.step_events import EVENTS_ENV, FAILED, FINISHED, STARTED, StepEvent, reported, tell
from zeus_kfp.steps.step_lines import LOST_TRIAL, MODEL, NO_MODEL, RECURRENCE, TRIAL_LOG
from zeus_kfp.store import open_store

SPEC = JobSpec(job_id="watched", batch_sizes=(8, 16), default_batch_size=8, target_metric=0.9, max_epochs=2)


@pytest.fixture
def watched(tmp_path, monkeypatch) -> tuple[list[tuple[str, int | None]], StepWatcher]:
    store = open_store(str(tmp_path / "store"))
    store.ensure_job(SPEC)
    store.begin_recurrence(SPEC.job_id, "rec-1")
    # two concurrent decisions: the stage the old stdout regex cut to "exploration"
    store.dispatch_trial(SPEC.job_id, "rec-1", 1, Decision(16, None, "exploration-concurrent", "a twin runs"))
    events = tmp_path / "run.steps.jsonl"
    monkeypatch.setenv(EVENTS_ENV, str(events))
    steps: list[tuple[str, int | None]] = []
    watcher = StepWatcher(
        io.StringIO(),
        lambda step, recurrence: steps.append((step, recurrence)),
        functools.partial(_dispatched, store, SPEC.job_id, "rec-1"),
        events,
    )
    return steps, watcher


def step(watcher: StepWatcher, name: str, attempt: int | None = None, *printed: str) -> None:
    """A step runs: it tells its start, prints its lines, tells its end."""
    tell(StepEvent(name, attempt, STARTED))
    watcher.write("".join(line + "\n" for line in printed))
    tell(StepEvent(name, attempt, FINISHED))


def test_each_step_shows_as_it_tells_its_start_with_the_decision_the_store_recorded(watched) -> None:
    steps, watcher = watched
    step(watcher, "gate")
    step(watcher, "preprocess", None, RECURRENCE.say("3 (rec-1)"))
    step(watcher, "bandit", 1, "attempt 1: batch size 999 (exploitation: a line nobody parses any more)")
    step(
        watcher,
        "train",
        1,
        TRIAL_LOG.say("/runs/rec-1/attempt-1-train/trial_log"),
        MODEL.say(f"{NO_MODEL} (the script saved no model)"),
    )
    step(
        watcher, "bandit", 2, LOST_TRIAL.say("trial 7 (recurrence 2, attempt 1, batch size 8) recorded as failed: lost")
    )
    step(watcher, "train", 2)
    watcher.write("Executing task 'attempt-9-train'\nTask 'gate' finished with status FAILURE\n")  # kfp.local's
    step(watcher, "report")
    watcher.read_events()  # the runner's last read, after the pipeline returns
    assert steps == [
        ("gate", None),
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
    assert watcher.failed_task() is None


def test_a_silent_step_shows_when_the_events_are_read(watched) -> None:
    """A step that prints nothing (a long training) still shows: `follow` reads the events while it runs."""
    steps, watcher = watched
    tell(StepEvent("train", 1, STARTED))
    assert steps == []
    watcher.read_events()
    assert steps == [("attempt 1: train (batch size 16, exploration-concurrent)", None)]


def test_an_event_cut_short_is_read_once_whole(watched, tmp_path) -> None:
    steps, watcher = watched
    line = StepEvent("train", 1, STARTED).to_json() + "\n"
    events = tmp_path / "run.steps.jsonl"
    events.write_text(line[:10])
    watcher.read_events()
    assert steps == []
    with events.open("a") as out:
        out.write(line[10:])
    watcher.read_events()
    assert steps == [("attempt 1: train (batch size 16, exploration-concurrent)", None)]


def test_a_step_that_raises_is_named_with_its_error(watched) -> None:
    _, watcher = watched

    @reported("feedback", attempt=lambda **kwargs: kwargs["attempt"])
    def feedback(*, attempt: int) -> bool:
        raise ValueError(f"attempt {attempt}: the store refused")

    step(watcher, "bandit", 2)
    with pytest.raises(ValueError):
        feedback(attempt=2)
    watcher.read_events()
    assert (watcher.failed_task(), watcher.failed_error()) == (
        "attempt-2-feedback",
        "ValueError: attempt 2: the store refused",
    )


def test_a_step_killed_outright_is_the_one_that_started_and_never_ended(watched) -> None:
    _, watcher = watched
    step(watcher, "preprocess")
    tell(StepEvent("train", 1, STARTED))  # then SIGKILL: no end, no error
    watcher.read_events()
    assert (watcher.failed_task(), watcher.failed_error()) == ("attempt-1-train", "")


def test_the_events_say_failed_for_a_step_that_raised(tmp_path, monkeypatch) -> None:
    events = tmp_path / "e.jsonl"
    monkeypatch.setenv(EVENTS_ENV, str(events))

    @reported("gate")
    def gate() -> bool:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gate()
    told = [StepEvent.from_json(line) for line in events.read_text().splitlines()]
    assert [(e.step, e.attempt, e.state) for e in told] == [("gate", None, STARTED), ("gate", None, FAILED)]


def test_nothing_is_told_where_no_runner_asked(tmp_path, monkeypatch) -> None:
    """On a cluster nothing sets the variable: the step runs as it is and writes nothing."""
    monkeypatch.delenv(EVENTS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)

    @reported("report")
    def report() -> int:
        return 7

    assert report() == 7
    assert list(tmp_path.iterdir()) == []
