"""zeus-kfp's side of peer_bso.py, without Zeus's server: for comparing two versions side by side.

Run it from two checkouts (each with its own venv, `make setup`), alternating, in one session:

    for i in 1 2 3; do for tree in old new; do (cd $tree && .venv/bin/python benchmarks/peer_ab.py); done; done

Each run seeds the same 10,000-trial history (benchmarks/seed.py's simulated_history: a fixed seed,
batch sizes drawn uniformly, results from its outcome model) into a fresh store and prints one JSON
line: decision and whole-cycle medians, 8-client cycles/s, memory a decision adds, cold starts
(peer_bso.measure_kfp). Simulated: the trial results. Measured: every time and memory figure.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from contextlib import ExitStack

from peer_bso import measure_kfp
from seed import moto_server, simulated_history

SMOKE = {"trials": 100, "cycles": 2, "clients": 2, "client_cycles": 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["local", "s3"], default="local")
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--client-cycles", type=int, default=15)
    parser.add_argument("--smoke", action="store_true", help="the smallest run (tests/test_benchmarks_smoke.py)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    with tempfile.TemporaryDirectory(prefix="zeus-ab-") as tmp, ExitStack() as stack:
        uri = f"s3://{stack.enter_context(moto_server()).bucket()}/p" if args.backend == "s3" else f"{tmp}/store"
        print(json.dumps({"backend": args.backend} | measure_kfp(uri, simulated_history(args.trials), args)))


if __name__ == "__main__":
    main()
