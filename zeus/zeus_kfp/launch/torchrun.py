"""Run one trial's command under torchrun, then say which rank failed: `python -m zeus_kfp.launch.torchrun`.

    python -m zeus_kfp.launch.torchrun [--standalone --nproc-per-node N] -- COMMAND ARGS...

Why a wrapper around torchrun rather than torchrun itself: the trial needs three things torchrun
does not do. (1) Only rank 0's output reaches the step's log (Katib reads metrics from the master
only, and a plain script's `accuracy=...` lines must not arrive once per rank): every rank writes
to its own file, and rank 0's files are copied to this process's stdout and stderr, unprefixed.
(2) When ranks fail, the trial must name the one that failed first (zeus_kfp.launch.failures), not
"ChildFailedError": the wrapper reads torchrun's exit codes and the ranks' own records and, on
rank 0's node, rewrites result.json as a failed trial with that rank's error and the energy the
ranks spent. (3) On a cluster, rank 0's node hands the result back through the store
(zeus_kfp.launch.handoff). (4) On a cluster, the trial's deadline ($ZEUS_TRIAL_DEADLINE_S, from the pod's
start): past it the ranks are stopped and the pod fails, so a job whose train step was killed outright
cannot hold its GPUs for ever, even on Trainer v2.1, whose TrainJob has no activeDeadlineSeconds.

It is torch's own launcher (torch.distributed.run), so it reads the same PET_* variables that
Kubeflow Trainer and the Training Operator set in each pod (nodes, processes per node, node rank,
master address). Locally, `--standalone` picks a free port on this machine. Workers run with
--no-python (COMMAND is a full command line), --max-restarts 0 (a restarted rank would spend the
trial's energy twice) and torchrun's default monitor interval: when a rank dies, torchrun stops
the others within a fraction of a second, so nothing is left running.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from zeus_kfp.launch.failures import RankFailure, failed_result, rank_failures, root_cause
from zeus_kfp.launch.handoff import REUSE_ENV, Handoff
from zeus_kfp.train.artifacts import read_result_json, write_result
from zeus_kfp.train.distributed import read_rank_records, signal_name
from zeus_kfp.train.env import TrialEnv

MODULE = "zeus_kfp.launch.torchrun"
ELASTIC_SUBDIR = (
    "torchrun"  # torchrun's per-rank logs: <log dir>/torchrun/<run>/attempt_0/<local rank>/std{out,err}.log
)
TERMINATION_LOG = Path("/dev/termination-log")  # Kubernetes shows what is written here as the pod's failure message
TAIL_LINES = 20
DEADLINE_ENV = "ZEUS_TRIAL_DEADLINE_S"  # zeus_kfp.launch.manifests sets it from the trial's timeout


class _Deadline:
    """SIGTERM to this process once `seconds` have passed: torchrun stops the ranks as it does for a stopped pod."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.passed = seconds, False
        self._timer = threading.Timer(seconds, self._expire) if seconds > 0 else None
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()

    def _expire(self) -> None:
        self.passed = True
        os.kill(os.getpid(), signal.SIGTERM)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    @classmethod
    def from_env(cls) -> _Deadline:
        raw = os.environ.get(DEADLINE_ENV, "").strip()
        try:
            return cls(float(raw) if raw else 0.0)
        except ValueError:
            raise SystemExit(f"invalid {DEADLINE_ENV}={raw!r}: allowed a number of seconds") from None


def local_command(command: Sequence[str], nproc_per_node: int, python: str | None = None) -> list[str]:
    """The command that runs `command` as `nproc_per_node` ranks on this machine."""
    launcher = [python or sys.executable, "-m", MODULE, "--standalone", "--nproc-per-node", str(nproc_per_node)]
    return [*launcher, "--", *command]


def pod_command(command: Sequence[str], python: str = "python") -> list[str]:
    """The command of a TrainJob/PyTorchJob pod: torchrun's settings come from the operator's PET_* variables."""
    return [python, "-m", MODULE, "--", *command]


class _Follower(threading.Thread):
    """Copies one of local rank 0's log files, as torchrun writes it, to a stream of ours."""

    def __init__(self, root: Path, name: str, sink) -> None:
        super().__init__(daemon=True, name=f"zeus-follow-{name}")
        self.root, self.name, self.sink = root, name, sink
        self.done = threading.Event()

    def _find(self) -> Path | None:
        found = sorted(self.root.glob(f"*/attempt_*/0/{self.name}"), key=lambda p: p.stat().st_mtime)
        return found[-1] if found else None

    def run(self) -> None:
        path, offset = None, 0
        while True:
            finishing = self.done.is_set()
            path = path or self._find()
            if path is not None:
                with path.open("rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read()
                offset += len(chunk)
                if chunk:
                    self.sink.write(chunk.decode("utf-8", errors="replace"))
                    self.sink.flush()
            if finishing:
                return
            self.done.wait(0.1)

    def stop(self) -> None:
        self.done.set()
        self.join(10)


def _tail(root: Path, local_rank: int) -> str:
    found = sorted(root.glob(f"*/attempt_*/{local_rank}/stderr.log"))
    if not found:
        return ""
    lines = found[-1].read_text(errors="replace").splitlines()
    return "\n".join(lines[-TAIL_LINES:])


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    args = list(argv)
    if "--" not in args:
        raise SystemExit(f"usage: python -m {MODULE} [--standalone --nproc-per-node N] -- COMMAND ...")
    split = args.index("--")
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    parser.add_argument("--standalone", action="store_true")
    parser.add_argument("--nproc-per-node", type=int)
    ours, command = parser.parse_args(args[:split]), args[split + 1 :]
    if not command:
        raise SystemExit("zeus_kfp.launch.torchrun: no command after '--'")
    return ours, command


def _torchrun_args(ours: argparse.Namespace, command: list[str], elastic_dir: Path) -> list[str]:
    args = ["--no-python", "--max-restarts", "0", "--log-dir", str(elastic_dir), "--redirects", "3"]
    if ours.standalone:
        args.append("--standalone")
    if ours.nproc_per_node:
        args += ["--nproc-per-node", str(ours.nproc_per_node)]
    if "PET_MASTER_ADDR" not in os.environ and os.environ.get("MASTER_ADDR"):  # Training Operator v1 sets these
        args += ["--master-addr", os.environ["MASTER_ADDR"], "--master-port", os.environ.get("MASTER_PORT", "23456")]
    return args + command


def _write_termination_message(text: str) -> None:
    if TERMINATION_LOG.parent.is_dir() and TERMINATION_LOG.exists():
        with contextlib.suppress(OSError):
            TERMINATION_LOG.write_text(text[-4000:])


def main(argv: Sequence[str] | None = None) -> int:
    # deferred: torch takes seconds to import; only the pod's entry point runs it, not the steps that import this
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, parse_min_max_nnodes, run

    ours, command = _parse(sys.argv[1:] if argv is None else argv)
    env = TrialEnv.from_env()
    log_dir = Path(env.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    handoff = Handoff.from_env()
    if handoff is not None and os.environ.get(REUSE_ENV) == "1":
        reuse = handoff.fetch_reuse(log_dir.parent)
        if reuse is not None:
            os.environ["ZEUS_PROFILE_PATH"] = str(reuse)  # the ranks inherit it: train at the stored optimum
    elastic_dir = log_dir / ELASTIC_SUBDIR
    torch_args = parse_args(_torchrun_args(ours, command, elastic_dir))
    node_rank = int(torch_args.node_rank or 0)
    nproc = int(torch_args.nproc_per_node)
    world_size = parse_min_max_nnodes(torch_args.nnodes)[1] * nproc

    followers = [_Follower(elastic_dir, "stdout.log", sys.stdout), _Follower(elastic_dir, "stderr.log", sys.stderr)]
    for f in followers:
        f.start()
    exits: dict[int, int] = {}
    stopped_by = None
    deadline = _Deadline.from_env()
    try:
        run(torch_args)
    except ChildFailedError as exc:
        exits = {int(rank): int(f.exitcode) for rank, f in exc.failures.items()}
    except SignalException as exc:
        stopped_by = int(exc.sigval)
    finally:
        deadline.cancel()
        for f in followers:
            f.stop()

    if not exits and stopped_by is None:
        code = 0
    else:
        late = deadline.seconds if deadline.passed else None
        code = _report_failure(env, log_dir, elastic_dir, exits, stopped_by, node_rank, nproc, world_size, late)
    if handoff is not None and node_rank == 0:
        handoff.publish(log_dir)
    return code


def _report_failure(
    env: TrialEnv,
    log_dir: Path,
    elastic_dir: Path,
    exits: dict[int, int],
    stopped_by: int | None,
    node_rank: int,
    nproc: int,
    world_size: int,
    deadline_s: float | None = None,
) -> int:
    """Name the rank that failed first (stderr and the pod's termination message) and, on rank 0's node,
    record the failed trial in result.json. `deadline_s`: the trial's deadline passed (it stopped the ranks)."""
    first = node_rank * nproc
    records = read_rank_records(log_dir)
    tails = {first + i: _tail(elastic_dir, i) for i in range(nproc)}
    if deadline_s is not None:
        why = f"the trial's deadline of {deadline_s:g} s passed ({DEADLINE_ENV}); its ranks were stopped"
        cause = RankFailure(first, why, secondary=True)
    elif stopped_by is not None:
        cause = RankFailure(first, f"torchrun was stopped by {signal_name(stopped_by)}", secondary=True)
    else:
        cause = root_cause(rank_failures(exits, records, tails))
        assert cause is not None
    message = f"zeus: rank {cause.rank} failed: {cause.error}"
    tail = tails.get(cause.rank, "")
    print(message + (f"\n--- rank {cause.rank} stderr (tail) ---\n{tail}" if tail else ""), file=sys.stderr)
    _write_termination_message(message)
    if node_rank == 0:
        leader = read_result_json(log_dir)
        result = failed_result(env.check(), env.batch_size, cause, records, leader, world_size)
        metrics = (leader or {}).get("metrics", [])
        write_result(log_dir, result, metrics=metrics, gpu_kind=(leader or {}).get("gpu_kind"), failed_rank=cause.rank)
    return 128 + stopped_by if stopped_by is not None else 1


if __name__ == "__main__":
    sys.exit(main())
