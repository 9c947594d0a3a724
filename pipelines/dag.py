"""The recurrence pipeline: gate -> preprocess -> up to N attempts -> report, built by one function for both
the cluster (compile) and kfp.local (run), so the two can never drift apart.

Why this shape. KFP v2 has no recursion, so the retry loop is unrolled, N fixed at compile time.
Attempt k+1 is nested inside attempt k's "not ended" branch (feedback's output: the trial neither
reached the target nor failed; a failed trial is the script's own failure, which another batch size
would only repeat, so it ends the recurrence: zeus_kfp.steps.feedback.ends_recurrence):

    [gpu-power ->] gate
    If the gate opened a recurrence (zeus_kfp.steps.gate; a skipped run ends here, nothing trains):
        preprocess, attempt-1-bandit -> attempt-1-train -> attempt-1-feedback
        If attempt-1 not ended:                     Else:
            attempt-2-bandit -> -train -> -feedback     report-after-attempt-1
            If attempt-2 not ended:                 Else:
                ...                                     report-after-attempt-2
                    attempt-N-...-feedback -> report-after-attempt-N

It is the shape every target backend (KFP 2.5, 2.15, 2.17) runs to completion; the earlier one
(each attempt a sub-pipeline under dsl.If, a pass-through under dsl.Else, joined with dsl.OneOf)
fails on all of them. Each choice, with the backend issue behind it (pipelines/compat.py checks
every compiled pipeline against these rules):

- No dsl.OneOf and no pass-through step: nothing needs joining, because whatever comes after an
  attempt sits inside that attempt's branch. (A cached pass-through never completes its
  condition DAG and the OneOf then fails: "processing OneOf: No successful task found".)
- No sub-pipeline: an attempt's bandit, train and feedback are inlined by `_attempt`, so a
  condition only ever holds plain tasks (before 2.17 a sub-pipeline inside an If never completes
  its condition DAG: kubeflow/pipelines #11979, fixed by #13322).
- No set_display_name and no dsl.If(name=...): up to 2.5 the backend records a task under its
  display name, so a consumer's producer lookup fails (#11173). The UI graph reads "attempt 1,
  attempt 2, ..." through the tasks' own names instead: each attempt's components are renamed
  `attempt-<k>-bandit` and so on (components.registry.renamed).
- Caching off on every task (none is provably harmless: a cached bandit replays an old decision,
  a cached train records an old trial as new, and on a cache hit the launcher never updates its
  condition DAG, which then never completes).
- Retries on the store steps only where the backend honours them: nested tasks from 2.14
  (#11288 -> #11908), root tasks from 2.4.1 (platform.store_step). Inside the gate's condition every
  step but the gate is nested, so before 2.14 only the gate (and gpu-power) is retried.
- The gate's output is a single bool (`gate-Output`): kfp.local 2.17 cannot resolve a named output in
  a condition and silently skips the branch.
- The report runs exactly once per recurrence, after the last attempt that ran: in the branch
  where the attempt ended the recurrence, or after the last attempt. Each attempt has at most 3
  pods (bandit, train, feedback); the report is the recurrence's, not an attempt's.

Cluster-only settings (resources, GPUs, the Secret, zeusd) are platform configuration that
kfp.local ignores (pipelines/platform.py).
"""
# No `from __future__ import annotations` here: kfp reads the pipeline functions' annotations as types.

import inspect
from typing import Any

from kfp import dsl
from kfp.dsl.pipeline_task import PipelineTask

from zeus_kfp.components.registry import ZeusComponents, components_for, renamed
from zeus_kfp.job import JobSpec
from zeus_kfp.pipelines.platform import LOCAL, ClusterOptions, cluster_launch, gpu_power_step, store_step, train_step
from zeus_kfp.pipelines.recurrence import recurrence_function
from zeus_kfp.run_settings import RunSettings
from zeus_kfp.settings import SettingField, settings_of
from zeus_kfp.steps import spec_to_params
from zeus_kfp.steps.request import Source, request_fields, wired
from zeus_kfp.steps.request import run_parameters as request_run_parameters

DEFAULT_ATTEMPTS = 5
# max_power_w's default in a pipeline that reads it at run time (zeus_kfp.steps.gpu_power), and what the KFP UI
# says of it.
READ_FROM_GPU = 0.0
MAX_POWER_READ_HELP = (
    "The GPU's maximum power limit in watts, at which time is priced. 0 (the default): read from the GPU at run "
    "time by the gpu-power step (NVML, on a GPU like the trials'); set it to pin a figure."
)
# The example job's preprocessing (module:function, run by the preprocess step).
EXAMPLE_PREPROCESS = "zeus_kfp.train.example:make_dataset"
PIPELINE_NAME = "zeus-recurrence"

__all__ = ["DEFAULT_ATTEMPTS", "EXAMPLE_PREPROCESS", "LOCAL", "PIPELINE_NAME", "ClusterOptions", "build_pipeline"]


def attempt_task_name(k: int, step: str) -> str:
    """The task (and component) name of attempt k's step: what the KFP UI shows."""
    return f"attempt-{k}-{step}"


def report_task_name(k: int) -> str:
    return f"report-after-attempt-{k}"


def _attempt(comps: ZeusComponents, k: int, shared: dict[str, Any], opts: ClusterOptions) -> PipelineTask:
    """Attempt k's tasks: bandit -> train -> feedback; returns feedback (its output: did the recurrence end?).

    `shared` holds what every attempt takes from the pipeline's parameters and from preprocess,
    so a new pipeline parameter an attempt needs is one edit where `shared` is built."""
    # What the two store steps of an attempt both take: where the job is, and which attempt this is.
    trial_key = {name: shared[name] for name in ("store_uri", "job_id", "recurrence_id")} | {"attempt": k}
    choice = renamed(comps.bandit, attempt_task_name(k, "bandit"))(
        **trial_key,
        policy=shared["policy"],
        run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        reprofile=shared["reprofile"],
        dispatch_timeout_s=shared["dispatch_timeout_s"],
    )
    store_step(choice, "bandit", opts, nested=True)  # in the gate's condition, as every step after it
    trial = renamed(comps.train, attempt_task_name(k, "train"))(
        **train_arguments(shared=shared, bandit=choice, attempt=k),
        data=shared["data"],
        reuse_profile=choice.outputs["reuse_profile"],
    )
    train_step(trial, opts)
    cluster_launch(trial, opts, shared["launch_image"])
    fed = renamed(comps.feedback, attempt_task_name(k, "feedback"))(
        **trial_key, result_json=trial.outputs["result_json"], profile=trial.outputs["profile"]
    )
    store_step(fed, "feedback", opts, nested=True)
    return fed


def train_arguments(*, shared: dict[str, Any], bandit: PipelineTask, attempt: int) -> dict[str, Any]:
    """Attempt `attempt`'s train inputs, each where the request declares it comes from (zeus_kfp.steps.request):
    a pipeline run parameter or a preprocess output (both in `shared`), the attempt's bandit's output, or the
    attempt's number. Every declared field is bound: a new one needs no edit here."""
    bound: dict[str, Any] = {}
    for field in request_fields():
        where = wired(field)
        if where.source is Source.BANDIT:
            bound[field.name] = bandit.outputs[where.name]
        elif where.source is Source.PREPROCESS:
            bound[field.name] = shared["preprocess"].outputs[where.name]
        elif where.source is Source.ATTEMPT:
            bound[field.name] = attempt
        else:
            bound[field.name] = shared[where.name]
    return bound


def _report(comps: ZeusComponents, k: int, ended, shared: dict[str, Any], opts: ClusterOptions):
    task = renamed(comps.report, report_task_name(k))(
        store_uri=shared["store_uri"],
        job_id=shared["job_id"],
        recurrence_id=shared["recurrence_id"],
        reached=ended,
        policy=shared["policy"],
    )
    return store_step(task, "report", opts, nested=True)


def _attempts_from(comps: ZeusComponents, k: int, attempts: int, shared: dict[str, Any], opts: ClusterOptions):
    """Attempt k, then (k < attempts) attempt k+1 nested in its "not ended" branch and the report
    in its Else, or (k == attempts) the report right after it. Python recursion, not KFP's."""
    ended = _attempt(comps, k, shared, opts).output
    if k == attempts:
        _report(comps, k, ended, shared, opts)
        return
    # Always If + Else: kfp.local silently skips an If whose condition it cannot resolve, and the
    # Else is where the report of a recurrence that ended (reached the target, or failed) runs.
    with dsl.If(ended == False):  # noqa: E712  (a KFP condition, not Python)
        _attempts_from(comps, k + 1, attempts, shared, opts)
    with dsl.Else():
        _report(comps, k, ended, shared, opts)


def _request_default(name: str, field: SettingField, given: dict[str, Any]) -> Any:
    """A request run parameter's pipeline default: what the build was given, else the declared default."""
    if name in given:
        return given[name]
    if field.required:
        raise TypeError(f"the trial request's run parameter {name} has no default: declare one, or build_pipeline's")
    return field.default


def _with_help(doc: str, name: str, text: str) -> str:
    """`doc` (a Google-style docstring) with parameter `name` described as `text` instead."""
    lines = doc.splitlines(keepends=True)
    (at,) = [i for i, line in enumerate(lines) if line.lstrip().startswith(f"{name}: ")]
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    lines[at] = f"{indent}{name}: {text}\n"
    return "".join(lines)


def build_pipeline(
    spec: JobSpec,
    command: list[str],
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    store_uri: str = "",
    policy: str = "default",
    preprocess: str = "",
    trial_backend: str = "script",
    options: ClusterOptions = LOCAL,
    image: str | None = None,
    train_image: str | None = None,
    launch_image: str | None = None,
    name: str = PIPELINE_NAME,
    target: str | None = None,
    run_settings: RunSettings | None = None,
    zeus_aware: bool = True,
    metric_pattern: str = "",
    metrics_collector: str = "",
    keep: str = "",
    read_max_power: bool = False,
):
    """The pipeline function (a kfp GraphComponent). `spec`, `command`, `store_uri`, `policy` and
    `preprocess` are only the parameters' defaults; every run may override them. The compiled
    attempt count is the spec's max_attempts (a job's spec records how many attempts it gets).
    image / train_image: the store steps' image and train's (None: components.image defaults); launch_image:
    the image of a cluster trial's pods (launcher trainjob / pytorchjob; None: train's).
    target: the KFP backend it is compiled for, said in the description (`zeus-kfp doctor` reads it).
    run_settings: the defaults of the run parameters of its fields (None: RunSettings()): the recurrence gate's
    period, cap and drift detector, and the dispatch timeout after which the next bandit step records a trial
    unfinished failed (zeus_kfp.steps.abandoned). Run parameters beside the spec's, not JobSpec fields: they say
    how a run runs, not what the job is, so a schedule or submission may set its own without touching the job's
    stored spec. Only the gate takes them all; the bandit takes dispatch_timeout_s.
    zeus_aware / metric_pattern / metrics_collector / keep: the defaults of those run parameters (how train reads
    the script's metric, and which files it keeps as the model).
    read_max_power: the max_power_w parameter defaults to 0, "read the GPU's maximum power limit at run time",
    which the gpu-power step does before the gate registers the job (zeus_kfp.steps.gpu_power; a cluster compile's
    default); False: spec.max_power_w is the default and no gpu-power step runs (local runs, which read
    this machine's GPU before they start).

    The pipeline function's parameters are written out in pipelines/recurrence.py (pipelines/sources.py writes
    it from the declarations); this gives them this build's defaults and the steps its body wires."""
    run_settings = RunSettings() if run_settings is None else run_settings
    if not isinstance(run_settings, RunSettings):
        raise TypeError(f"build_pipeline takes run_settings as a RunSettings, not a {type(run_settings).__name__}")
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"invalid attempts={attempts!r}: allowed a positive integer")
    if type(spec) is not JobSpec:
        raise TypeError(
            f"build_pipeline takes a JobSpec, not a {type(spec).__name__}: the components and the pipeline's "
            "parameters are written out for JobSpec's settings (a new setting is a JobSpec field, then `make sources`)"
        )
    # gpu-power reads a GPU like the trials': on their pods' image when they hold GPUs, else train's.
    gpu_image = launch_image if options.trials_use_gpus else None
    comps: ZeusComponents = components_for(image, train_image, gpu_image=gpu_image)
    opts = options
    # The job's settings (zeus_kfp.settings): those that are run parameters, with `spec`'s values as defaults, and
    # those fixed at compile time (max_attempts), passed to the gate and preprocess as constants.
    compiled = spec_to_params(spec.with_changes(max_attempts=attempts))
    if read_max_power:
        compiled["max_power_w"] = READ_FROM_GPU
    setting_names = [f.name for f in settings_of(JobSpec) if f.setting.run_parameter]
    fixed = {name: compiled[name] for name in compiled.keys() - set(setting_names)}
    # The run settings (zeus_kfp.run_settings): run parameters all, with `run_settings`' values as defaults.
    run_defaults = spec_to_params(run_settings)
    # Then the trial request's run parameters (zeus_kfp.steps.request), each defaulting to what this build says
    # or else to its declared default, and the other steps' own. Any run may override each of them.
    build_defaults = {
        "store_uri": store_uri,
        "train_command": list(command),
        "zeus_aware": bool(zeus_aware),
        "metric_pattern": metric_pattern,
        "metrics_collector": metrics_collector,
        "keep": keep,
        "trial_backend": trial_backend,
        "launcher": opts.launcher,
        "policy": policy,
    }
    defaults = (
        {name: compiled[name] for name in setting_names}
        | run_defaults
        | {name: _request_default(name, f, build_defaults) for name, f in request_run_parameters()}
        | {
            "reprofile": False,
            "preprocess_ref": preprocess,
            "recurrence_id": "",
            "owner": "",
            "force": False,
        }
    )

    def steps(given: dict[str, Any]) -> None:
        """The pipeline's tasks, wired from `given`: the pipeline function's parameters (kfp channels) by name."""
        job_settings = {name: given[name] for name in setting_names}
        if read_max_power:  # first, on a GPU like the trials': the figure the job's cost prices time at
            probe = gpu_power_step(comps.gpu_power(max_power_w=given["max_power_w"]), opts)
            job_settings["max_power_w"] = probe.output
        run = dict(store_uri=given["store_uri"], run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                   recurrence_id=given["recurrence_id"])  # fmt: skip
        run_params = {name: given[name] for name in run_defaults}  # how this run runs: the gate's alone
        # The gate first (zeus_kfp.steps.gate): the rest runs only in a run that opened a recurrence. An If with no
        # Else: a skipped run has nothing left to do (its outcome is in the store).
        reads = {name: given[name] for name in ("zeus_aware", "metric_pattern", "metrics_collector", "keep")}
        opening = comps.gate(**job_settings, **fixed, **run_params, **reads, **run, owner=given["owner"],
                             force=given["force"])  # fmt: skip
        store_step(opening, "preprocess", opts, nested=False)  # the preprocess step's resources: it reads the data
        with dsl.If(opening.output == True):  # noqa: E712  (a KFP condition, not Python)
            # the spec as the gate agreed it, read from the store: no setting crosses twice
            prep = comps.preprocess(job_id=given["job_id"], **run, preprocess_ref=given["preprocess_ref"])
            store_step(prep, "preprocess", opts, nested=True)
            shared = {name: value for name, value in given.items() if name not in setting_names} | dict(
                job_id=given["job_id"],
                spec_json=prep.outputs["spec_json"],
                recurrence_id=prep.outputs["recurrence_id"],
                launch_image=launch_image or comps.train.component_spec.implementation.container.image,
                data=prep.outputs["data"],
                preprocess=prep,
            )
            _attempts_from(comps, 1, attempts, shared, opts)

    zeus_recurrence = recurrence_function(steps)
    names = list(inspect.signature(zeus_recurrence).parameters)
    if sorted(names) != sorted(defaults):
        raise RuntimeError("pipelines/recurrence.py differs from the declarations: run `make sources`")
    zeus_recurrence.__defaults__ = tuple(defaults[name] for name in names)
    if read_max_power:  # kfp reads a parameter's description (the KFP UI shows it) from the docstring's Args
        zeus_recurrence.__doc__ = _with_help(zeus_recurrence.__doc__, "max_power_w", MAX_POWER_READ_HELP)
    return dsl.pipeline(
        name=name,
        description=(
            f"One recurrence of an energy-optimal training job (Zeus, NSDI'23): up to {attempts} trials, "
            "each with a batch size from the bandit and just-in-time GPU power-limit profiling."
            + (f" Compiled for KFP backend {target}." if target else "")
        ),
    )(zeus_recurrence)
