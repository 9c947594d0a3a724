"""Where and how a trial runs: the launcher, its size, and the cluster settings of the train step.

Why one object: the train step, the manifests and the checks against the job's spec all need
the same few facts, validated once where they enter (pipeline parameters and the step's
environment). The pipeline passes `launcher`, `num_nodes`, `gpus_per_node` and `runtime` as
parameters; what only a cluster needs (namespace, image, the Secret holding the store's keys,
limits on waiting) comes from the step's environment, which the compiled pipeline sets.

Launchers:
- local: the user's command as one process on the step's machine (the job's `num_gpus` GPUs).
- torchrun: `gpus_per_node` processes under torchrun on the step's machine (num_nodes 1), one GPU
  each (each its own simulated GPU where there is none).
- trainjob: a Kubeflow Trainer TrainJob (trainer.kubeflow.org/v1alpha1) on `runtime`.
- pytorchjob: a Training Operator PyTorchJob (kubeflow.org/v1).
The cluster launchers run torchrun in every pod too (`num_nodes` pods of `gpus_per_node` ranks).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from zeus_kfp.errors import FieldError
from zeus_kfp.job import JobSpec, JobSpecError

LAUNCHERS = ("local", "torchrun", "trainjob", "pytorchjob")
CLUSTER_LAUNCHERS = ("trainjob", "pytorchjob")
DEFAULT_RUNTIME = "torch-distributed"
GPU_RESOURCE = "nvidia.com/gpu"
# A cluster trial's job is bounded by default (its activeDeadlineSeconds; the pod command's own deadline on
# Trainer v2.1, which has no such field): a step killed outright must not leave a job holding GPUs for ever.
# A day, as the bandit's dispatch_timeout_s, after which the next bandit step records the trial failed anyway.
DEFAULT_TRIAL_TIMEOUT_S = 86400.0
# /dev/shm of train and a cluster trial's pods: the container runtime's 64 MiB breaks NCCL's intra-node
# transport and PyTorch DataLoader workers. A memory-backed emptyDir: it counts against the pod's memory.
DEFAULT_SHM_SIZE = "8Gi"
TRAINER_APIS = ("v2.1", "v2.2")  # Kubeflow Trainer's TrainJob shapes (zeus_kfp.launch.trainer_api): v2.2 = v2.2+
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
# The pod's own namespace, from the downward API (metadata.namespace): the compiled pipeline gives it to every step.
POD_NAMESPACE_ENV = "ZEUS_NAMESPACE"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")

# The train step's environment (set by the compiled pipeline; see pipelines/dag.py).
ENV = {
    "namespace": "ZEUS_LAUNCH_NAMESPACE",
    "image": "ZEUS_LAUNCH_IMAGE",
    "service_account": "ZEUS_LAUNCH_SERVICE_ACCOUNT",
    "gpu_resource": "ZEUS_LAUNCH_GPU_RESOURCE",
    "pending_timeout_s": "ZEUS_LAUNCH_PENDING_TIMEOUT_S",
    "timeout_s": "ZEUS_LAUNCH_TIMEOUT_S",
    "store_secret": "ZEUS_S3_SECRET_NAME",
    "allow_local_store": "ZEUS_LAUNCH_ALLOW_LOCAL_STORE",
    "tolerations": "ZEUS_LAUNCH_TOLERATIONS",  # JSON list of pod tolerations (train's)
    "node_selector": "ZEUS_LAUNCH_NODE_SELECTOR",  # JSON object (train's)
    "image_pull_secrets": "ZEUS_LAUNCH_IMAGE_PULL_SECRETS",  # comma-separated Secret names
    "shm_size": "ZEUS_LAUNCH_SHM_SIZE",  # /dev/shm size of the pods ("" or unset: the runtime's)
    "trainer_api": "ZEUS_LAUNCH_TRAINER_API",  # v2.1 or v2.2 (unset: read from the cluster's TrainJob schema)
    "step_gpus": "ZEUS_STEP_GPUS",  # GPUs the train step itself holds (set by the compiled pipeline)
    "zeusd_token_secret": "ZEUSD_TOKEN_SECRET_NAME",  # the Secret (key token) whose value the pods get as ZEUSD_TOKEN
}
_JSON = {"tolerations": list, "node_selector": dict}


class LaunchError(FieldError):
    """A launch setting is out of range; names the setting and what it allows."""


def _json_setting(var: str, raw: str, kind: type) -> object:
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, kind):
        raise LaunchError(var, raw, f"a JSON {'list' if kind is list else 'object'} (the compiled pipeline writes it)")
    return tuple(value) if kind is list else value


def pod_namespace(environ: Mapping[str, str] | None = None) -> str | None:
    """The namespace this process runs in, when it runs in a pod: $ZEUS_NAMESPACE (the downward API), else the
    service account's namespace file; None outside a pod."""
    env = os.environ if environ is None else environ
    if env.get(POD_NAMESPACE_ENV, "").strip():
        return env[POD_NAMESPACE_ENV].strip()
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, float) and value.is_integer():  # KFP hands ints through as doubles at times
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise LaunchError(name, value, "a positive integer")
    return value


@dataclass(frozen=True)
class LaunchConfig:
    """How one trial is launched (see the module docstring)."""

    launcher: str = "local"
    num_nodes: int = 1
    gpus_per_node: int = 1
    runtime: str = DEFAULT_RUNTIME
    namespace: str | None = None  # None: the step's own namespace (its service account's)
    image: str = ""  # the train image on a cluster; the compiled pipeline sets the component image
    service_account: str | None = None
    gpu_resource: str = GPU_RESOURCE  # "" requests no GPU (a CPU cluster; ranks get simulated GPUs)
    pending_timeout_s: float = 900.0  # a job whose pods have not all started by then is a failed trial
    timeout_s: float | None = DEFAULT_TRIAL_TIMEOUT_S  # the whole trial; also the job's deadline
    store_secret: str | None = None  # the Secret with the store's keys (accesskey, secretkey) for the pods
    allow_local_store: bool = False  # a directory store works on a cluster only if pods share that volume
    watch_s: float = 10.0  # how long one watch of the job waits for a change before the pods are checked
    extra_env: Mapping[str, str] = field(default_factory=dict)  # plain variables the pods also get
    # What the pods inherit from the train step (the compiled pipeline sets them: pipelines/platform.py).
    tolerations: tuple[Mapping[str, str], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    image_pull_secrets: tuple[str, ...] = ()
    shm_size: str | None = None
    trainer_api: str | None = None  # v2.1 / v2.2; None: ask the cluster (zeus_kfp.launch.trainer_api)
    step_gpus: int = 0
    zeusd_token_secret: str | None = None  # the pods' ZEUSD_TOKEN, by reference (pipelines/platform.py)

    def __post_init__(self) -> None:
        if self.launcher not in LAUNCHERS:
            raise LaunchError("launcher", self.launcher, ", ".join(LAUNCHERS))
        object.__setattr__(self, "num_nodes", _positive_int("num_nodes", self.num_nodes))
        object.__setattr__(self, "gpus_per_node", _positive_int("gpus_per_node", self.gpus_per_node))
        if self.launcher in ("local", "torchrun") and self.num_nodes != 1:
            raise LaunchError("num_nodes", self.num_nodes, f"1 for launcher {self.launcher!r} (one machine)")
        if not isinstance(self.runtime, str) or not DNS_SUBDOMAIN.match(self.runtime):
            raise LaunchError("runtime", self.runtime, "a ClusterTrainingRuntime name (a DNS subdomain)")
        for name in ("pending_timeout_s", "watch_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise LaunchError(name, value, "a positive number of seconds")
        if self.timeout_s is not None and not (isinstance(self.timeout_s, (int, float)) and self.timeout_s > 0):
            raise LaunchError("timeout_s", self.timeout_s, "a positive number of seconds, or unset")
        if self.trainer_api is not None and self.trainer_api not in TRAINER_APIS:
            allowed = " or ".join(TRAINER_APIS) + " (v2.2: Trainer v2.2 or later)"
            raise LaunchError(ENV["trainer_api"], self.trainer_api, allowed)
        object.__setattr__(self, "tolerations", tuple(dict(t) for t in self.tolerations))
        object.__setattr__(self, "image_pull_secrets", tuple(self.image_pull_secrets))
        if self.cluster and self.step_gpus > 0:
            raise LaunchError(
                "launcher",
                self.launcher,
                f"local or torchrun in a pipeline whose train step holds {self.step_gpus} GPU(s): a {self.launcher} "
                "trial runs on its own pods' GPUs while train's would sit idle; compile with --launcher "
                f"{self.launcher} for a train step without GPUs",
            )

    @classmethod
    def from_params(
        cls,
        launcher: str = "local",
        num_nodes: int = 1,
        gpus_per_node: int = 1,
        runtime: str = DEFAULT_RUNTIME,
        environ: Mapping[str, str] | None = None,
    ) -> LaunchConfig:
        """The pipeline's parameters plus the cluster settings from the step's environment."""
        env = os.environ if environ is None else environ
        found: dict[str, object] = {}
        for name, var in ENV.items():
            raw = env.get(var, "").strip()
            if not raw:
                continue
            if name.endswith("_s"):
                try:
                    found[name] = float(raw)
                except ValueError:
                    raise LaunchError(var, raw, "a number of seconds") from None
            elif name in _JSON:
                found[name] = _json_setting(var, raw, _JSON[name])
            elif name == "image_pull_secrets":
                found[name] = tuple(part.strip() for part in raw.split(",") if part.strip())
            elif name == "step_gpus":
                if not raw.isdigit():
                    raise LaunchError(var, raw, "a number of GPUs (an integer >= 0)")
                found[name] = int(raw)
            elif name == "allow_local_store":
                found[name] = raw.lower() in ("1", "true", "yes")
            else:
                found[name] = raw
        return cls(launcher=launcher, num_nodes=num_nodes, gpus_per_node=gpus_per_node, runtime=runtime, **found)

    @property
    def cluster(self) -> bool:
        return self.launcher in CLUSTER_LAUNCHERS

    @property
    def distributed(self) -> bool:
        """Runs under torchrun (every launcher but local)."""
        return self.launcher != "local"

    @property
    def world_size(self) -> int:
        """Processes (and GPUs) of the trial: one rank per GPU."""
        return self.num_nodes * self.gpus_per_node

    def check_spec(self, spec: JobSpec) -> None:
        """A distributed trial holds num_nodes x gpus_per_node GPUs: the job's cost must price them all, and
        every batch size must split evenly over the ranks (each loads batch_size / world size)."""
        if not self.distributed:
            return
        world = self.world_size
        if spec.num_gpus != world:
            raise JobSpecError(
                "num_gpus",
                spec.num_gpus,
                f"{world} (num_nodes {self.num_nodes} x gpus_per_node {self.gpus_per_node} for launcher "
                f"{self.launcher!r}): the cost prices every GPU the trial holds",
            )
        uneven = [b for b in spec.batch_sizes if b % world]
        if uneven:
            raise JobSpecError("batch_sizes", list(spec.batch_sizes), f"multiples of the world size {world}")

    def resolved_namespace(self) -> str:
        """The namespace to create jobs in: the setting, else the step's own."""
        namespace = self.namespace or pod_namespace()
        if not namespace:
            raise LaunchError(
                ENV["namespace"], None, "a namespace (the step runs outside a pod, so it cannot use its own)"
            )
        return namespace
