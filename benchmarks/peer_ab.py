"""zeus-kfp's side of peer_bso.py, without Zeus's server: for comparing two versions side by side.

Run it from two checkouts (each with its own venv, `make setup`), alternating, in one session:

    for i in 1 2 3; do for tree in old new; do (cd $tree && .venv/bin/python benchmarks/peer_ab.py); done; done

Each run imports the same 10,000-trial history (a fixed seed; batch sizes drawn uniformly, results
from peer_bso's outcome model) into a fresh store and prints one JSON line: decision and whole-cycle
medians, 8-client cycles/s, memory a decision adds, cold starts (peer_bso.measure_kfp). Simulated:
the trial results. Measured: every time and memory figure.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import uuid

import numpy as np
import pandas as pd
from peer_bso import SPEC, history_frame, measure_kfp, outcome
from store import start_moto


def history(count: int, seed: int = 0) -> pd.DataFrame:
    """`count` finished trials at uniformly drawn batch sizes, results from peer_bso's outcome model."""
    rng = np.random.default_rng(seed)
    batches = (int(rng.choice(SPEC.batch_sizes)) for _ in range(count))
    return history_frame((batch, *outcome(batch, rng)) for batch in batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["local", "s3"], default="local")
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--client-cycles", type=int, default=15)
    args = parser.parse_args()
    moto = start_moto() if args.backend == "s3" else None
    with tempfile.TemporaryDirectory(prefix="zeus-ab-") as tmp:
        uri = f"s3://zeus-ab-{uuid.uuid4().hex[:10]}/p" if moto else f"{tmp}/store"
        print(json.dumps({"backend": args.backend} | measure_kfp(uri, history(args.trials), args)))
    if moto is not None:
        moto[0].send("stop")
        moto[1].join(timeout=10)


if __name__ == "__main__":
    main()
