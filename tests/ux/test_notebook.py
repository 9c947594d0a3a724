"""notebooks/quickstart.ipynb executed for real (nbclient, the venv's python3 kernel)."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from PIL import Image

from zeus_kfp.store import open_store

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"
TESTS_DIR = Path(__file__).resolve().parents[1]


def execute(nb: nbformat.NotebookNode, cwd: Path) -> nbformat.NotebookNode:
    # "python3" is ipykernel's native kernel: jupyter_client starts it with this interpreter, so a
    # fresh venv with ipykernel installed needs no `ipykernel install`.
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def outputs(cell: nbformat.NotebookNode, kind: str) -> list:
    return [o for o in cell.outputs if o.output_type == kind]


def text_of(cell: nbformat.NotebookNode) -> str:
    return "".join(o.text for o in outputs(cell, "stream"))


def tagged(nb: nbformat.NotebookNode, tag: str) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code" and tag in c.metadata.get("tags", [])]


@pytest.mark.slow
def test_quickstart_runs_two_local_recurrences(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KFP_HOST", raising=False)
    monkeypatch.setenv("ZEUS_KFP_QUICKSTART_DIR", str(tmp_path / "work"))
    nb = execute(nbformat.read(NOTEBOOK, as_version=4), tmp_path)
    run_cell, trials_cell, _, plot_cell = tagged(nb, "local-run")
    progress = text_of(run_cell)
    assert re.search(r"recurrence 1: batch sizes \[\d+", progress) and "recurrence 2:" in progress
    assert "RuntimeWarning" not in progress  # kfp.local's per-step image warning is filtered

    # The store the notebook wrote holds both recurrences, and the table shows its trials.
    trials = open_store(str(tmp_path / "work" / "store")).trials("quickstart")
    assert sorted(trials["recurrence"].unique()) == [1, 2]
    assert trials["finished"].all()
    html = outputs(trials_cell, "execute_result")[0].data["text/html"]
    assert html.count("<tr") == len(trials) + 1  # header + one row per trial
    if trials["simulated"].any():
        assert "(simulated GPU)" in progress

    images = [o.data["image/png"] for o in outputs(plot_cell, "display_data") if "image/png" in o.data]
    assert len(images) == 2
    for data in images:
        with Image.open(io.BytesIO(base64.b64decode(data))) as img:
            assert img.format == "PNG" and img.size[0] >= 600 and len(img.getcolors(1 << 20) or []) > 50

    compile_cell, cluster_cell = tagged(nb, "compile")[0], tagged(nb, "cluster")[0]
    package = tmp_path / "work" / "zeus_pipeline.yaml"
    assert str(package) in text_of(compile_cell) and package.stat().st_size > 10_000
    assert "KFP_HOST is not set, so nothing was sent" in text_of(cluster_cell)
    assert "--cron '0 0 2 * * *'" in text_of(cluster_cell)


def test_quickstart_cluster_cell_submits_and_schedules(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With KFP_HOST set, the cluster cell's calls reach kfp.Client (recorded: no cluster here)."""
    monkeypatch.setenv("KFP_HOST", "http://kfp.example:8080")
    monkeypatch.setenv("ZEUS_KFP_QUICKSTART_DIR", str(tmp_path / "work"))
    full = nbformat.read(NOTEBOOK, as_version=4)
    patch = nbformat.v4.new_code_cell(
        f"import sys; sys.path.insert(0, {str(TESTS_DIR)!r})\n"
        "import kfp\nfrom ux.fake_kfp import Recorder\nrecorder = Recorder()\nkfp.Client = recorder.factory"
    )
    dump = nbformat.v4.new_code_cell("import json; print(json.dumps(recorder.calls, default=str))")
    cells = [patch, *tagged(full, "setup"), *tagged(full, "compile"), *tagged(full, "cluster"), dump]
    nb = execute(nbformat.v4.new_notebook(cells=cells, metadata=full.metadata), tmp_path)
    calls = json.loads(text_of(nb.cells[-1]))
    by_method = {method: kwargs for method, kwargs in calls}
    assert [m for m, _ in calls if m != "get_kfp_healthz"] == [
        "__init__",
        "create_run_from_pipeline_package",
        "create_experiment",
        "create_recurring_run",
    ]
    assert by_method["__init__"] == {"host": "http://kfp.example:8080"}
    run = by_method["create_run_from_pipeline_package"]
    assert_the_package_is_the_notebooks_job(tmp_path / "work" / "zeus_pipeline.yaml")
    assert run["arguments"] == {"job_id": "quickstart"} and run["experiment_name"] == "zeus-kfp"
    recurring = by_method["create_recurring_run"]
    assert recurring["cron_expression"] == "0 0 2 * * *"
    assert recurring["max_concurrency"] == 1 and recurring["no_catchup"] is True
    assert recurring["pipeline_package_path:pipeline_name"] == "zeus-recurrence"
    assert "scheduled recurring run rr-7" in text_of(tagged(nb, "cluster")[0])


def assert_the_package_is_the_notebooks_job(path: Path) -> None:
    """The compiled package's run defaults are the job the notebook defines, not the example job: its job id
    and settings, its script as the image holds it, and the GPU's own maximum power (read at run time)."""
    from zeus_kfp.components.image import IMAGE_EXAMPLES_DIR
    from zeus_kfp.pipelines.package import CompiledPackage
    from zeus_kfp.train import example_spec

    package = CompiledPackage.read(path)
    example = example_spec()
    assert package.default("job_id") == "quickstart" != example.job_id
    assert package.default("target_metric") == example.target_metric  # the notebook's spec takes the example's
    assert package.default("train_command") == ["{python}", f"{IMAGE_EXAMPLES_DIR}/train_zeus.py"]
    assert package.default("preprocess_ref") == "zeus_kfp.train.example:make_dataset"
    assert package.default("max_power_w") == 0.0 and package.has_task("gpu-power")
    assert package.constants("gate")["max_attempts"] == 2  # the notebook's ATTEMPTS
    assert package.fixed_settings() == {"max_attempts": 2}  # what dry-run and run validation build the spec with
    assert str(path.parent) not in path.read_text()  # no path of this machine in what a cluster runs
