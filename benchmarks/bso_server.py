"""Zeus 0.16's batch-size optimizer server (BSO), run for benchmarks/peer_bso.py.

It lives in its own throwaway virtualenv (`zeus[bso,bso-server]==0.16.0` plus aiosqlite and
greenlet, torch pinned to the local CPU build with a constraints file so pip never pulls a CUDA
one), serves on SQLite on 127.0.0.1 (uvicorn on a socket bound here, port 0), and is spoken
to over HTTP with keep-alive connections, as Zeus's own client does:
    POST /jobs                register the job
    GET  /jobs/batch_size     the decision (creates the trial)
    POST /report              the result (stop_train / converged)
    PATCH /trials             end the trial
Nothing here imports zeus 0.16: its module paths and JSON fields were read from its source.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BSO_PACKAGES = ["zeus[bso,bso-server]==0.16.0", "aiosqlite", "greenlet"]
TORCH_PIN = "torch==2.13.0\n"  # the CPU build on this machine's disk; never a CUDA one
APP = "zeus.optimizer.batch_size.server.router:app"
CREATE_TABLES = (
    "import sys\n"
    "from sqlalchemy import create_engine\n"
    "from zeus.optimizer.batch_size.server.database.schema import Base\n"
    "Base.metadata.create_all(create_engine('sqlite:///' + sys.argv[1]))\n"
)
PEAK_RSS = "VmHWM"
# Seeding 10,000 trials over HTTP takes most of an hour on a loaded 2-core machine, so the history
# is seeded in the server's own venv through the same optimizer calls its router makes (one
# session and commit per request), with the same database. Trial i's result for batch size b is
# outcomes[b][i], drawn beforehand, so both sides get exactly what BSO decided and was told.
SEED_SCRIPT = """
import asyncio, json, sys
spec = json.load(open(sys.argv[1]))
from zeus.optimizer.batch_size.common import TrainingResult
from zeus.optimizer.batch_size.server.database.db_connection import sessionmanager
from zeus.optimizer.batch_size.server.optimizer import ZeusBatchSizeOptimizer
from zeus.optimizer.batch_size.server.services.service import ZeusService

async def request(call):
    async with sessionmanager.session() as session:
        out = await call(ZeusBatchSizeOptimizer(ZeusService(session)))
        await session.commit()
        return out

async def main():
    rows = []
    for i in range(spec["count"]):
        trial = await request(lambda o: o.predict(spec["job_id"]))
        reached, time_s, energy_j, epochs = spec["outcomes"][str(trial.batch_size)][i]
        metric = spec["target"] + (0.01 if reached else -0.1)
        result = TrainingResult(job_id=spec["job_id"], batch_size=trial.batch_size, trial_number=trial.trial_number,
                                time=time_s, energy=energy_j, metric=metric, current_epoch=epochs)
        await request(lambda o: o.report(result))
        rows.append([trial.batch_size, reached, time_s, energy_j, epochs])
    json.dump(rows, open(sys.argv[2], "w"))

asyncio.run(main())
"""


def ensure_venv(path: Path) -> Path:
    """A virtualenv with Zeus's server at `path` (made once; reused if it is there). Returns its python."""
    python = path / "bin" / "python"
    probe = [python, "-c", "import zeus.optimizer.batch_size.server.router"]
    if (
        python.exists()
        and subprocess.run(probe, capture_output=True, env=_server_env("sqlite+aiosqlite://")).returncode == 0
    ):
        return python
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    constraints = path / "constraints.txt"
    constraints.write_text(TORCH_PIN)
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "-c", str(constraints), *BSO_PACKAGES, "torch==2.13.0"], check=True
    )
    return python


def _server_env(database_url: str) -> dict[str, str]:
    # PYTHONSAFEPATH: `python -c` would otherwise put the working directory first on sys.path, and run
    # from this repository's root that makes `import zeus` find zeus-kfp's package, not Zeus's.
    return dict(os.environ, ZEUS_BSO_DATABASE_URL=database_url, ZEUS_BSO_LOG_LEVEL="WARN", PYTHONSAFEPATH="1")


class BsoServer:
    """One uvicorn process serving BSO on SQLite at `db`; restartable on the same database."""

    def __init__(self, python: Path, db: Path) -> None:
        self.python, self.db = python, db
        self.process: subprocess.Popen | None = None
        self.port = 0
        if not db.exists():
            subprocess.run([python, "-c", CREATE_TABLES, str(db)], env=_server_env(""), check=True)

    def start(self) -> None:
        # A port the OS picked (port 0), handed to uvicorn by number: a socket passed with --fd loses
        # TCP_NODELAY on its connections (asyncio cannot tell it is TCP), and every answer then waits
        # ~40 ms for a delayed ACK, which would be our setup's fault, not the server's.
        with socket.create_server(("127.0.0.1", 0)) as probe:
            self.port = probe.getsockname()[1]
        self.process = subprocess.Popen(
            [
                self.python,
                "-m",
                "uvicorn",
                APP,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
            ],
            env=_server_env(f"sqlite+aiosqlite:///{self.db}"),
            cwd=self.db.parent,  # uvicorn puts its working directory on sys.path (see _server_env)
        )
        for _ in range(300):
            try:
                BsoClient(self.port).call("GET", "/openapi.json")
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("Zeus's BSO server did not start")

    def seed(self, job_id: str, target: float, outcomes: dict[int, list], count: int) -> list[list]:
        """Run `count` decisions and reports through BSO's optimizer in its venv, on this server's database."""
        with tempfile.TemporaryDirectory() as tmp:
            spec, rows = Path(tmp) / "spec.json", Path(tmp) / "rows.json"
            spec.write_text(json.dumps({"job_id": job_id, "target": target, "count": count,
                                        "outcomes": {str(b): v for b, v in outcomes.items()}}))  # fmt: skip
            subprocess.run(
                [self.python, "-c", SEED_SCRIPT, str(spec), str(rows)],
                env=_server_env(f"sqlite+aiosqlite:///{self.db}"),
                check=True,
            )
            return json.loads(rows.read_text())

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None

    def peak_rss_mb(self) -> float:
        """The server process's peak resident memory so far (Linux VmHWM)."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(PEAK_RSS):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmHWM")


class _NoDelayConnection(http.client.HTTPConnection):
    """http.client sends headers and body in two writes; without TCP_NODELAY, Nagle's algorithm and
    delayed ACKs stall each request ~40 ms, which would be our client's fault, not the server's."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class BsoClient:
    """Zeus's client protocol over one keep-alive HTTP connection."""

    def __init__(self, port: int) -> None:
        self.connection = _NoDelayConnection("127.0.0.1", port, timeout=60)

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body)
        self.connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = self.connection.getresponse()
        payload = response.read()
        if response.status >= 300:
            raise RuntimeError(f"BSO {method} {path}: HTTP {response.status} {payload[:200]!r}")
        return json.loads(payload) if payload else {}

    def register(self, job: dict) -> None:
        self.call("POST", "/jobs", job)

    def decide(self, job_id: str) -> dict:
        return self.call("GET", f"/jobs/batch_size?job_id={job_id}")

    def report(self, trial: dict, time_s: float, energy_j: float, metric: float, epochs: int) -> dict:
        result = trial | {"time": time_s, "energy": energy_j, "metric": metric, "current_epoch": epochs}
        return self.call("POST", "/report", result)

    def end(self, trial: dict) -> None:
        self.call("PATCH", "/trials", trial)


def bso_job(spec, job_id: str) -> dict:
    """A zeus-kfp JobSpec as BSO's JobSpecFromClient (the same knobs; max power and GPU count)."""
    return {
        "job_id": job_id,
        "job_id_prefix": job_id,
        "batch_sizes": list(spec.batch_sizes),
        "default_batch_size": spec.default_batch_size,
        "eta_knob": spec.eta_knob,
        "beta_knob": spec.beta_knob,
        "target_metric": spec.target_metric,
        "max_epochs": spec.max_epochs,
        "max_power": spec.max_power_w,
        "number_of_gpus": spec.num_gpus,
        "gpu_model": "simulated",
    }
