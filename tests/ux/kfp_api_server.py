"""Just enough of the KFP v2beta1 REST API, on 127.0.0.1, for the real kfp.Client.

Why a server as well as the recording fake: with it the real kfp.Client builds the real
requests (how the token travels, what the recurring run's trigger and the run's runtime config
look like on the wire), so a mistake only a server would notice shows up here. Anything the
server does not know answers 404 and is recorded, so a test sees unexpected calls.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import yaml
from json_http import JsonHandler

API = "/apis/v2beta1"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any  # parsed JSON, or {"fields": ..., "file": <parsed YAML>} for an upload


@dataclass
class KfpApiState:
    requests: list[Request] = field(default_factory=list)
    pipelines: dict[str, str] = field(default_factory=dict)  # display name -> id
    # pipeline id -> its versions, oldest first: (version id, the uploaded YAML's documents)
    versions: dict[str, list[tuple[str, list[Any]]]] = field(default_factory=dict)
    experiments: dict[str, str] = field(default_factory=dict)
    # What a real API server would vary: its version (healthz tag_name, absent when None), its
    # mode, the token it accepts (None: any) and the namespaces that token may use (None: any).
    tag_name: str | None = None
    multi_user: bool = False
    token: str | None = None
    namespaces: set[str] | None = None
    prefix: str = ""  # where the API sits behind a gateway: "/pipeline" behind Kubeflow's Istio gateway

    def posts(self, path: str) -> list[Request]:
        return [r for r in self.requests if r.method == "POST" and r.path == API + path]


def _multipart(content_type: str, body: bytes) -> dict[str, Any]:
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    out: dict[str, Any] = {"fields": {}}
    for part in message.iter_parts():
        data = part.get_payload(decode=True)
        if part.get_filename():
            out["filename"] = part.get_filename()
            out["file"] = list(yaml.safe_load_all(data))
        else:
            out["fields"][part.get_param("name", header="content-disposition")] = data.decode()
    return out


def _handler(state: KfpApiState) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def _record(self) -> Request:
            url = urlparse(self.path)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            ctype = self.headers.get("Content-Type", "")
            body: Any = None
            if raw and ctype.startswith("multipart/"):
                body = _multipart(ctype, raw)
            elif raw:
                body = json.loads(raw)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            path = url.path.removeprefix(state.prefix) if url.path.startswith(state.prefix + "/") else url.path
            request = Request(self.command, path, query, dict(self.headers.items()), body)
            state.requests.append(request)
            return request

        @staticmethod
        def _named(query: dict[str, str]) -> str | None:
            predicates = json.loads(query.get("filter", "{}")).get("predicates", [])
            return (
                predicates[0]["string_value"]
                if predicates and "string_value" in predicates[0]
                else (predicates[0].get("stringValue") if predicates else None)
            )

        def do_GET(self) -> None:
            r = self._record()
            if r.path == f"{API}/healthz":
                version = {"tag_name": state.tag_name, "commit_sha": "0" * 40} if state.tag_name else {}
                return self.reply(200, {"multi_user": state.multi_user, **version})
            if r.path == f"{API}/pipelines":
                name = self._named(r.query)
                found = (
                    [{"pipeline_id": state.pipelines[name], "display_name": name}] if name in state.pipelines else []
                )
                return self.reply(200, {"pipelines": found, "total_size": len(found)})
            if r.path == f"{API}/experiments":
                auth = r.headers.get("Authorization") or r.headers.get("authorization")
                if state.token is not None and auth != f"Bearer {state.token}":
                    return self.reply(401, {"error": "Unauthorized"})
                if state.namespaces is not None and r.query.get("namespace") not in state.namespaces:
                    return self.reply(403, {"error": "not allowed in this namespace"})
                name = self._named(r.query)
                found = (
                    [{"experiment_id": state.experiments[name], "display_name": name}]
                    if name in state.experiments
                    else []
                )
                return self.reply(200, {"experiments": found, "total_size": len(found)})
            parts = r.path.removeprefix(f"{API}/pipelines/").split("/")
            if r.path.startswith(f"{API}/pipelines/") and len(parts) in (2, 3) and parts[1] == "versions":
                return self._versions(r, parts[0], parts[2] if len(parts) == 3 else None)
            return self.reply(404, {"error": f"not served: GET {r.path}"})

        def _versions(self, r: Request, pipeline_id: str, version_id: str | None) -> None:
            """List a pipeline's versions (newest first for sort_by 'created_at desc') or get one, with its
            spec as the API server returns it: {pipeline_spec, platform_spec} when the upload had both."""
            versions = state.versions.get(pipeline_id, [])

            def body(vid: str, docs: list[Any]) -> dict[str, Any]:
                spec = {"pipeline_spec": docs[0], "platform_spec": docs[1]} if len(docs) > 1 else docs[0]
                return {"pipeline_id": pipeline_id, "pipeline_version_id": vid, "pipeline_spec": spec}

            if version_id is not None:
                found = dict(versions).get(version_id)
                if found is None:
                    return self.reply(404, {"error": f"no version {version_id}"})
                return self.reply(200, body(version_id, found))
            ordered = list(reversed(versions)) if r.query.get("sort_by") == "created_at desc" else versions
            listed = [body(vid, docs) for vid, docs in ordered[: int(r.query.get("page_size", 10))]]
            return self.reply(200, {"pipeline_versions": listed, "total_size": len(versions)})

        def do_POST(self) -> None:
            r = self._record()
            if r.path == f"{API}/pipelines/upload":
                pipeline_id = f"pipe-{len(state.pipelines) + 1}"
                state.pipelines[r.query["name"]] = pipeline_id
                state.versions[pipeline_id] = [(f"{pipeline_id}-ver-1", r.body["file"])]
                return self.reply(200, {"pipeline_id": pipeline_id, "display_name": r.query["name"]})
            if r.path == f"{API}/pipelines/upload_version":
                versions = state.versions.setdefault(r.query["pipelineid"], [])
                versions.append((f"ver-{len(versions)}", r.body["file"]))
                return self.reply(200, {"pipeline_id": r.query["pipelineid"], "pipeline_version_id": versions[-1][0]})
            if r.path == f"{API}/experiments":
                experiment_id = f"exp-{len(state.experiments) + 1}"
                state.experiments[r.body["display_name"]] = experiment_id
                return self.reply(200, {"experiment_id": experiment_id, "display_name": r.body["display_name"]})
            if r.path == f"{API}/runs":
                return self.reply(200, {"run_id": "run-1", "display_name": r.body.get("display_name")})
            if r.path == f"{API}/recurringruns":
                return self.reply(200, {"recurring_run_id": "rr-1", "display_name": r.body.get("display_name")})
            return self.reply(404, {"error": f"not served: POST {r.path}"})

    return Handler


class KfpApiServer:
    """A threaded server on 127.0.0.1 with an OS-chosen port; use as a context manager."""

    def __init__(self) -> None:
        self.state = KfpApiState()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> KfpApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
