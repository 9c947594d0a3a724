"""`zeus-kfp dry-run`: the exact TrainJob or PyTorchJob one trial of a compiled pipeline would create.

Why from the package: the train step builds a cluster trial's job from what the compiled pipeline gave it
(its environment: image, Secret name, store endpoint, scheduling, pull secrets, /dev/shm, deadline) and from
the run's parameters (launcher, nodes, GPUs per node, runtime, the job's settings). Reading those from the
package and calling the very functions the step calls (zeus_kfp.launch.cluster.trial_job, zeus_kfp.launch.manifests)
gives the manifest the step would send, byte for byte, except what only a run knows: the run token (chosen
when the job is created), the recurrence id and the trial's seed (given or a placeholder), and the maximum power
the gpu-power step would read (a parameter to pin for the dry run).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from zeus_kfp.launch.config import CLUSTER_LAUNCHERS, LaunchConfig
from zeus_kfp.launch.manifests import job_name, manifest
from zeus_kfp.pipelines.client import ClusterInputError, validate_run_arguments
from zeus_kfp.pipelines.package import CompiledPackage
from zeus_kfp.pipelines.platform import ZEUSD_HOST_ENV
from zeus_kfp.steps.params import NAMESPACE_TOKEN, PYTHON_TOKEN

TRAIN_TASK = "attempt-1-train"
PLACEHOLDER_MAX_POWER_W = 700.0  # shown when the package reads it at run time and the dry run pins none
TRAINER_VERSIONS = {"2.1": "v2.1", "2.2": "v2.2", "2.3": "v2.2"}  # Trainer release -> TrainJob shape


@dataclass(frozen=True)
class DryRun:
    """What the dry run made: the manifest, and the notes a reader needs beside it."""

    manifest: dict[str, Any]
    notes: tuple[str, ...]


def step_environment(package: CompiledPackage) -> dict[str, str]:
    """The train step's environment as its pod would have it (the values a field path fills are named)."""
    env = package.env(TRAIN_TASK)
    for binding in package.kubernetes(TRAIN_TASK).get("fieldPathAsEnv", []):
        if binding["name"] == ZEUSD_HOST_ENV:
            env[ZEUSD_HOST_ENV] = "(the node's IP)"
    return env


def dry_run(
    package: CompiledPackage,
    arguments: dict[str, Any],
    *,
    namespace: str,
    trainer_api: str | None,
    recurrence_id: str = "dry-run",
    attempt: int = 1,
    batch_size: int | None = None,
) -> DryRun:
    """The job attempt `attempt` of recurrence `recurrence_id` would create in `namespace`; `arguments` are run
    parameters as `submit --param` takes them; `trainer_api`: "v2.1" or "v2.2" (a TrainJob's shape)."""
    from zeus_kfp.launch.cluster import trial_job
    from zeus_kfp.steps import spec_from_params
    from zeus_kfp.steps.params import RUN_FIELDS

    validate_run_arguments(package, arguments)
    given = {name: p.get("defaultValue") for name, p in package.parameters.items()} | arguments
    launcher = str(given.get("launcher", "local"))
    if launcher not in CLUSTER_LAUNCHERS:
        raise ClusterInputError(
            "launcher", launcher, f"one of {', '.join(CLUSTER_LAUNCHERS)}: only they create a job (--param launcher=)"
        )
    notes = []
    settings = {f.name: given[f.name] for f in RUN_FIELDS if f.name in given}
    if not settings.get("max_power_w"):
        settings["max_power_w"] = PLACEHOLDER_MAX_POWER_W
        notes.append(
            f"ZEUS_MAX_POWER_W: {PLACEHOLDER_MAX_POWER_W:g} stands for what the gpu-power step reads at run time "
            "(--param max_power_w=W to show another)"
        )
    spec = spec_from_params(**settings, **package.fixed_settings())
    config = LaunchConfig.from_params(
        launcher,
        given.get("num_nodes", 1),
        given.get("gpus_per_node", 1),
        given.get("trainjob_runtime", "torch-distributed"),
        environ=step_environment(package),
    )
    config = replace(config, namespace=namespace, trainer_api=trainer_api if launcher == "trainjob" else None)
    config.check_spec(spec)
    command = [str(part).replace(PYTHON_TOKEN, "python") for part in given["train_command"]]
    store_uri = str(given["store_uri"]).replace(NAMESPACE_TOKEN, namespace)
    trial = trial_job(
        config,
        spec,
        batch_size=int(batch_size or spec.default_batch_size),
        cost_threshold=None,
        command=command,
        store_uri=store_uri,
        recurrence_id=recurrence_id,
        attempt=attempt,
        step_env=step_environment(package),
    )
    notes.append("zeus-kfp.ml/run: the run token, chosen when the job is created")
    return DryRun(manifest(trial, job_name(spec.job_id, recurrence_id, attempt), namespace), tuple(notes))


def trainer_api_of(version: str) -> str:
    """ "v2.1" / "v2.2" for a Kubeflow Trainer release as users name it (2.1, v2.2.0, 2.3)."""
    from zeus_kfp.pipelines.backends import parse_version

    try:
        major, minor, _ = parse_version(version)
    except ValueError:
        major = minor = -1
    shape = TRAINER_VERSIONS.get(f"{major}.{minor}") or ("v2.2" if (major, minor) > (2, 3) and major == 2 else None)
    if shape is None:
        raise ClusterInputError("trainer_version", version, "a Kubeflow Trainer v2 release: 2.1, 2.2, 2.3 or later")
    return shape
