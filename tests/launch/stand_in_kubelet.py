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
- valueFrom variables (a Secret's keys, the node's IP) are left out: the test store needs no keys.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from contextlib import suppress
from pathlib import Path
from typing import Any

from zeus.launch.manifests import POD_WORK_DIR


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


class PodProcesses:
    """One job's pods, as processes; pod i's output in <root>/pod-i.log."""

    def __init__(self, job: dict[str, Any], root: Path) -> None:
        command, env, nodes, nproc = _container(job)
        port = _free_port()
        self.root, self.procs, self.logs = root, [], []
        for node in range(nodes):
            pod_root = root / f"pod-{node}"
            pod_root.mkdir(parents=True, exist_ok=True)
            mapped = {
                e["name"]: e["value"].replace(POD_WORK_DIR, str(pod_root / "zeus-trial")) for e in env if "value" in e
            }
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
                args = [a.replace(POD_WORK_DIR, str(pod_root / "zeus-trial")) for a in command]
                self.procs.append(
                    subprocess.Popen(args, env=pod_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
                )

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
