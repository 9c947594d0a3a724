"""The README's "Use your own training script" runs as written, and the docs it points to say what it leaves out.

Code blocks preceded by a marker comment are taken from README.md itself:
`<!-- test: write NAME -->` writes the block to NAME in a fresh directory, `<!-- test: run -->`
runs each line of a shell block there, in order: `zeus-kfp ...` through the CLI (in this process,
with a store in that directory), `python ...` as a subprocess of this interpreter. A README edit
that breaks a snippet breaks this test.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from zeus_kfp.cli import app
from zeus_kfp.components.image import image_tags
from zeus_kfp.store import open_store
from zeus_kfp.train.env import ENV_VARS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
REFERENCE = ROOT / "docs" / "reference.md"  # the own-script details: placeholders, the trial's environment
KUBEFLOW = ROOT / "docs" / "kubeflow.md"  # the own-script image for a cluster
MARKED = re.compile(r"<!-- test: (?:write (?P<file>\S+)|(?P<run>run)) -->\n```(?P<lang>\w*)\n(?P<body>.*?)\n```", re.S)


def section(title: str, page: Path = README) -> str:
    text = page.read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def commands(body: str) -> list[list[str]]:
    """A shell block's command lines (backslash continuations joined, comments dropped) as argv."""
    return [argv for line in body.replace("\\\n", " ").splitlines() if (argv := shlex.split(line, comments=True))]


@pytest.mark.slow
def test_the_own_script_section_runs_as_written(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = list(MARKED.finditer(section("Use your own training script")))
    assert [b["file"] or "run" for b in blocks] == ["train.py", "train_zeus.py", "job.yaml", "run", "run"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ZEUS_KFP_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("COLUMNS", "100")
    printed = []
    for block in blocks:
        if block["file"]:
            (tmp_path / block["file"]).write_text(block["body"] + "\n")
            continue
        for argv in commands(block["body"]):
            if argv[0] == "python":
                proc = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, check=False)
                assert proc.returncode == 0, proc.stderr
                printed.append(proc.stdout)
            else:
                assert argv[0] == "zeus-kfp"
                result = CliRunner().invoke(app, argv[1:])
                assert result.exit_code == 0, (argv, result.output)
                printed.append(result.stdout)
    assert printed[0].splitlines()[:2] == ["epoch=1 accuracy=0.7500", "epoch=2 accuracy=0.9375"]
    store = open_store(str(tmp_path / "store"))
    plain, aware = store.trials("my-model"), store.trials("my-model-zeus")
    # The simulated GPU charges the epochs the script reports (50,000 samples each), whatever the load, so how
    # each trial ends does not depend on it: with accuracy 1 - 0.5 ** (epoch * 64 / batch size), batch size 64
    # reaches 0.9 at epoch 4 (recurrence 1), and every trial reaches within max_epochs.
    assert sorted(set(plain["recurrence"])) == [1, 2] and plain["reached"].all()
    assert int(plain["num_epochs"].iloc[0]) == 4
    assert aware["reached"].any() and store.profiles("my-model-zeus")["phase"].eq("train").any()  # it profiled
    assert "my-model" in printed[3] and "trials" in printed[3]  # zeus-kfp show my-model
    compiled = next(yaml.safe_load_all((tmp_path / "zeus_pipeline.yaml").read_text()))
    defaults = {k: v.get("defaultValue") for k, v in compiled["root"]["inputDefinitions"]["parameters"].items()}
    assert defaults["train_command"] == ["{python}", "/opt/app/train.py", "--batch-size", "{batch_size}"]
    assert (defaults["job_id"], defaults["zeus_aware"], defaults["default_batch_size"]) == ("my-model", False, 64)
    assert (defaults["launcher"], defaults["keep"]) == ("trainjob", "")  # a cluster trial: its pods hold the GPUs


def test_the_docs_name_every_variable_a_trial_gets_and_the_image_make_builds() -> None:
    reference = section("Your training script", REFERENCE)
    assert [name for name in ENV_VARS.values() if f"`{name}`" not in reference] == []
    for placeholder in ("{python}", "{batch_size}", "{data_dir}", "{log_dir}", "{work_dir}"):
        assert f"| `{placeholder}` |" in reference  # a row of the placeholder table
    assert "docs/reference.md#your-training-script" in section("Use your own training script")
    blocks = section("From your laptop to a nightly run, per Kubeflow version", KUBEFLOW)
    bases = set(re.findall(r"--build-arg BASE=(\S+)", blocks))
    assert bases == {image_tags("$REGISTRY")[1]}  # the CUDA tag `make push-image IMAGE_REPO=$REGISTRY` pushes
    assert "ARG BASE\nFROM ${BASE}\n" in blocks  # Dockerfile.train builds on it
