"""Run recurrences of a job on this machine through kfp.local, the same pipeline a cluster runs.

Each recurrence is one kfp.local pipeline run (SubprocessRunner, no venv: components run in
this interpreter, where zeus is installed). The store is the only state shared between runs,
exactly as on a cluster. Each step tells its start and end to a file of this runner's (zeus_kfp.steps.step_events):
the progress (one `on_step` per step) and the name of a failed step come from there, typed. kfp.local's own
chatter goes to a log file per recurrence, read on the way only for the lines the steps print themselves
(where each trial's log and model went).

Nothing is stored before every input is checked (zeus_kfp.steps.inputs, the policy, the pipeline
itself): a refused input stores no job. A failed step records the recurrence's unfinished trial
as failed with the step's error (so no trial is left `dispatched`), marks the job completed and
raises LocalRunError quoting the error. A trial that failed (the script's own failure: it ended the
recurrence, zeus_kfp.steps.feedback.ends_recurrence) stops the run: TrialFailed carries the recurrences
so far and names the trial, its reason and its log.

SIGINT or SIGTERM stops the run cleanly: the steps still running are stopped, the recurrence's
unfinished trial is recorded as failed ("interrupted by SIGINT"), the job is marked completed
(no recurrence runs any more), and RunInterrupted says what was recorded.
"""

import contextlib
import functools
import os
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

from kfp import local
from kfp.local.config import LocalExecutionConfig

from zeus_kfp.job import Decision, JobSpec
from zeus_kfp.pipelines.dag import EXAMPLE_PREPROCESS, LOCAL, build_pipeline
from zeus_kfp.pipelines.local_owner import claim, reclaim_killed
from zeus_kfp.pipelines.step_watcher import StepWatcher, error_lines
from zeus_kfp.policy import get_policy
from zeus_kfp.run_settings import RunSettings
from zeus_kfp.signals import Interrupted, interruptible, stop_children
from zeus_kfp.simulate.trace_trial import TraceBackend
from zeus_kfp.steps import (
    PYTHON_TOKEN,
    RecurrenceSummary,
    abandoned_line,
    fail_interrupted,
    fail_unfinished,
    run_arguments,
    summarize,
)
from zeus_kfp.steps.gate import outcome_line
from zeus_kfp.steps.inputs import check_trial_inputs
from zeus_kfp.steps.step_events import EVENTS_ENV
from zeus_kfp.store import Store, open_store
from zeus_kfp.train import example_command
from zeus_kfp.trials import Trial

DEFAULT_RUNS_DIR = Path(".zeus-kfp") / "runs"


class LocalRunError(RuntimeError):
    """A recurrence's pipeline failed locally; the message quotes the failing step's error and the log."""


class TrialFailed(RuntimeError):
    """A trial failed (the script's own failure, or an input its step refused): it ended its recurrence, and
    the run stops there, since every later trial would fail the same way. `summaries`: the recurrences run."""

    def __init__(self, summaries: list[RecurrenceSummary]) -> None:
        self.summaries = summaries
        self.summary = summaries[-1]
        self.trial: Trial = self.summary.failed_trial  # type: ignore[assignment]
        files = self.summary.files_of(self.trial.attempt)
        self.log = files.log if files is not None else ""
        where = f"; its log: {self.log}" if self.log else ""
        super().__init__(
            f"trial {self.trial.trial} (recurrence {self.trial.recurrence}, batch size {self.trial.batch_size}) "
            f"failed, so the run stopped: a failure of the script itself is not retried with other batch sizes"
            f"{where}"
        )


class RunInterrupted(Interrupted):
    """SIGINT or SIGTERM stopped a local run; its unfinished trials were recorded as failed."""

    def __init__(self, signum: int, job_id: str, recurrence_id: str, abandoned: list[Trial]) -> None:
        super().__init__(signum)
        self.job_id = job_id
        self.recurrence_id = recurrence_id
        self.abandoned = abandoned

    def __str__(self) -> str:
        recorded = "; ".join(abandoned_line(a) for a in self.abandoned) or "no trial was in flight"
        return f"interrupted by {self.signal_name} during recurrence {self.recurrence_id}: {recorded}"


@contextlib.contextmanager
def _local_session(outputs_dir: Path, events: Path):
    """kfp.local configured for one run, and reset afterwards (it is a process-wide singleton); the steps it
    runs (subprocesses of this one) tell their start and end to `events`."""
    previous = LocalExecutionConfig.instance
    told_before = os.environ.get(EVENTS_ENV)
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(outputs_dir), raise_on_error=True)
    events.unlink(missing_ok=True)
    os.environ[EVENTS_ENV] = str(events)
    try:
        yield
    finally:
        LocalExecutionConfig.instance = previous
        if told_before is None:
            os.environ.pop(EVENTS_ENV, None)
        else:
            os.environ[EVENTS_ENV] = told_before


def run_recurrence(
    pipeline,
    arguments: dict,
    *,
    outputs_dir: Path,
    log_path: Path,
    on_step: Callable[[str, int | None], None] | None = None,
    dispatched: Callable[[int], Decision | None] | None = None,
) -> StepWatcher:
    """One pipeline run; kfp.local's output goes to `log_path`, the steps' events beside it (each step started:
    `on_step(step, recurrence)`, the recurrence's number once preprocess said it; a train step with
    `dispatched(attempt)`, the decision its bandit recorded); returns what was read on the way (the recurrence's
    number, where its trials' logs and models went). Failure raises LocalRunError naming the failed step."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    events = log_path.with_suffix(".steps.jsonl")
    with log_path.open("w") as log, _local_session(outputs_dir, events):
        watcher = StepWatcher(log, on_step, dispatched, events)
        try:
            with contextlib.redirect_stdout(watcher), warnings.catch_warnings(), watcher.follow():
                # "custom base image in a Python environment" and "platform config ignored": expected here
                warnings.filterwarnings("ignore", module=r"kfp\.local")
                pipeline(**arguments)
        except Exception as err:  # kfp.local raises RuntimeError naming only the task
            log.flush()
            task = watcher.failed_task()
            step = f"the {task} step" if task else "a step"
            why = watcher.failed_error() or error_lines(log_path.read_text())
            raise LocalRunError(f"{step} failed: {err}\n{why}\n(full log: {log_path})") from err
    return watcher


def portable_command(command: list[str]) -> list[str]:
    """This interpreter's path becomes "{python}" (see zeus_kfp.steps.PYTHON_TOKEN): kfp.local rewrites
    every "python3" in a step's arguments, which would mangle the path. Other "python3"s are refused."""
    out = [PYTHON_TOKEN if arg in (sys.executable, os.path.realpath(sys.executable)) else arg for arg in command]
    mangled = [arg for arg in out if "python3" in arg]
    if mangled:
        raise ValueError(
            f"invalid command={command!r}: kfp.local rewrites 'python3' inside step arguments ({mangled!r}); "
            f"allowed: write {PYTHON_TOKEN!r} for the interpreter, and no other 'python3' in the command"
        )
    return out


def run_local(
    spec: JobSpec,
    *,
    recurrences: int = 3,
    store: str | None = None,
    policy: str = "default",
    command: list[str] | None = None,
    attempts: int | None = None,
    preprocess: str | None = None,
    zeus_aware: bool = True,
    metric_pattern: str = "",
    metrics_collector: str | dict | None = None,
    keep: str = "",
    trial_backend: str = "script",
    reprofile: bool = False,
    runs_dir: str | Path | None = None,
    on_recurrence: Callable[[RecurrenceSummary], None] | None = None,
    on_start: Callable[[int, str], None] | None = None,
    on_step: Callable[[int, str, int | None], None] | None = None,
    run_settings: RunSettings | None = None,
    force: bool = False,
) -> list[RecurrenceSummary]:
    """Run `recurrences` recurrences of `spec` locally and return what each did.

    store: a local directory, file:// or s3://bucket/prefix (None: ZEUS_KFP_STORE or ./.zeus-kfp/store).
    command: the training command (None: the example's Zeus-aware script, with its dataset made
    by the preprocess step unless `preprocess` says otherwise). trial_backend: "script" (run `command`)
    or "trace:<workload>/<gpu>" (replay the NSDI'23 trace; no command, no preprocessing; the spec's
    batch sizes must be the trace's). reprofile: every trial measures a fresh power profile.
    metrics_collector: a plain script's collector spec (zeus_kfp.train.collectors.CollectorSpec, its dict, or
    JSON/YAML text in the shape of Katib's metricsCollectorSpec); checked here, sent as JSON. keep: the files
    a trial keeps as its Model artifact, globs relative to its work directory (zeus_kfp.steps.keep).
    preprocess: "" (pass-through),
    "module:function", "file.py:function" or a command with {output}. attempts: trials per
    recurrence (None: spec.max_attempts). on_start(i, recurrence_id), on_step(i, step, recurrence) (each
    step started, e.g. "attempt 1: train (batch size 32, exploration)"; `recurrence` is the job's number
    for it once known) and on_recurrence(summary) report progress. run_settings: how each run runs, beside the
    job's spec (None: RunSettings()): the recurrence gate's period, cap and drift detector, and the dispatch
    timeout after which the next bandit step records a trial unfinished failed (zeus_kfp.steps.abandoned; 0 when
    nothing else runs this job). SIGINT or SIGTERM: the running steps are
    stopped, the unfinished trial recorded as failed, RunInterrupted raised. A run killed outright (SIGKILL)
    is found by the job's next local run on the same machine and runs dir, which records its trial failed and
    its recurrence ended, so it holds no slot of the job's cap (pipelines.local_owner).
    Each run goes through the recurrence gate first (zeus_kfp.steps.gate: the run's period, drift detector and cap);
    a run it skips trains nothing and its summary says why (`skipped`). force: open a recurrence even when
    it is not due (it still counts against the cap).
    Each recurrence's artifacts (data, profiles, models, trial logs, report) and kfp.local log are kept
    under runs_dir/<job_id>/ (default ./.zeus-kfp/runs). Every input is checked (zeus_kfp.steps.inputs) and
    the pipeline built before the job is registered (or its spec checked) in the store, so a bad input
    stores nothing, and a changed spec the job has settled (a trial reached the target under its spec) fails here
    with the fields that changed; one it has not, the recurrence gate takes (it says so in its log). A failed trial
    stops the run (TrialFailed); a failed step records its unfinished trial failed and raises LocalRunError.
    """
    if isinstance(recurrences, bool) or not isinstance(recurrences, int) or recurrences < 1:
        raise ValueError(f"invalid recurrences={recurrences!r}: allowed a positive integer")
    run_settings = RunSettings() if run_settings is None else run_settings
    attempts = spec.max_attempts if attempts is None else attempts
    spec = spec.with_changes(max_attempts=attempts)  # a bad count fails here, naming max_attempts
    if TraceBackend.parse(trial_backend) is not None:  # a bad name fails here, naming the allowed ones
        command, preprocess = command or ["true"], preprocess or ""
    elif command is None:
        command = example_command("zeus")
        preprocess = EXAMPLE_PREPROCESS if preprocess is None else preprocess
    command = portable_command(command)
    get_policy(policy)  # an unknown name fails here, naming the allowed ones
    collector = check_trial_inputs(
        command=command,
        zeus_aware=zeus_aware,
        metric_pattern=metric_pattern,
        metrics_collector=metrics_collector or "",
        trial_backend=trial_backend,
        keep=keep,
    ).collector
    collector_json = collector.to_json() if metrics_collector else ""
    opened = open_store(store)
    pipeline = build_pipeline(
        spec,
        command,
        attempts=attempts,
        store_uri=opened.uri,
        policy=policy,
        trial_backend=trial_backend,
        options=LOCAL,
    )
    # The first write: fail fast, in this process, with the store's own message (a changed spec the job has settled
    # is refused here; one it has not, the gate's begin takes: zeus_kfp.store.gating).
    opened.spec_change(spec)
    runs = Path(runs_dir) if runs_dir is not None else DEFAULT_RUNS_DIR
    runs = runs.resolve()
    base = dict(
        run_arguments(spec, run_settings),
        store_uri=opened.uri,
        policy=policy,
        train_command=list(command),
        zeus_aware=zeus_aware,
        metric_pattern=metric_pattern,
        metrics_collector=collector_json,
        keep=keep,
        trial_backend=trial_backend,
        reprofile=reprofile,
        preprocess_ref=preprocess or "",
        force=bool(force),
    )
    summaries: list[RecurrenceSummary] = []
    with interruptible(forward=True):  # its steps, told at once, end (zeus_kfp.signals.interruptible)
        for i in range(recurrences):
            recurrence_id = f"local-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
            reclaim_killed(opened, spec.job_id, runs / spec.job_id)  # a run killed here holds no slot
            try:
                if on_start is not None:
                    on_start(i, recurrence_id)
                started = time.perf_counter()
                with claim(runs / spec.job_id / recurrence_id):
                    watcher = run_recurrence(
                        pipeline,
                        dict(base, recurrence_id=recurrence_id),
                        outputs_dir=runs / spec.job_id / recurrence_id,
                        log_path=runs / spec.job_id / f"{recurrence_id}.log",
                        on_step=None if on_step is None else functools.partial(on_step, i),
                        dispatched=functools.partial(_dispatched, opened, spec.job_id, recurrence_id),
                    )
            except Interrupted as sig:
                stop_children(also=sig.processes)  # its steps record what they were doing; nothing writes after
                abandoned = fail_interrupted(opened, spec.job_id, recurrence_id, sig.signal_name)
                opened.set_phase(spec.job_id, "completed")  # no recurrence of it runs any more
                raise RunInterrupted(sig.signum, spec.job_id, recurrence_id, abandoned) from None
            except LocalRunError as err:
                _record_failed_step(opened, spec.job_id, recurrence_id, err, on_recurrence)
                raise
            outcome = opened.gate_outcome(spec.job_id, recurrence_id)
            if outcome is not None and not outcome.opened:
                wall_s = time.perf_counter() - started
                summary = RecurrenceSummary.skipped_run(spec.job_id, recurrence_id, outcome_line(outcome), wall_s)
            else:
                trials = opened.trials(spec.job_id)
                summary = summarize(
                    trials, spec.job_id, recurrence_id, time.perf_counter() - started, watcher.trial_files()
                )
            summaries.append(summary)
            if on_recurrence is not None:
                on_recurrence(summary)
            if summary.failed_trial is not None:
                raise TrialFailed(summaries)
    return summaries


def _dispatched(store: Store, job_id: str, recurrence_id: str, attempt: int) -> Decision | None:
    """The decision the attempt's bandit step recorded in the store, if it has."""
    found = store.get_dispatch(job_id, recurrence_id, attempt)
    return None if found is None else found[1]


def _record_failed_step(
    store, job_id: str, recurrence_id: str, err: LocalRunError, on_recurrence: Callable | None
) -> None:
    """A step failed: its recurrence's unfinished trial is recorded failed with the step's error (no ghost
    `dispatched` trial), the job is no longer running, and what the recurrence did is still shown."""
    stop_children()
    lines = str(err).splitlines()
    reason = " | ".join(line for line in lines[:2] if line.strip())[:500]
    fail_unfinished(store, job_id, recurrence_id, reason)
    store.set_phase(job_id, "completed")
    trials = store.trials(job_id)
    if on_recurrence is not None and (trials["recurrence_id"].astype(str) == str(recurrence_id)).any():
        on_recurrence(summarize(trials, job_id, recurrence_id))  # unless it failed before any trial
