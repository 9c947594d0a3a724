"""The request handler base of the tests' local HTTP stand-ins (the Kubernetes API, the KFP API, zeusd).

Each stand-in answers JSON; the framing (status, headers, body) is written once here so the three
servers differ only in what they answer. Imported as `json_http` (tests/ is on sys.path under pytest
and in the scripts the tests start, as for `ux.*` and `launch.*`).
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    """A BaseHTTPRequestHandler that keeps test output quiet and replies with a JSON body."""

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        return

    def reply(self, code: int, body: dict[str, Any] | None = None) -> None:
        """Reply `code` with `body` (an empty object when None) as application/json."""
        data = json.dumps({} if body is None else body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
