"""The `zeus-kfp` command line. Each module registers its commands on the shared app;
heavy imports (kfp, torch) happen inside the commands so `--help` stays fast.

This is the top layer (with notebooks/): it may import pipelines/, which imports kfp;
nothing else under zeus/ does.
"""

from zeus_kfp.cli import (  # noqa: F401  (register commands)
    cluster_cmd,
    compile_cmd,
    doctor_cmd,
    dry_run_cmd,
    fleet_cmd,
    jobs_cmd,
    run_cmd,
    simulate_cmd,
    tensorboard_cmd,
)
from zeus_kfp.cli.application import app


def main() -> None:
    app()
