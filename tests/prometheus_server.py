"""A real Prometheus server for tests: Debian's `prometheus` package, fetched and unpacked without root.

Why Debian's: it is the Prometheus a Debian or Ubuntu CI image installs, a real server (its scraper, its
parser, its PromQL), not a stand-in. Where it comes from, first that works: `prometheus` on PATH, $ZEUS_KFP_PROMETHEUS
(a binary), a copy unpacked before into the cache folder, or `apt-get download prometheus` + `dpkg -x` into the
cache folder (no root needed; a fresh clone on a Debian machine sets itself up). `make prometheus` does the same.
The server binds 127.0.0.1 on a port the OS picks, keeps its data in a temporary folder, and is stopped by the
test that started it. Every wait polls until its condition holds, with a generous deadline (never a fixed sleep).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("ZEUS_KFP_TEST_CACHE", Path.home() / ".cache" / "zeus-kfp-tests")) / "prometheus"
BINARY_IN_DEB = Path("usr/bin/prometheus")
DEADLINE_S = 180.0  # a guard against a hang, never a timing assumption


class PrometheusUnavailable(RuntimeError):
    """No Prometheus binary here, and no way to fetch one (not a Debian machine: no apt-get): a test skips. A fetch
    that fails on a Debian machine is an error instead (CalledProcessError, with apt's words), never a skip."""


def prometheus_binary(cache: Path = CACHE) -> Path:
    """A Prometheus binary, fetched into `cache` from the Debian archive if none is at hand (see module doc)."""
    for given in (os.environ.get("ZEUS_KFP_PROMETHEUS"), shutil.which("prometheus")):
        if given and Path(given).is_file():
            return Path(given)
    unpacked = cache / "root" / BINARY_IN_DEB
    if unpacked.is_file():
        return unpacked
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        raise PrometheusUnavailable("no prometheus on PATH and no apt-get/dpkg to fetch Debian's package")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        fetched = subprocess.run(["apt-get", "download", "prometheus"], cwd=tmp, capture_output=True, text=True)
        if fetched.returncode != 0:  # e.g. no package lists yet: `apt-get update` (root), or set $ZEUS_KFP_PROMETHEUS
            raise RuntimeError(f"apt-get download prometheus failed: {fetched.stderr.strip()}")
        (deb,) = Path(tmp).glob("prometheus_*.deb")
        staged = Path(tmp) / "root"
        subprocess.run(["dpkg", "-x", str(deb), str(staged)], check=True, capture_output=True, text=True)
        if not (staged / BINARY_IN_DEB).is_file():
            raise PrometheusUnavailable(f"{deb.name} has no {BINARY_IN_DEB}")
        shutil.rmtree(cache / "root", ignore_errors=True)
        staged.rename(cache / "root")  # whole or not at all: a cut-short fetch leaves no half binary behind
    return unpacked


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


class Prometheus:
    """A running server: `query` is its HTTP API's instant query, `targets` its scrape targets' health."""

    def __init__(self, url: str, process: subprocess.Popen, log: Path) -> None:
        self.url, self.process, self.log = url, process, log

    def query(self, promql: str) -> list[dict[str, Any]]:
        answer = _get(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def targets(self) -> list[dict[str, Any]]:
        return _get(f"{self.url}/api/v1/targets")["data"]["activeTargets"]

    def wait_for(self, promql: str, deadline_s: float = DEADLINE_S) -> list[dict[str, Any]]:
        """Poll `promql` until it returns samples (a scrape has landed); fail with the targets' health if not."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            result = self.query(promql)
            if result:
                return result
            time.sleep(0.2)
        raise AssertionError(f"no samples for {promql} in {deadline_s} s; targets: {self.targets()}")


@contextmanager
def prometheus_scraping(target: str, workdir: Path, interval_s: float = 1.0) -> Iterator[Prometheus]:
    """A Prometheus on 127.0.0.1 scraping http://`target`/metrics every `interval_s`; stopped on exit."""
    binary = prometheus_binary()
    config = workdir / "prometheus.yml"
    every = f"{round(interval_s * 1000)}ms"  # Prometheus' durations take no decimals ("1.0s" is refused)
    config.write_text(
        f"global:\n  scrape_interval: {every}\n  scrape_timeout: {every}\n"
        f"scrape_configs:\n  - job_name: zeus-kfp-fleet\n    honor_labels: true\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    port = free_port()
    log = workdir / "prometheus.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(binary), f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = Prometheus(f"http://127.0.0.1:{port}", process, log)
    try:
        end = time.monotonic() + DEADLINE_S
        while True:  # ready when its readiness endpoint answers
            assert process.poll() is None, log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < end, f"prometheus not ready: {log.read_text()[-3000:]}"
            time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":  # `make prometheus`: fetch it now, say where
    print(prometheus_binary())
    sys.exit(0)
