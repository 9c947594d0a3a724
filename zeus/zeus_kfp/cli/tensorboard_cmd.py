"""`zeus-kfp tensorboard JOB`: the job's scalars across recurrences in TensorBoard, from any store.

The report step keeps one event file per recurrence in the store (zeus_kfp.report.tensorboard); this
command copies them into a local directory (one TensorBoard run per job) and serves it on
127.0.0.1. Heavy imports (tensorboard) happen inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from zeus_kfp.cli.application import app
from zeus_kfp.cli.jobs_cmd import StoreOpt
from zeus_kfp.cli.stores import open_for_reading

if TYPE_CHECKING:
    from zeus_kfp.store import Store

DEFAULT_LOGDIR = Path(".zeus-kfp") / "tensorboard"


def sync_logs(store: Store, job_id: str, logdir: Path) -> Path:
    """Copy the job's event files from the store into `logdir`/<job_id>/ (one TensorBoard run); returns
    that directory. Files already there are kept (the objects never change), none are removed."""
    run_dir = Path(logdir) / job_id
    run_dir.mkdir(parents=True, exist_ok=True)
    for name, data in store.tensorboard_logs(job_id).items():
        target = run_dir / name
        if not target.exists():
            tmp = run_dir / f".{name}.part"
            tmp.write_bytes(data)
            tmp.replace(target)
    return run_dir


@app.command()
def tensorboard(
    job: Annotated[str, typer.Argument(help="The job id.")],
    store: StoreOpt = None,
    logdir: Annotated[
        Path, typer.Option(help="Local directory the event files are synced into (one run per job).")
    ] = DEFAULT_LOGDIR,
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: a free one).")] = 6006,
    serve: Annotated[bool, typer.Option("--serve/--no-serve", help="Run TensorBoard after syncing.")] = True,
) -> None:
    """Sync JOB's TensorBoard logs (cost, energy, time, batch size, power limit, reached and the posterior
    mean per batch size, one step per recurrence) from the store and serve them on 127.0.0.1."""
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.report.tensorboard import tensorboard_argv
    from zeus_kfp.store import UnknownJobError

    opened = open_for_reading(store)  # errors end the command with one line (zeus_kfp.cli.exits)
    try:
        opened.get_job(job)
    except UnknownJobError as err:
        raise UnknownJobError(f"{err} (`zeus-kfp jobs --store {opened.uri}` lists the jobs)") from None
    run_dir = sync_logs(opened, job, logdir)
    files = sorted(run_dir.glob("*tfevents*"))
    if not files:
        raise UnknownJobError(
            f"job {job!r} has no TensorBoard logs in {opened.uri} (the report step writes one per recurrence: "
            "run a recurrence first)"
        )
    typer.echo(f"synced {len(files)} recurrence(s) of {job} from {opened.uri} to {run_dir}")
    if not serve:
        return
    # deferred: tensorboard takes seconds to import; only this command serves it
    from tensorboard import program

    board = program.TensorBoard()
    board.configure(argv=[None, *tensorboard_argv(logdir.resolve(), port)])
    raise typer.Exit(board.main())  # prints "TensorBoard ... at http://127.0.0.1:PORT/", serves until Ctrl-C
