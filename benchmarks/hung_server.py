"""How long a store step waits on a hung S3 server before it fails, with the default settings.

The server is a socket on 127.0.0.1 (port 0) that accepts every connection and never answers.
The store should give up within ZEUS_S3_RETRY_BUDGET_S (30 s by default) with its one-line
StoreUnavailableError. (The test suite checks the same with a 1 s budget, asserting the error.)

Reproduce: .venv/bin/python benchmarks/hung_server.py
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

from zeus.store import StoreUnavailableError, open_store


def main() -> int:
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    threading.Thread(target=lambda: [held.append(listener.accept()[0]) for _ in iter(int, 1)], daemon=True).start()
    os.environ.update(
        {"ZEUS_S3_ENDPOINT": f"127.0.0.1:{listener.getsockname()[1]}", "ZEUS_S3_SECURE": "false",
         "ZEUS_S3_ACCESS_KEY": "hung", "ZEUS_S3_SECRET_KEY": "hung-secret"}
    )  # fmt: skip
    for name in (
        "ZEUS_S3_CONNECT_TIMEOUT_S",
        "ZEUS_S3_READ_TIMEOUT_S",
        "ZEUS_S3_RETRY_BUDGET_S",
        "ZEUS_S3_MAX_ATTEMPTS",
    ):
        os.environ.pop(name, None)  # the defaults
    started = time.perf_counter()
    try:
        open_store("s3://zeus-hung/p").trials("some-job")
    except StoreUnavailableError as exc:
        print(f"failed after {time.perf_counter() - started:.1f} s with: {exc}")
        return 0
    print("the hung server answered?")
    return 1


if __name__ == "__main__":
    sys.exit(main())
