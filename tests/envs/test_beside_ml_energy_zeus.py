"""zeus-kfp installed beside ml-energy's Zeus (`pip install zeus`), both non-editable as in a user's image
(.venv-beside-zeus): each keeps its own import name, a training script may use both, and uninstalling either
leaves the other whole."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from venvs import built_venv, run

pytestmark = pytest.mark.envs

ML_ENERGY_ZEUS = "0.16.0"
WHO_IS_WHO = """
import json, sys
out = {}
for name in sys.argv[1:]:
    try:
        module = __import__(name)
        out[name] = [getattr(module, "__version__", None), module.__file__]
    except ImportError as error:
        out[name] = ["ImportError", str(error)]
print(json.dumps(out))
"""
# A user's plain script that measures with ml-energy's Zeus as it trains (the monitor needs a GPU to measure,
# so this one only imports it, as a script that runs on both kinds of machine would).
PLAIN_SCRIPT = """\
import argparse

import zeus
from zeus.monitor import ZeusMonitor

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, required=True)
args = parser.parse_args()
print(f"ml-energy zeus {zeus.__version__}: {ZeusMonitor.__name__}", flush=True)
for epoch in range(1, 6):
    print(f"epoch={epoch} accuracy={1.0 - 0.5 ** (epoch * 64 / args.batch_size):.4f}", flush=True)
"""
# A Zeus-aware script (zeus-kfp's ZeusDataLoader, real torch) that also imports ml-energy's Zeus.
ZEUS_AWARE_SCRIPT = """\
import torch
from torch.utils.data import TensorDataset
from zeus.monitor import ZeusMonitor  # noqa: F401  ml-energy's, beside ours

from zeus_kfp.train.dataloader import ZeusDataLoader

torch.manual_seed(0)
x = torch.randn(1024, 8)
y = (x.sum(dim=1) > 0).long()
model = torch.nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
train_loader = ZeusDataLoader(TensorDataset(x[:768], y[:768]), shuffle=True)
eval_loader = ZeusDataLoader(TensorDataset(x[768:], y[768:]), split="eval", trial=train_loader.trial, batch_size=256)
for epoch in train_loader.epochs():
    for xb, yb in train_loader:
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        correct = sum((model(xb).argmax(dim=1) == yb).sum().item() for xb, yb in eval_loader)
    train_loader.report_metric(correct / 256)
"""
JOB_OPTIONS = ["--batch-sizes", "16,32,64,128", "--default-batch-size", "64", "--target-metric", "0.9"]


def _who_is_who(python: Path, cwd: Path) -> dict[str, list]:
    proc = run([python, "-c", WHO_IS_WHO, "zeus", "zeus_kfp"], cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _reached(proc, what: str) -> None:
    assert proc.returncode == 0, f"{what}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert re.search(r"^recurrence 1: reached the target", proc.stdout, re.MULTILINE), proc.stdout[-4000:]


def test_ml_energy_zeus_and_zeus_kfp_in_one_environment(tmp_path: Path) -> None:
    venv = built_venv(".venv-beside-zeus")
    python, cli, pip = venv / "bin" / "python", venv / "bin" / "zeus-kfp", [venv / "bin" / "python", "-m", "pip"]
    wheels = venv / "wheels"
    reinstall = [*pip, "install", "-q", "--no-deps", "--no-index", "--find-links", wheels]
    site = str(venv / "lib")
    try:
        both = _who_is_who(python, tmp_path)
        assert both["zeus"][0] == ML_ENERGY_ZEUS and both["zeus_kfp"][0] == "0.1.0", both
        assert all(path.startswith(site) and "/site-packages/" in path for _, path in both.values()), both

        _reached(run([cli, "run", "-r", "1", "--job-id", "main-beside"], cwd=tmp_path), "the main job")
        (tmp_path / "train.py").write_text(PLAIN_SCRIPT)
        command = "{python} train.py --batch-size {batch_size}"
        plain = run(
            [cli, "run", "--command", command, "--job-id", "plain", *JOB_OPTIONS, "--max-epochs", "5", "-r", "1"],
            cwd=tmp_path,
        )
        _reached(plain, "a plain script importing zeus.monitor")
        (tmp_path / "train_zeus.py").write_text(ZEUS_AWARE_SCRIPT)
        aware = [cli, "run", "--command", "{python} train_zeus.py", "--zeus-aware", "--job-id", "aware", *JOB_OPTIONS]
        _reached(
            run([*aware, "--max-epochs", "5", "-r", "1"], cwd=tmp_path), "a Zeus-aware script beside ml-energy's zeus"
        )

        assert run([*pip, "uninstall", "-y", "zeus"], cwd=tmp_path).returncode == 0
        alone = _who_is_who(python, tmp_path)
        assert alone["zeus"][0] == "ImportError" and alone["zeus_kfp"][0] == "0.1.0", alone
        _reached(run([cli, "run", "-r", "1", "--job-id", "after-uninstall"], cwd=tmp_path), "zeus-kfp without zeus")

        assert run([*reinstall, f"zeus=={ML_ENERGY_ZEUS}"], cwd=tmp_path).returncode == 0
        assert run([*pip, "uninstall", "-y", "zeus-kfp"], cwd=tmp_path).returncode == 0
        theirs = _who_is_who(python, tmp_path)
        assert theirs["zeus"][0] == ML_ENERGY_ZEUS and theirs["zeus_kfp"][0] == "ImportError", theirs
        monitor = run([python, "-c", "from zeus.monitor import ZeusMonitor; print(ZeusMonitor.__name__)"], cwd=tmp_path)
        assert monitor.stdout.strip() == "ZeusMonitor", monitor.stderr
    finally:
        run([*reinstall, f"zeus=={ML_ENERGY_ZEUS}", "zeus-kfp"], cwd=tmp_path)
