"""The recurrence pipeline: preprocess -> N guarded attempts -> report, built by one function for
both the cluster (compile) and kfp.local (run), so the two can never drift apart.

KFP v2 has no recursion, so the retry loop is unrolled: attempt 1 always runs; attempt k > 1 is
the `attempt` sub-pipeline (bandit -> train -> feedback) under dsl.If(previous not reached),
with a pass-through under dsl.Else (kfp.local silently skips an If without an Else), and
dsl.OneOf joins the two into "reached so far". N is fixed at compile time.

Cluster-only settings (GPU request, the MinIO Secret, the zeusd address) are platform
configuration that kfp.local ignores; they are set only when asked for.
"""
# No `from __future__ import annotations` here: kfp reads the pipeline functions' annotations as types.

from dataclasses import dataclass

from kfp import dsl, kubernetes
from kfp.dsl import Dataset, Input
from kfp.dsl.pipeline_task import PipelineTask

from components.registry import ZeusComponents, components_for
from zeus.job import JobSpec
from zeus.steps import spec_to_params

DEFAULT_ATTEMPTS = 5
# The example job's preprocessing (module:function, run by the preprocess step).
EXAMPLE_PREPROCESS = "zeus.train.example:make_dataset"
PIPELINE_NAME = "zeus-recurrence"

# Keys of the Kubernetes Secret named by `minio_secret` (those of KFP's own
# mlpipeline-minio-artifact Secret) and the env vars zeus.store reads them from.
SECRET_KEY_TO_ENV = {"accesskey": "ZEUS_S3_ACCESS_KEY", "secretkey": "ZEUS_S3_SECRET_KEY"}
ZEUSD_HOST_ENV = "ZEUSD_HOST"
GPU_RESOURCE = "nvidia.com/gpu"

# Store steps retry with backoff (a store hiccup should not lose the run); train does not:
# a re-run trial would spend the energy twice, and a failing script is recorded, not raised.
STORE_RETRIES = 3
STORE_RETRY_BACKOFF = "30s"


@dataclass(frozen=True)
class ClusterOptions:
    """What only a cluster uses. gpus=0 runs train on CPU (the power profile is then simulated).

    minio_secret names a Secret with keys `accesskey` and `secretkey`; s3_endpoint/s3_secure say
    where the store is (not secret, so plain env). zeusd: give train the node's IP as ZEUSD_HOST
    so the power backend can reach the zeusd daemon (pods cannot set power limits themselves).
    """

    gpus: int = 1
    minio_secret: str | None = None
    s3_endpoint: str | None = None
    s3_secure: bool = False
    zeusd: bool = True
    store_retries: int = STORE_RETRIES


# kfp.local honours set_retry with its backoff (30 s, 60 s, 120 s): locally a failing store step
# should fail at once with its message (the store already retries its own requests).
LOCAL = ClusterOptions(gpus=0, zeusd=False, store_retries=0)


def _store_task(task: PipelineTask, opts: ClusterOptions) -> PipelineTask:
    """Never cached (a cached step would replay old store reads), retried, given store credentials."""
    task.set_caching_options(False)
    if opts.store_retries:
        task.set_retry(num_retries=opts.store_retries, backoff_duration=STORE_RETRY_BACKOFF, backoff_factor=2.0)
    if opts.minio_secret:
        kubernetes.use_secret_as_env(task, secret_name=opts.minio_secret, secret_key_to_env=SECRET_KEY_TO_ENV)
    if opts.s3_endpoint:
        task.set_env_variable("ZEUS_S3_ENDPOINT", opts.s3_endpoint)
        task.set_env_variable("ZEUS_S3_SECURE", "true" if opts.s3_secure else "false")
    return task


def _train_task(task: PipelineTask, opts: ClusterOptions) -> PipelineTask:
    task.set_caching_options(False)  # a cached trial would be recorded as a new one
    if opts.gpus > 0:
        task.set_accelerator_type(GPU_RESOURCE).set_accelerator_limit(opts.gpus)
    if opts.zeusd:
        kubernetes.use_field_path_as_env(task, ZEUSD_HOST_ENV, "status.hostIP")
    return task


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
    name: str = PIPELINE_NAME,
):
    """The pipeline function (a kfp GraphComponent). `spec`, `command`, `store_uri`, `policy` and
    `preprocess` are only the parameters' defaults; every run may override them. The compiled
    attempt count is the spec's max_attempts (a job's spec records how many attempts it gets)."""
    if not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"invalid attempts={attempts!r}: allowed a positive integer")
    comps: ZeusComponents = components_for(image)
    defaults = spec_to_params(spec.with_changes(max_attempts=attempts))
    opts = options

    @dsl.pipeline(name="zeus-attempt", description="One trial: bandit -> train -> feedback.")
    def attempt_pipeline(
        spec_json: str,
        store_uri: str,
        job_id: str,
        recurrence_id: str,
        attempt: int,
        policy: str,
        train_command: list,
        zeus_aware: bool,
        metric_pattern: str,
        metrics_collector: str,
        trial_backend: str,
        reprofile: bool,
        data: Input[Dataset],
    ) -> bool:
        choice = comps.bandit(
            store_uri=store_uri,
            job_id=job_id,
            recurrence_id=recurrence_id,
            attempt=attempt,
            policy=policy,
            run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            reprofile=reprofile,
        ).set_display_name("bandit")
        _store_task(choice, opts)
        trial = comps.train(
            spec_json=spec_json,
            batch_size=choice.outputs["batch_size"],
            cost_threshold=choice.outputs["cost_threshold"],
            command=train_command,
            zeus_aware=zeus_aware,
            metric_pattern=metric_pattern,
            metrics_collector=metrics_collector,
            trial_backend=trial_backend,
            seed=choice.outputs["trial_seed"],
            data=data,
            reuse_profile=choice.outputs["reuse_profile"],
        ).set_display_name("train")
        _train_task(trial, opts)
        fed = comps.feedback(
            store_uri=store_uri,
            job_id=job_id,
            recurrence_id=recurrence_id,
            attempt=attempt,
            policy=policy,
            result_json=trial.outputs["result_json"],
            profile=trial.outputs["profile"],
        ).set_display_name("feedback")
        _store_task(fed, opts)
        return fed.output

    @dsl.pipeline(
        name=name,
        description=(
            f"One recurrence of an energy-optimal training job (Zeus, NSDI'23): up to {attempts} trials, "
            "each with a batch size from the bandit and just-in-time GPU power-limit profiling."
        ),
    )
    def zeus_recurrence(
        job_id: str = defaults["job_id"],
        batch_sizes: list = defaults["batch_sizes"],
        default_batch_size: int = defaults["default_batch_size"],
        target_metric: float = defaults["target_metric"],
        max_epochs: int = defaults["max_epochs"],
        higher_is_better: bool = defaults["higher_is_better"],
        metric_name: str = defaults["metric_name"],
        eta_knob: float = defaults["eta_knob"],
        beta_knob: float = defaults["beta_knob"],
        num_pruning_rounds: int = defaults["num_pruning_rounds"],
        window_size: int = defaults["window_size"],
        seed: int = defaults["seed"],
        num_gpus: int = defaults["num_gpus"],
        max_power_w: float = defaults["max_power_w"],
        reprofile_after: int = defaults["reprofile_after"],
        store_uri: str = store_uri,
        policy: str = policy,
        train_command: list = list(command),  # noqa: B006  (a KFP parameter default, never mutated)
        zeus_aware: bool = True,
        metric_pattern: str = "",
        metrics_collector: str = "",
        trial_backend: str = trial_backend,
        reprofile: bool = False,
        preprocess_ref: str = preprocess,
        recurrence_id: str = "",
        owner: str = "",
    ) -> bool:
        prep = comps.preprocess(
            job_id=job_id,
            batch_sizes=batch_sizes,
            default_batch_size=default_batch_size,
            target_metric=target_metric,
            max_epochs=max_epochs,
            higher_is_better=higher_is_better,
            metric_name=metric_name,
            eta_knob=eta_knob,
            beta_knob=beta_knob,
            max_attempts=attempts,
            num_pruning_rounds=num_pruning_rounds,
            window_size=window_size,
            seed=seed,
            num_gpus=num_gpus,
            max_power_w=max_power_w,
            reprofile_after=reprofile_after,
            store_uri=store_uri,
            run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            recurrence_id=recurrence_id,
            preprocess_ref=preprocess_ref,
            owner=owner,
        ).set_display_name("preprocess")
        _store_task(prep, opts)
        shared = dict(
            spec_json=prep.outputs["spec_json"],
            store_uri=store_uri,
            job_id=job_id,
            recurrence_id=prep.outputs["recurrence_id"],
            policy=policy,
            train_command=train_command,
            zeus_aware=zeus_aware,
            metric_pattern=metric_pattern,
            metrics_collector=metrics_collector,
            trial_backend=trial_backend,
            reprofile=reprofile,
            data=prep.outputs["data"],
        )
        # Caching off on the attempt sub-pipelines too, not only on their steps: a cached sub-DAG
        # would replay an old attempt's "reached" without dispatching a trial.
        reached = attempt_pipeline(attempt=1, **shared).set_display_name("attempt-1").set_caching_options(False).output
        for k in range(2, attempts + 1):
            with dsl.If(reached == False, name=f"attempt-{k}-needed"):  # noqa: E712  (a KFP condition, not Python)
                tried = (
                    attempt_pipeline(attempt=k, **shared).set_display_name(f"attempt-{k}").set_caching_options(False)
                )
            with dsl.Else(name=f"attempt-{k}-skipped"):
                skipped = comps.passthrough(reached=reached).set_display_name(f"reached-before-{k}")
            reached = dsl.OneOf(tried.output, skipped.output)
        rep = comps.report(
            store_uri=store_uri, job_id=job_id, recurrence_id=prep.outputs["recurrence_id"], reached=reached
        ).set_display_name("report")
        _store_task(rep, opts)
        return reached

    return zeus_recurrence
