"""A train step that runs one cluster trial against the stand-in API server (for the cancel/retry tests).

    python tests/launch/cluster_step.py URL STORE LAUNCHER RECURRENCE_ID

It is a real process so that the tests can stop it the way KFP does (SIGTERM on cancel) or kill it
outright (SIGKILL: a lost node), which an in-process call cannot show.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # so `launch.*` imports as in pytest

from launch.cluster_fixtures import COMMAND, SPEC, launch_config
from launch.kube_api_server import api_client
from zeus_kfp.launch.cluster import run_cluster_trial


def main() -> None:
    url, store, launcher, recurrence_id = sys.argv[1:5]
    outcome = run_cluster_trial(
        launch_config(launcher),
        SPEC,
        batch_size=64,
        cost_threshold=None,
        command=list(COMMAND),
        store_uri=store,
        recurrence_id=recurrence_id,
        attempt=1,
        work_dir=Path(store).parent / "work",
        api_client=api_client(url),
    )
    print(f"outcome: {outcome.result.status.value}: {outcome.result.reason}", flush=True)


if __name__ == "__main__":
    main()
