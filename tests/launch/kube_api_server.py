"""A STAND-IN for the Kubernetes API server, for the cluster launcher's tests. No cluster is used.

It serves, on 127.0.0.1 and a port the OS picks, the few routes the launcher's kubernetes client
calls, the way the API server and the Kubeflow operators would answer them:

- TrainJobs (trainer.kubeflow.org/v1alpha1, the CRD of the Trainer version `trainer` plays) and
  PyTorchJobs (kubeflow.org/v1): create (with fieldValidation=Strict refused with 422, as the API
  server does, when the object does not validate against the shipped CRD schema, see crds.py; without
  it, unknown fields are dropped silently first, as the API server's default does; 409 when the name is
  taken), get, watch (fieldSelector on the name), delete;
- the OpenAPI v3 document of trainer.kubeflow.org/v1alpha1, built from that CRD;
- pods, as the operator would create them for the job (labels from the job's pod template, plus
  the operator's own: node index / replica type), listed by label selector;
- a pod's log, following (follow=true) until the job ends;
- ConfigMaps (kube_configmaps.py): create, get, patch, delete, or 403 for all of them (`configmaps.forbidden`,
  a service account without the rights), and the kubelet's delivery of their keys into the pods that mount them.

Each job lives through a `Scenario` (kube_objects.py, with what the operator says of it): its phases
(Pending, Running, then Succeeded, Failed, or Evicted: the master pod evicted while the job still
runs), optionally held at one phase until the test releases it. A watch moves the job through its
phases, one event each; just before the last phase `on_end` runs (what rank 0's node leaves in the
store). With `run_pods_in`, the job's pods instead run as local processes (stand_in_kubelet.py) and
the job's phase is theirs. Every request is recorded in order (`calls`), so a test can check what
the launcher did and in which order.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from json_http import JsonHandler

from . import crds
from .kube_configmaps import ConfigMaps
from .kube_objects import CONTAINER, TERMINAL, Scenario, StandInJob, job_status, pods_of, status_body
from .stand_in_kubelet import PodProcesses

OPENAPI_TRAINER = "/openapi/v3/apis/trainer.kubeflow.org/v1alpha1"
JOB_ROUTE = re.compile(r"^/apis/([^/]+)/([^/]+)/namespaces/([^/]+)/([^/]+)(?:/([^/]+))?$")
POD_ROUTE = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+)(/log)?)?$")
CONFIGMAP_ROUTE = re.compile(r"^/api/v1/namespaces/([^/]+)/configmaps(?:/([^/]+))?$")


@dataclass
class StandInApi:
    """The stand-in server's state; `url` is where the kubernetes client should point."""

    scenario: Scenario = field(default_factory=Scenario)
    idle_close_s: float = 0.2  # a watch with nothing new to say closes after this (the client then re-watches)
    installed: tuple[str, ...] = ("TrainJob", "PyTorchJob")  # the kinds whose operator (and CRD) the cluster has
    trainer: str = crds.LATEST  # the Kubeflow Trainer version whose TrainJob CRD the cluster has
    calls: list[tuple[str, ...]] = field(default_factory=list)
    jobs: dict[tuple[str, str], StandInJob] = field(default_factory=dict)
    created: list[dict[str, Any]] = field(default_factory=list)  # every job as stored (after any pruning)
    url: str = ""
    configmaps: ConfigMaps = field(init=False)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _released: bool = False

    def __post_init__(self) -> None:
        self.configmaps = ConfigMaps(self.record, self.sync_pods)

    def record(self, *call: str) -> None:
        with self._lock:
            self.calls.append(call)

    def verbs(self, kind: str | None = None) -> list[str]:
        """The verbs of the calls so far, in order; of one kind's (TrainJob, ConfigMap, ...) when `kind` is given."""
        return [call[0] for call in self.calls if kind is None or (len(call) > 1 and call[1] == kind)]

    def sync_pods(self, namespace: str) -> None:
        """The kubelet's sync of every running pod in `namespace`: the ConfigMaps they mount, as files."""
        with self._lock:
            for (ns, _), job in self.jobs.items():
                if ns == namespace and job.processes is not None:
                    job.processes.sync()

    def release(self) -> None:
        """Let held jobs go on to their remaining phases (at their next watch)."""
        self._released = True

    # -- the stand-in operator ------------------------------------------------------------------------
    def _advance(self, job: StandInJob) -> bool:
        """One phase on, unless held or at the end; returns whether it moved."""
        with self._lock:
            if job.processes is not None:  # the pods' processes say where the job is
                if job.phase == job.shown:
                    return False
                job.shown, job.obj["status"] = job.phase, job_status(job)
                job.obj["metadata"]["resourceVersion"] = str(int(job.obj["metadata"]["resourceVersion"]) + 1)
                return True
            last = len(job.scenario.phases) - 1
            if job.step >= last or (job.phase == job.scenario.hold and not self._released):
                return False
            if job.step + 1 == last and job.scenario.on_end is not None:
                job.scenario.on_end(job.obj)
            job.step += 1
            job.obj["status"] = job_status(job)
            job.obj["metadata"]["resourceVersion"] = str(int(job.obj["metadata"]["resourceVersion"]) + 1)
            return True

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        with self._lock:
            return [pod for (ns, _), job in self.jobs.items() if ns == namespace for pod in pods_of(job)]


class _Handler(JsonHandler):
    api: StandInApi  # set on the subclass made per server

    def _stream_line(self, text: str) -> None:
        self.wfile.write(text.encode() + b"\n")
        self.wfile.flush()

    def _route(self, verb: str) -> None:
        try:
            self._serve(verb)
        except (BrokenPipeError, ConnectionResetError):  # the client stopped reading a stream: fine
            return

    def _serve(self, verb: str) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        job_match, pod_match = JOB_ROUTE.match(url.path), POD_ROUTE.match(url.path)
        configmap_match = CONFIGMAP_ROUTE.match(url.path)
        if url.path == OPENAPI_TRAINER and verb == "GET" and "TrainJob" in self.api.installed:
            self.api.record("openapi", "trainer.kubeflow.org/v1alpha1")
            return self.reply(200, crds.openapi_document(self.api.trainer))
        if job_match:
            group, version, namespace, plural, name = job_match.groups()
            return self._jobs(verb, f"{group}/{version}", namespace, plural, name, query)
        if configmap_match:
            return self._configmap(verb, *configmap_match.groups())
        if pod_match and verb == "GET":
            namespace, pod, is_log = pod_match.groups()
            return self._log(namespace, pod, query) if is_log else self._list_pods(namespace, query)
        self.reply(404, status_body(404, "NotFound", f"the stand-in does not serve {verb} {url.path}"))

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def _configmap(self, verb: str, namespace: str, name: str | None) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"null") if length else None
        with self.api._lock:
            code, answer = self.api.configmaps.serve(verb, namespace, name, body, self.headers.get("Content-Type", ""))
        self.reply(code, answer)

    # -- jobs -------------------------------------------------------------------------------------------
    def _jobs(self, verb: str, api_version: str, namespace: str, plural: str, name: str | None, query: dict) -> None:
        api = self.api
        kind = next(
            (k for k in crds.CRD_FILES if crds.plural(k) == plural and crds.api_version(k) == api_version), None
        )
        if kind not in api.installed:
            return self.reply(404, status_body(404, "NotFound", f"no {plural} in {api_version}"))
        if verb == "POST":
            length = int(self.headers.get("Content-Length", "0"))
            strict = query.get("fieldValidation") == "Strict"
            body = json.loads(self.rfile.read(length) or b"{}")
            return self._create(kind, namespace, body, strict, dry_run=query.get("dryRun") == "All")
        if verb == "GET" and name is None and query.get("watch", "").lower() == "true":
            wanted = query.get("fieldSelector", "").removeprefix("metadata.name=")
            api.record("watch", kind, wanted)
            return self._watch(namespace, wanted, float(query.get("timeoutSeconds", "1")))
        key = (namespace, name or "")
        if verb == "GET":
            api.record("get", kind, key[1])
            with api._lock:
                job = api.jobs.get(key)
                body = json.loads(json.dumps(job.obj)) if job else None
            return self.reply(200, body) if body else self.reply(404, status_body(404, "NotFound", f"{name} not found"))
        if verb == "DELETE":
            api.record("delete", kind, key[1])
            with api._lock:
                job = api.jobs.pop(key, None)
            if job is None:
                return self.reply(404, status_body(404, "NotFound", f"{name} not found"))
            if job.processes is not None:
                job.processes.stop()
            return self.reply(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
        return self.reply(405, status_body(405, "MethodNotAllowed", verb))

    def _create(self, kind: str, namespace: str, body: dict[str, Any], strict: bool, dry_run: bool = False) -> None:
        """Validate and store (dryRun=All: validate only, as `kubectl apply --dry-run=server` asks)."""
        api = self.api
        name = (body.get("metadata") or {}).get("name", "")
        api.record("dry-run-create" if dry_run else "create", kind, name)
        trainer = api.trainer if kind == "TrainJob" else crds.LATEST
        if not strict:  # the API server's default: what the CRD does not know is dropped, nobody told
            body = crds.prune(body, trainer)
        problems = crds.errors(body, trainer)
        if (body.get("metadata") or {}).get("namespace", namespace) != namespace:
            problems.append("metadata/namespace: does not match the request's namespace")
        if problems:
            return self.reply(422, status_body(422, "Invalid", "; ".join(problems)))
        if dry_run:
            return self.reply(201, body)
        with api._lock:
            if (namespace, name) in api.jobs:
                return self.reply(409, status_body(409, "AlreadyExists", f"{name} already exists"))
            body["metadata"].update(
                {
                    "namespace": namespace,
                    "uid": str(uuid.uuid4()),
                    "resourceVersion": "1",
                    "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
            )
            job = StandInJob(body, api.scenario)
            if api.scenario.run_pods_in is not None:
                mounted = lambda configmap: api.configmaps.data(namespace, configmap)  # noqa: E731
                job.processes = PodProcesses(body, api.scenario.run_pods_in / name, mounted)
            body["status"] = job_status(job)
            job.shown = job.phase
            api.jobs[(namespace, name)] = job
            created = json.loads(json.dumps(body))
            api.created.append(json.loads(json.dumps(body)))
        self.reply(201, created)

    def _watch(self, namespace: str, name: str, timeout_s: float) -> None:
        api = self.api
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        job = api.jobs.get((namespace, name))
        if job is not None:
            self._stream_line(json.dumps({"type": "ADDED", "object": job.obj}))
        deadline = time.monotonic() + min(timeout_s, api.idle_close_s)
        while time.monotonic() < deadline:
            with api._lock:
                current = api.jobs.get((namespace, name))
                if current is None:
                    if job is not None:
                        self._stream_line(json.dumps({"type": "DELETED", "object": job.obj}))
                    return
                moved = api._advance(current)
                snapshot = json.dumps({"type": "MODIFIED", "object": current.obj}) if moved else ""
            if snapshot:
                self._stream_line(snapshot)
                deadline = time.monotonic() + min(timeout_s, api.idle_close_s)
            else:
                time.sleep(0.02)

    # -- pods -------------------------------------------------------------------------------------------
    def _list_pods(self, namespace: str, query: dict) -> None:
        selector = dict(part.split("=", 1) for part in query.get("labelSelector", "").split(",") if "=" in part)
        self.api.record("list-pods", query.get("labelSelector", ""))
        pods = [
            p for p in self.api.pods(namespace) if all(p["metadata"]["labels"].get(k) == v for k, v in selector.items())
        ]
        self.reply(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods})

    def _log(self, namespace: str, pod: str, query: dict) -> None:
        api = self.api
        api.record("log", pod, query.get("container", ""))
        with api._lock:
            owner = next(
                (
                    job
                    for (ns, _), job in api.jobs.items()
                    if ns == namespace and any(p["metadata"]["name"] == pod for p in pods_of(job))
                ),
                None,
            )
        if owner is None:
            return self.reply(404, status_body(404, "NotFound", f"pod {pod} not found"))
        if query.get("container") != CONTAINER[owner.kind]:
            return self.reply(400, status_body(400, "BadRequest", f"container {query.get('container')!r} is not valid"))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        if owner.processes is not None:
            return self._follow_process_log(owner, pod)
        for line in owner.scenario.log:
            self._stream_line(line)
        if query.get("follow", "").lower() == "true":  # a running container's log stays open until it ends
            deadline = time.monotonic() + 30
            while owner.phase not in TERMINAL and owner.obj["metadata"]["name"] and time.monotonic() < deadline:
                if (namespace, owner.obj["metadata"]["name"]) not in api.jobs:
                    return
                time.sleep(0.02)

    def _follow_process_log(self, job: StandInJob, pod: str) -> None:
        """A pod run as a process: its output so far, then more as it comes, until the process ends."""
        assert job.processes is not None
        index = [p["metadata"]["name"] for p in pods_of(job)].index(pod)
        proc, offset = job.processes.procs[index], 0
        while True:
            ended = proc.poll() is not None
            data = job.processes.logs[index].read_bytes()[offset:]
            offset += len(data)
            if data:
                self.wfile.write(data)
                self.wfile.flush()
            if ended:
                return
            time.sleep(0.05)


class StandInServer:
    """Runs a StandInApi on 127.0.0.1, port 0, in a thread; use as a context manager."""

    def __init__(self, api: StandInApi | None = None) -> None:
        self.api = api or StandInApi()
        handler = type("Handler", (_Handler,), {"api": self.api})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        host, port = self.httpd.server_address[:2]
        self.api.url = f"http://{host}:{port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> StandInApi:
        self.thread.start()
        return self.api

    def __exit__(self, *_: object) -> None:
        for job in list(self.api.jobs.values()):
            if job.processes is not None:
                job.processes.stop()
        self.httpd.shutdown()
        self.httpd.server_close()


def api_client(url: str) -> Any:
    """A kubernetes ApiClient talking to the stand-in (no credentials: it asks for none)."""
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = url
    return client.ApiClient(configuration)
