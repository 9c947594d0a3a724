"""What `zeus-kfp run` prints about its recurrences: each one's table with where its model and logs went,
the epilogue (the bandit's state, the job against the default configuration, the plots), and the
end of a run that did not work: the failed trial with the script's own last lines, or a run in which
no recurrence reached the target. Both of those end the command with exit code 1 (zeus_kfp.cli.exits).

The saving is zeus_kfp.report.savings', the same lines `show` prints, so the two never disagree.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from zeus_kfp.cli.exits import FAILED
from zeus_kfp.cli.trial_view import print_bandit_state, print_trials
from zeus_kfp.report.units import duration, si
from zeus_kfp.trials import trial_columns

RUN_TRIAL_FIELDS = trial_columns(
    "attempt", "batch_size", "power_limit_w", "cost", "status", "energy_j", "time_s", "metric"
)
TAIL_LINES = 15  # of the failed script's output, printed when the run stops
SCRIPT_OUTPUTS = ("stderr.log", "stdout.log")  # the runner's files in a trial's log, the first one with text wins
NO_MODEL_HINT = (
    "none: save it to {log_dir}/model.pt as it trains (each epoch, or when it improves; a temporary file, then a "
    "rename): a plain script is stopped once it reaches the target, so a model saved after its last epoch is never "
    "written"
)
EXIT_REASON = re.compile(r"exit code (-?\d+):")  # zeus_kfp.train.plain's reason for a crash; the tail says the rest


NO_SLOT_HINT = (
    "  the job already runs max_running recurrences (`zeus-kfp show` lists them); a run killed outright holds its "
    "slot until --dispatch-timeout passes (0 when nothing else runs this job)"
)


def no_model_hint(trial_log: str) -> str:
    """Where the model is not: the files the script wrote that went with its work directory, when it wrote
    any (zeus_kfp.steps.keep), and how to keep one."""
    # deferred: zeus_kfp.steps loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.steps.keep import DELETED_NOTE

    note = Path(trial_log) / DELETED_NOTE if trial_log else None
    if note is None or not note.is_file():
        return NO_MODEL_HINT
    return f"none: {note.read_text().strip()}, or save it to {{log_dir}}/model.pt"


def print_recurrence(out, summary, *, wide: bool, script: bool) -> None:
    """One recurrence's trials; for a script job, where the model of the trial that reached went, and its logs.
    A run the recurrence gate skipped: one line saying why."""
    if summary.skipped:
        out.print(f"run {summary.recurrence_id}: {summary.skipped} (trained nothing)", markup=False, soft_wrap=True)
        if "no free slot" in summary.skipped:
            out.print(NO_SLOT_HINT, markup=False, soft_wrap=True)
        return
    verdict = "reached" if summary.reached else "did NOT reach"
    title = f"recurrence {summary.recurrence}: {verdict} the target in {len(summary.trials)} trial(s)"
    print_trials(out, title, summary.trials, RUN_TRIAL_FIELDS, wide=wide)
    if not script:
        return
    reached = next((t for t in summary.trials if t.reached), None)
    if reached is not None:
        files = summary.files_of(reached.attempt)
        model = files.model if files is not None and files.model else no_model_hint(files.log if files else "")
        out.print(f"  model (trial {reached.trial}): {model}", markup=False, soft_wrap=True)
    logs = sorted({str(Path(f.log).parent.parent) for f in summary.files if f.log})
    if logs:
        out.print(f"  trial logs: {', '.join(logs)} (attempt-<k>-train/trial_log)", markup=False, soft_wrap=True)


def _comparison_lines(comparison, policy: str, seed: int) -> list[str]:
    """A trace-backed job's cumulative figures against the default config, the oracle and the simulator."""
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.policy import policy_label

    c = comparison
    rows = [
        ("this job (kfp.local)", c.live),
        (f"simulator, seed {seed}", c.simulated),
        ("default config", c.default),
        ("oracle", c.oracle),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"cumulative over {c.num_recurrences} recurrence(s), policy {policy_label(policy)}:"]
    lines.append(f"  {'':{width}}  {'cost (J)':>10}  {'energy':>10}  {'time':>9}")
    for name, fig in rows:
        lines.append(
            f"  {name:{width}}  {si(fig.cost, ''):>10}  {si(fig.energy_j, 'J'):>10}  {duration(fig.time_s):>9}"
        )
    lines.append(f"{c.live.cost / c.oracle.cost:.3f}x the oracle's cost")
    if c.identical:
        lines.append("the simulator produced the same trials, trial by trial (batch size, power limit, status, cost)")
    else:
        lines.append(f"the simulator parts ways at {c.first_difference}")
    return lines


def epilogue(out, opened, spec, job, policy: str, summaries, plots_dir: Path, wide: bool) -> None:
    """After the last recurrence: the bandit's state, the job against its baselines, the plots."""
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.report import arm_frame, write_plots

    trials, profiles = opened.trials(spec.job_id), opened.profiles(spec.job_id)
    state = arm_frame(spec, opened.history(spec.job_id), policy)
    if not state.empty:
        print_bandit_state(out, state, wide=wide)
    lines = []
    if job.backend is not None:
        # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
        from zeus_kfp.simulate.replay import compare

        drifts = opened.drift_recurrences(spec.job_id)
        lines = _comparison_lines(compare(trials, spec, job.backend, policy, drifts), policy, spec.seed)
    lines += saving_lines(opened, spec, [s.recurrence for s in summaries])
    for line in lines:
        if line:
            out.print(line, markup=False, soft_wrap=True)
    plots = write_plots(trials, profiles, state, spec, plots_dir / spec.job_id)
    if any(s.simulated for s in summaries):
        sources = sorted({t.source for s in summaries for t in s.trials if t.simulated and t.source})
        source = " or ".join(sources) or "simulated"
        out.print(f"No GPU was measured: every power, energy, time and cost figure is {source}.", markup=False)
    out.print("plots: " + ", ".join(str(p) for p in plots), markup=False, soft_wrap=True)
    sys.stdout.flush()


def script_tail(log_dir: str, lines: int = TAIL_LINES) -> tuple[str, list[str]]:
    """(which file, its last `lines` non-empty lines) of the script's output kept in a trial's log."""
    for name in SCRIPT_OUTPUTS:
        path = Path(log_dir) / name if log_dir else None
        if path is not None and path.is_file():
            text = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
            if text:
                return name, text[-lines:]
    return "", []


REASON_CHARS = 800  # a failure's reason as `run` prints it: the metric watch's hints run to a few hundred


def whole_parts(reason: str, limit: int) -> str:
    """`reason` up to `limit` characters, cut between its "; "-separated parts, never inside one."""
    if len(reason) <= limit:
        return reason
    kept = ""
    for part in reason.split("; "):
        if len(kept) + len(part) + 2 > limit:
            break
        kept = f"{kept}; {part}" if kept else part
    return (kept or reason[:limit]) + " (...)"


def saving_lines(opened, spec, recurrences: list[int]) -> list[str]:
    """The saving against the default config, as `run` prints it: these recurrences, then the job's."""
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.report import savings_of

    trials, profiles = opened.trials(spec.job_id), opened.profiles(spec.job_id)
    return [line for line in savings_of(trials, profiles, spec).lines(recurrences) if line] if not trials.empty else []


def failure_lines(failed) -> list[str]:
    """What a person needs when a trial failed (pipelines.local.TrialFailed): which trial, why, the script's
    own last lines, where its whole log is, and what happens next."""
    trial = failed.trial
    reason = next((line.strip() for line in trial.reason.splitlines() if line.strip()), "no reason recorded")
    exited = EXIT_REASON.match(reason)
    reason = f"the script exited with code {exited.group(1)}" if exited else reason
    lines = [
        f"trial {trial.trial} (recurrence {trial.recurrence}, attempt {trial.attempt}, batch size "
        f"{trial.batch_size}) failed: {whole_parts(reason, REASON_CHARS)}"
    ]
    which, tail = script_tail(failed.log)
    if tail:
        lines.append(f"the script's last lines ({which}):")
        lines += [f"  | {line[:300]}" for line in tail]
    if failed.log:
        lines.append(f"its whole log: {failed.log}")
    lines.append(
        "a failure of the script itself is not retried with other batch sizes (they would fail the same way) "
        "and the bandit forgets it: fix the script or its inputs and run again"
    )
    return lines


def no_target_lines(summaries, spec) -> list[str]:
    """A run in which no recurrence reached the target: the best metric seen, and what to check."""
    seen = [t for s in summaries for t in s.trials if t.metric is not None]
    better = max if spec.higher_is_better else min
    best = better(seen, key=lambda t: t.metric) if seen else None
    where = f"the best {spec.metric_name} seen was {best.metric:g} (batch size {best.batch_size})" if best else (
        f"no trial reported {spec.metric_name}"
    )  # fmt: skip
    op = ">=" if spec.higher_is_better else "<="
    return [
        f"no recurrence of this run reached the target {spec.metric_name} {op} {spec.target_metric:g}: {where}; "
        f"check target_metric and max_epochs ({spec.max_epochs})"
    ]


EXIT_FAILED = FAILED
