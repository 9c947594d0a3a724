"""How long a store step waits on a hung S3 server before it fails, with the default settings.

The server is a socket on 127.0.0.1 (port 0) that accepts every connection and never answers.
The store should give up within ZEUS_S3_RETRY_BUDGET_S (30 s by default) with its one-line
StoreUnavailableError. (The test suite checks the same with a 1 s budget, asserting the error.)

Reproduce: .venv/bin/python benchmarks/hung_server.py   (--smoke: a 1 s budget, what the suite runs)
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time

from zeus_kfp.store import StoreUnavailableError, open_store

SMOKE_BUDGET = {"ZEUS_S3_RETRY_BUDGET_S": "1", "ZEUS_S3_READ_TIMEOUT_S": "0.5"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--smoke", action="store_true", help="the smallest run (tests/test_benchmarks_smoke.py): a 1 s budget"
    )
    args = parser.parse_args()
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
    if args.smoke:
        os.environ.update(SMOKE_BUDGET)
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
