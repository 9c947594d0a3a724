"""Which job `zeus-kfp run` runs: a trace replay (default), the bundled example, or your own command.

One function decides, from the options, the JobSpec and the run_local arguments, and refuses a
mix that would be ignored (a --spec with the example, two of --trace/--script/--command), naming
the options: a silently ignored option is worse than an error. The run settings (the recurrence gate's,
the dispatch timeout: zeus_kfp.run_settings) are no part of it: they say how a run runs, for any job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zeus_kfp.cli.own_job import load_spec_file, option_name, own_spec, split_command
from zeus_kfp.errors import FieldError

DEFAULT_ATTEMPTS = 5  # pipelines.dag.DEFAULT_ATTEMPTS, for the trace and example jobs


@dataclass(frozen=True)
class LocalJob:
    """What `run` runs: the spec, a phrase for the header, the trace backend (None: a script) and the
    keyword arguments for pipelines.local.run_local."""

    spec: Any
    what: str
    backend: Any = None
    run_args: dict[str, Any] = field(default_factory=dict)


def choose_job(
    *,
    trace: str | None,
    script: str | None,
    command: str | None,
    spec_file: Path | None,
    job_id: str | None,
    attempts: int | None,
    seed: int | None,
    zeus_aware: bool,
    metric_pattern: str | None,
    preprocess: str | None,
    fields: dict[str, Any],
    default_trace: str,
    example_job: str,
) -> LocalJob:
    chosen = [name for name, value in (("--trace", trace), ("--script", script), ("--command", command)) if value]
    if len(chosen) > 1:
        raise FieldError("job", " and ".join(chosen), "one of --trace, --script or --command")
    own = spec_file is not None or zeus_aware or metric_pattern or preprocess is not None
    if command is None and (own or any(value is not None for value in fields.values())):
        settings = ", ".join(option_name(name) for name in fields)  # the setting options `run` has (own_job)
        allowed = f"--spec, {settings}, --zeus-aware, --metric-pattern and --preprocess"
        raise FieldError("options", "given without --command", f"{allowed} only with --command")
    changes = {name: value for name, value in (("max_attempts", attempts), ("seed", seed)) if value is not None}
    if command is not None:
        return _own_job(command, spec_file, job_id, changes, zeus_aware, metric_pattern, preprocess, fields)
    if script is not None:
        return _example_job(script, f"{example_job}-{script}" if job_id is None else job_id, changes)
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.simulate.trace_trial import TRACE_PREFIX, TraceBackend

    backend = TraceBackend.parse(TRACE_PREFIX + (trace or default_trace))
    # An empty --job-id (`--job-id "$JOB"` with JOB unset) is a bad job id, not the example's.
    spec = backend.spec(example_job if job_id is None else job_id, **{"max_attempts": DEFAULT_ATTEMPTS, **changes})
    return LocalJob(spec, backend.source, backend, {"trial_backend": backend.name})


def _example_job(script: str, job_id: str, changes: dict[str, Any]) -> LocalJob:
    # deferred: kfp takes seconds to import, and `zeus-kfp --help` loads every command module
    from zeus_kfp.pipelines.dag import EXAMPLE_PREPROCESS
    from zeus_kfp.power import max_power_limit_w
    from zeus_kfp.train import example_command, example_spec

    if script not in ("zeus", "plain"):
        raise FieldError("script", script, "zeus, plain")
    spec = example_spec(job_id=job_id).with_changes(**{"max_attempts": DEFAULT_ATTEMPTS, **changes})
    max_w, simulated = max_power_limit_w()
    if not simulated:  # price time at this GPU's maximum power (Zeus's MAXPOWER), not the simulated V100's
        spec = spec.with_changes(max_power_w=max_w)
    args = {"command": example_command(script), "preprocess": EXAMPLE_PREPROCESS, "zeus_aware": script == "zeus"}
    return LocalJob(spec, f"the {script} example script", None, args)


def _own_job(
    command: str,
    spec_file: Path | None,
    job_id: str | None,
    changes: dict[str, Any],
    zeus_aware: bool,
    metric_pattern: str | None,
    preprocess: str | None,
    fields: dict[str, Any],
) -> LocalJob:
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.power import max_power_limit_w

    options = dict(fields, job_id=job_id, **changes)
    spec = own_spec(spec_file, options)
    explicit_power = fields.get("max_power_w") is not None or (
        spec_file is not None and "max_power_w" in _file_fields(spec_file)
    )
    if not explicit_power:  # price time at this machine's GPU (or the simulated one's) maximum power
        spec = spec.with_changes(max_power_w=max_power_limit_w()[0])
    args = {
        "command": split_command(command),
        "zeus_aware": zeus_aware,
        "metric_pattern": metric_pattern or "",
        "preprocess": preprocess or "",
    }
    kind = "Zeus-aware" if zeus_aware else "plain"
    return LocalJob(spec, f"your {kind} command", None, args)


def _file_fields(path: Path) -> dict[str, Any]:
    return load_spec_file(path)
