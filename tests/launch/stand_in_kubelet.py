"""A STAND-IN kubelet for the stand-in API server: runs a job's pods as local processes. No cluster is used.

For one end-to-end test the stand-in does more than play phases: it runs each pod's container
command with the container's environment, as the Kubeflow operator and the kubelet would, so the
manifest's command, ZEUS_* variables and handoff location are shown to produce a real trial. What
it emulates, and how:

- the operator's torchrun variables: PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK,
  PET_MASTER_ADDR/PORT (Trainer's torch plugin); for a PyTorchJob, MASTER_ADDR/MASTER_PORT (the
  Training Operator's), all on 127.0.0.1 and a free port;
- the image: this virtualenv's `python` first on PATH;
- each pod's own filesystem: the pod work dir (/tmp/zeus-trial) is mapped to a directory per pod;
- configMap volumes mounted on the trainer container: a directory per pod and mount, mapped to the mount path,
  in which `sync` writes the ConfigMap's keys as files, as the kubelet does at each of its syncs (the stand-in
  API server calls it after each change of a ConfigMap: kube_configmaps.py); a missing optional ConfigMap is
  an empty directory. A subPath mount is refused: the kubelet never updates one, so it would fake a delivery;
- valueFrom variables (a Secret's keys, the node's IP) are left out: the test store needs no keys.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from zeus_kfp.launch.manifests import POD_WORK_DIR


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _container(job: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]], int, int]:
    """(command, env, nodes, processes per node) of the job's trainer container."""
    spec = job["spec"]
    if job["kind"] == "TrainJob":
        trainer = spec["trainer"]
        return trainer["command"], trainer["env"], trainer["numNodes"], trainer["numProcPerNode"]
    replicas = spec["pytorchReplicaSpecs"]
    container = replicas["Master"]["template"]["spec"]["containers"][0]
    nodes = sum(r["replicas"] for r in replicas.values())
    return container["command"], container["env"], nodes, int(spec["nprocPerNode"])


def trainer_pod(job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(pod metadata, pod spec, trainer container) as the operator builds the trainer's pods from the job: the
    runtime's template patched by runtimePatches (Trainer v2.2+) or podTemplateOverrides (v2.1), the trainer's
    own fields (command, env, resources) aside; a PyTorchJob's Master template as written. Empty where the job
    patches nothing (the API server dropped the patch)."""
    spec = job["spec"]
    if job["kind"] == "PyTorchJob":
        template = spec["pytorchReplicaSpecs"]["Master"]["template"]
        return template["metadata"], template["spec"], template["spec"]["containers"][0]
    template: dict[str, Any] = {}
    for patch in spec.get("runtimePatches", []):
        for replicated in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
            if replicated["name"] == "node":
                template = replicated["template"]["spec"]["template"]
    for override in spec.get("podTemplateOverrides", []):
        if {"name": "node"} in override["targetJobs"]:
            template = override
    pod_spec = template.get("spec", {})
    container = next((c for c in pod_spec.get("containers", []) if c["name"] == "node"), {})
    return template.get("metadata", {}), pod_spec, container


def _configmap_mounts(job: dict[str, Any]) -> list[tuple[str, str]]:
    """(mount path, ConfigMap name) of each configMap volume on the trainer container."""
    _, pod_spec, container = trainer_pod(job)
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    mounts = []
    for mount in container.get("volumeMounts", []):
        source = volumes[mount["name"]].get("configMap")
        if source is None:
            continue
        if mount.get("subPath"):
            raise ValueError(f"{mount['mountPath']}: a subPath mount of a ConfigMap is never updated by the kubelet")
        mounts.append((mount["mountPath"], source["name"]))
    return mounts


class PodProcesses:
    """One job's pods, as processes; pod i's output in <root>/pod-i.log. `configmap(name)`: a ConfigMap's data as
    the API server holds it now (None: none of that name), for `sync`."""

    def __init__(
        self,
        job: dict[str, Any],
        root: Path,
        configmap: Callable[[str], Mapping[str, str] | None] = lambda _name: None,
    ) -> None:
        command, env, nodes, nproc = _container(job)
        port = _free_port()
        self.root, self.procs, self.logs = root, [], []
        self.configmap, self.projected = configmap, []  # (directory, ConfigMap name) per pod and configMap mount
        for node in range(nodes):
            pod_root = root / f"pod-{node}"
            pod_root.mkdir(parents=True, exist_ok=True)
            paths = {POD_WORK_DIR: pod_root / "zeus-trial"}
            for index, (mount_path, name) in enumerate(_configmap_mounts(job)):
                paths[mount_path] = pod_root / f"volume-{index}"
                paths[mount_path].mkdir()
                self.projected.append((paths[mount_path], name))

            def local(value: str, paths: dict[str, Path] = paths) -> str:
                for pod_path, directory in paths.items():
                    value = value.replace(pod_path, str(directory))
                return value

            mapped = {e["name"]: local(e["value"]) for e in env if "value" in e}
            operator = {"PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": str(nproc), "PET_NODE_RANK": str(node)}
            if job["kind"] == "TrainJob":
                operator.update({"PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": str(port)})
            else:
                operator.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
            path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
            pod_env = {"PATH": path, "HOME": str(pod_root), "PYTHONUNBUFFERED": "1", **mapped, **operator}
            log = pod_root / "pod.log"
            self.logs.append(log)
            with log.open("wb") as out:
                args = [local(a) for a in command]
                self.sync()  # the volumes are in place before the container starts
                self.procs.append(
                    subprocess.Popen(args, env=pod_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
                )

    def sync(self) -> None:
        """The kubelet's sync of the pods' configMap volumes: each key of the ConfigMap as a file in the mounted
        directory, written whole (a reader sees the old file or the new one, as the kubelet's symlink swap
        gives), and the files of keys it no longer has removed."""
        for directory, name in self.projected:
            data = self.configmap(name) or {}
            for key, value in data.items():
                staged = directory / f".{key}.tmp"
                staged.write_text(value)
                os.replace(staged, directory / key)
            for path in directory.iterdir():
                if path.name not in data and not path.name.startswith("."):
                    path.unlink()

    def phase(self) -> str:
        codes = [p.poll() for p in self.procs]
        if any(code is None for code in codes):
            return "Running"
        return "Succeeded" if all(code == 0 for code in codes) else "Failed"

    def failure(self) -> str:
        bad = [(i, p.returncode) for i, p in enumerate(self.procs) if p.returncode not in (None, 0)]
        return "; ".join(f"pod-{i} exited with code {code}" for i, code in bad)

    def stop(self) -> None:
        """What deleting the job does to its pods: SIGTERM, then SIGKILL after a grace period."""
        for proc in self.procs:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
