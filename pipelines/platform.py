"""What a step's pod gets on a cluster: resources, the store's Secret and endpoint, retries, image pull
secrets, its namespace, and for train the GPUs, where it may be scheduled, shared memory and the zeusd
address; for a trial launched as a TrainJob / PyTorchJob, the same scheduling, handed to its pods through
the train step's environment (zeus_kfp.launch.config reads it). kfp.local ignores all of it.

Every setting here is one a KFP backend honours (see pipelines/backends.py and compat.py): retry
policies only where the target backend applies them, no display names, caching off everywhere.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kfp import kubernetes
from kfp.dsl import structures
from kfp.dsl.pipeline_task import PipelineTask

from zeus_kfp.errors import FieldError
from zeus_kfp.launch.config import CLUSTER_LAUNCHERS, DEFAULT_SHM_SIZE, DEFAULT_TRIAL_TIMEOUT_S, ENV, POD_NAMESPACE_ENV
from zeus_kfp.launch.handoff import STORE_SECRET_KEY_TO_ENV

# Keys of the Kubernetes Secret named by `minio_secret` (those of KFP's own
# mlpipeline-minio-artifact Secret) and the env vars zeus_kfp.store reads them from (a cluster trial's pods too).
SECRET_KEY_TO_ENV = STORE_SECRET_KEY_TO_ENV
ZEUSD_HOST_ENV = "ZEUSD_HOST"
ZEUSD_TOKEN_KEY = {"token": "ZEUSD_TOKEN"}  # the zeusd token Secret's key -> the variable zeus_kfp.power.zeusd reads
GPU_RESOURCE = "nvidia.com/gpu"

# Store steps retry with backoff (a store hiccup should not lose the run); train does not:
# a re-run trial would spend the energy twice, and a failing script is recorded, not raised.
STORE_RETRIES = 3
STORE_RETRY_BACKOFF = "30s"
STEPS = ("preprocess", "bandit", "train", "feedback", "report")


# What kfp's own setters accept (PipelineTask.set_cpu_limit / set_memory_limit).
_CPU = re.compile(r"([0-9]*[.])?[0-9]+m?")
_MEMORY = re.compile(r"[0-9]+(E|Ei|P|Pi|T|Ti|G|Gi|M|Mi|K|Ki)?")


@dataclass(frozen=True)
class Resources:
    """Kubernetes quantities for one step's container; None leaves that one unset."""

    cpu_request: str | None = None
    cpu_limit: str | None = None
    memory_request: str | None = None
    memory_limit: str | None = None

    def __post_init__(self) -> None:
        for name in ("cpu_request", "cpu_limit"):
            value = getattr(self, name)
            if value is not None and not _CPU.fullmatch(str(value)):
                raise FieldError(name, value, "CPUs as a number or millicores, e.g. 2, 0.5 or 500m")
        for name in ("memory_request", "memory_limit"):
            value = getattr(self, name)
            if value is not None and not _MEMORY.fullmatch(str(value)):
                raise FieldError(name, value, "bytes with an optional suffix K, M, G, T, Ki, Mi, Gi, Ti, e.g. 4Gi")


# Sane defaults: the store steps read and write small Parquet tables (report also draws plots);
# train runs the user's script. Train gets no CPU limit on purpose: CFS throttling slows a
# data loader and so the very trial whose energy is being measured; its memory is capped.
DEFAULT_RESOURCES: Mapping[str, Resources] = MappingProxyType(
    {
        "preprocess": Resources("500m", "2", "1Gi", "4Gi"),
        "bandit": Resources("250m", "1", "512Mi", "2Gi"),
        "feedback": Resources("250m", "1", "512Mi", "2Gi"),
        "report": Resources("250m", "1", "1Gi", "2Gi"),
        "train": Resources("4", None, "16Gi", "32Gi"),
    }
)


@dataclass(frozen=True)
class Toleration:
    """A pod toleration, written like a taint: `key[=value][:effect]` (no value = operator Exists)."""

    key: str
    value: str | None = None
    effect: str | None = None

    EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

    @classmethod
    def parse(cls, text: str) -> Toleration:
        body, _, effect = str(text).partition(":")
        key, sep, value = body.partition("=")
        allowed = (
            "key[=value][:effect] with effect NoSchedule, PreferNoSchedule or NoExecute, e.g. nvidia.com/gpu:NoSchedule"
        )
        if not re.fullmatch(r"[A-Za-z0-9][-A-Za-z0-9_./]*", key) or (effect and effect not in cls.EFFECTS):
            raise FieldError("toleration", text, allowed)
        if sep and not value:
            raise FieldError("toleration", text, allowed)
        return cls(key, value or None, effect or None)

    def to_k8s(self) -> dict[str, str]:
        """As a pod spec writes it (operator Equal with a value, else Exists)."""
        out = {"key": self.key, "operator": "Equal" if self.value else "Exists"}
        out |= {"value": self.value} if self.value else {}
        return out | ({"effect": self.effect} if self.effect else {})


# GPU nodes are commonly tainted nvidia.com/gpu:NoSchedule (GKE does it, the NVIDIA GPU operator
# docs recommend it); tolerating it costs nothing on clusters without the taint.
GPU_TOLERATION = Toleration(GPU_RESOURCE, None, "NoSchedule")


@dataclass(frozen=True)
class ClusterOptions:
    """What only a cluster uses.

    gpus: GPUs train requests as `accelerator` (the resource name, nvidia.com/gpu); 0 runs train on
    CPU (the power profile is then simulated). minio_secret: a Secret with keys accesskey and
    secretkey; s3_endpoint: the store as http(s)://host:port (not secret, so plain env). zeusd: give
    train the node's IP as ZEUSD_HOST so power limits go through the zeusd DaemonSet; zeusd_token_secret: a
    Secret whose key `token` is zeusd's bearer token (its JWT auth), given to train and a cluster trial's pods
    as ZEUSD_TOKEN, by reference (deploy/zeusd: any pod that reaches a node's port may otherwise set limits).
    retries_nested / secret_optional_field / security_context: what the target backend honours.
    """

    gpus: int = 1
    accelerator: str = GPU_RESOURCE
    minio_secret: str | None = None
    s3_endpoint: str | None = None
    zeusd: bool = True
    zeusd_token_secret: str | None = None
    store_retries: int = STORE_RETRIES
    retries_nested: bool = True
    secret_optional_field: bool = True
    resources: Mapping[str, Resources] = field(default_factory=lambda: DEFAULT_RESOURCES)
    train_node_selector: tuple[tuple[str, str], ...] = ()
    train_tolerations: tuple[Toleration, ...] = (GPU_TOLERATION,)
    run_as_user: int | None = None
    launcher: str = "local"  # the runs' default launcher: trainjob / pytorchjob leave train without a GPU
    image_pull_secrets: tuple[str, ...] = ()
    shm_size: str | None = DEFAULT_SHM_SIZE  # /dev/shm of train and of a cluster trial's pods (None: the runtime's)
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S  # bounds a cluster trial's job (activeDeadlineSeconds)
    namespace_env: bool = True  # give every step its pod's namespace (kfp.local has no pods: LOCAL says False)

    @property
    def trials_use_gpus(self) -> bool:
        """Trials hold GPUs: train's own, or a launched job's pods' (which request `accelerator`)."""
        return self.gpus > 0 or (self.launcher in CLUSTER_LAUNCHERS and bool(self.accelerator))


# kfp.local honours set_retry with its backoff (30 s, 60 s, 120 s): locally a failing store step
# should fail at once with its message (the store already retries its own requests).
LOCAL = ClusterOptions(
    gpus=0, zeusd=False, store_retries=0, resources={}, train_tolerations=(), shm_size=None, namespace_env=False
)


def _resources(task: PipelineTask, res: Resources | None, accelerator: str | None = None, count: int = 0) -> None:
    """The container's ResourceSpec in one assignment. kfp's per-field setters (set_cpu_limit, ...,
    set_accelerator_limit) give the same ResourceSpec but each calls inspect.stack(), which made
    compiling several times slower at 4-6 calls on each of 2 + 4N tasks (benchmarks/RESULTS.md). The
    values were validated as kfp's setters would (Resources.__post_init__)."""
    res = res or Resources()
    if res == Resources() and not count:
        return
    task.container_spec.resources = structures.ResourceSpec(
        cpu_request=res.cpu_request,
        cpu_limit=res.cpu_limit,
        memory_request=res.memory_request,
        memory_limit=res.memory_limit,
        accelerator_type=accelerator if count else None,
        accelerator_count=str(count) if count else None,
    )


def _common(task: PipelineTask, step: str, opts: ClusterOptions, gpus: int = 0) -> None:
    task.set_caching_options(False)  # a cached step would replay an old decision, trial or store read
    # The pod's namespace, from the downward API: "{namespace}" in the store URI is the run's own (the
    # default store names none, so a shared pipeline keeps every namespace's jobs apart).
    if opts.namespace_env:
        kubernetes.use_field_path_as_env(task, POD_NAMESPACE_ENV, "metadata.namespace")
    _resources(task, opts.resources.get(step), opts.accelerator, gpus)
    if opts.image_pull_secrets:  # a private registry: every step's image, not only train's
        kubernetes.set_image_pull_secrets(task, list(opts.image_pull_secrets))
    if opts.run_as_user is not None:
        kubernetes.set_security_context(task, run_as_user=opts.run_as_user, run_as_non_root=opts.run_as_user != 0)


def _on_gpu_nodes(task: PipelineTask, opts: ClusterOptions) -> None:
    """Where the trials' GPUs are: the tolerations (the GPU taint by default) and the node selector."""
    for t in opts.train_tolerations:
        kubernetes.add_toleration(task, key=t.key, operator=t.to_k8s()["operator"], value=t.value, effect=t.effect)
    for key, value in opts.train_node_selector:
        kubernetes.add_node_selector(task, label_key=key, label_value=value)


def store_step(task: PipelineTask, step: str, opts: ClusterOptions, *, nested: bool) -> PipelineTask:
    """A step that reads or writes the store: never cached, retried where the backend honours a
    retry (root tasks always; nested ones from KFP 2.14), given the store's Secret and endpoint."""
    _common(task, step, opts)
    if opts.store_retries and (opts.retries_nested or not nested):
        task.set_retry(num_retries=opts.store_retries, backoff_duration=STORE_RETRY_BACKOFF, backoff_factor=2.0)
    if opts.minio_secret:
        kubernetes.use_secret_as_env(task, secret_name=opts.minio_secret, secret_key_to_env=SECRET_KEY_TO_ENV)
        if not opts.secret_optional_field:
            _drop_secret_optional(task)
    if opts.s3_endpoint:
        # What task.set_env_variable does, without its inspect.stack() call (see _resources).
        task.container_spec.env = {**(task.container_spec.env or {}), "ZEUS_S3_ENDPOINT": opts.s3_endpoint}
    return task


def _drop_secret_optional(task: PipelineTask) -> None:
    """kfp-kubernetes >= 2.15 always writes secretAsEnv[].optional (false unless asked); backends
    before 2.15 do not know the field (kubeflow/pipelines #12495, #12049). Its absence means false."""
    for binding in task.platform_config.get("kubernetes", {}).get("secretAsEnv", []):
        if binding.pop("optional", False):
            raise FieldError("secretAsEnv.optional", True, "false on KFP backends before 2.15")


def train_step(task: PipelineTask, opts: ClusterOptions) -> PipelineTask:
    """Train: never cached (a cached trial would be recorded as a new one), never retried (a
    re-run trial spends the energy twice), on GPU nodes, with the node's IP for zeusd and shared memory
    for NCCL and DataLoader workers. Compiled for a cluster launcher, it only controls the trial's job:
    no GPU, and no GPU-node scheduling (the job's pods get that)."""
    _common(task, "train", opts, gpus=opts.gpus)
    if opts.gpus > 0 or opts.launcher not in CLUSTER_LAUNCHERS:
        if opts.gpus > 0:  # the GPU taint only matters to a pod that requests a GPU
            _on_gpu_nodes(task, opts)
        else:
            for key, value in opts.train_node_selector:
                kubernetes.add_node_selector(task, label_key=key, label_value=value)
        if opts.shm_size:
            kubernetes.empty_dir_mount(task, "dshm", "/dev/shm", medium="Memory", size_limit=opts.shm_size)
    if opts.zeusd:
        kubernetes.use_field_path_as_env(task, ZEUSD_HOST_ENV, "status.hostIP")
        if opts.zeusd_token_secret:
            kubernetes.use_secret_as_env(task, secret_name=opts.zeusd_token_secret, secret_key_to_env=ZEUSD_TOKEN_KEY)
            if not opts.secret_optional_field:
                _drop_secret_optional(task)
    return task


def gpu_power_step(task: PipelineTask, opts: ClusterOptions) -> PipelineTask:
    """gpu-power: on a GPU like the trials' (one of `accelerator`, their nodes), to read its maximum power limit."""
    gpus = 1 if opts.trials_use_gpus else 0
    _common(task, "gpu_power", opts, gpus=gpus)
    if gpus:
        _on_gpu_nodes(task, opts)
    return task


def cluster_launch(task: PipelineTask, opts: ClusterOptions, image: str) -> PipelineTask:
    """What train needs when its `launcher` parameter is trainjob or pytorchjob (zeus_kfp.launch): the image the
    trial's pods run, and the store, whose keys the pods get from the same Secret, by its name, and through
    which the step reads rank 0's result back; the pods inherit train's scheduling (GPU resource name,
    tolerations, node selector), image pull secrets and shared memory, and the trial's timeout bounds their
    job. Set always: the launcher is a run parameter."""
    env = {
        "ZEUS_LAUNCH_IMAGE": image,
        ENV["gpu_resource"]: opts.accelerator,
        ENV["tolerations"]: json.dumps([t.to_k8s() for t in opts.train_tolerations]),
        ENV["node_selector"]: json.dumps(dict(opts.train_node_selector)),
        ENV["timeout_s"]: f"{opts.trial_timeout_s:g}",
        ENV["step_gpus"]: str(opts.gpus),  # train refuses a cluster launcher while it holds GPUs itself
    }
    if opts.zeusd and opts.zeusd_token_secret:  # the pods get ZEUSD_TOKEN from it too, by reference
        env[ENV["zeusd_token_secret"]] = opts.zeusd_token_secret
    if opts.image_pull_secrets:
        env[ENV["image_pull_secrets"]] = ",".join(opts.image_pull_secrets)
    if opts.shm_size:
        env[ENV["shm_size"]] = opts.shm_size
    if opts.minio_secret:
        kubernetes.use_secret_as_env(task, secret_name=opts.minio_secret, secret_key_to_env=SECRET_KEY_TO_ENV)
        if not opts.secret_optional_field:
            _drop_secret_optional(task)
        env["ZEUS_S3_SECRET_NAME"] = opts.minio_secret
    if opts.s3_endpoint:
        env["ZEUS_S3_ENDPOINT"] = opts.s3_endpoint
    # What task.set_env_variable does, without its inspect.stack() call (see _resources).
    task.container_spec.env = {**(task.container_spec.env or {}), **env}
    return task


STORE_STEPS = ("preprocess", "bandit", "feedback", "report")


def parse_resources(requests: list[str] | None = None, limits: list[str] | None = None) -> dict[str, Resources]:
    """`--requests STEP=CPU,MEMORY` / `--limits STEP=CPU,MEMORY` over DEFAULT_RESOURCES.

    STEP is one of STEPS or `store` (the four store steps); an empty CPU or MEMORY keeps the
    default, `-` unsets it (e.g. `--limits train=-,64Gi`: no CPU limit, 64Gi memory)."""
    out = dict(DEFAULT_RESOURCES)
    allowed = "STEP=CPU,MEMORY with STEP one of " + ", ".join((*STEPS, "store")) + ", e.g. train=4,16Gi"
    for kind, items in (("request", requests or []), ("limit", limits or [])):
        for item in items:
            step, sep, values = str(item).partition("=")
            cpu, comma, memory = values.partition(",")
            steps = STORE_STEPS if step == "store" else (step,)
            if not sep or not comma or not all(s in STEPS for s in steps):
                raise FieldError(f"{kind}s", item, allowed)
            for s in steps:
                changes = {}
                for field_name, value in ((f"cpu_{kind}", cpu), (f"memory_{kind}", memory)):
                    if value.strip():
                        changes[field_name] = None if value.strip() == "-" else value.strip()
                out[s] = dataclasses.replace(out[s], **changes)
    return out


def parse_node_selector(pairs: list[str] | None) -> dict[str, str]:
    """`--train-node-selector KEY=VALUE` (repeatable), e.g. nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3."""
    out = {}
    for pair in pairs or []:
        key, sep, value = str(pair).partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z0-9][-A-Za-z0-9_./]*", key):
            example = "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB"
            raise FieldError("train_node_selector", pair, f"KEY=VALUE, e.g. {example}")
        out[key] = value
    return out


def parse_tolerations(items: list[str] | None) -> tuple[Toleration, ...] | None:
    """`--train-toleration KEY[=VALUE][:EFFECT]` (repeatable); none given: None (the default,
    GPU_TOLERATION); `none`: no toleration at all."""
    if not items:
        return None
    if [str(i).strip().lower() for i in items] == ["none"]:
        return ()
    return tuple(Toleration.parse(i) for i in items)
