"""Time is priced at the cluster's GPU's maximum power limit, read at run time, unless the run pins it.

Before: every compiled pipeline priced time at a fixed 300 W (own job) or 250 W (example), whatever GPU
ran it. Now the max_power_w parameter of a compiled pipeline defaults to 0, "read it", and says so in the
KFP UI; the gpu-power step, scheduled like the trials, reads the GPU through NVML before preprocess
registers the job. The GPU is physically absent here: the steps run through kfp.local (each a
subprocess) with the suite's fake pynvml (tests/power_train/fake_pynvml.py) playing an H100 or an A100,
installed as `pynvml` for those subprocesses.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kfp import components
from typer.testing import CliRunner

from zeus_kfp.cli import app
from zeus_kfp.errors import FieldError
from zeus_kfp.pipelines.compile import compile_pipeline
from zeus_kfp.pipelines.dag import MAX_POWER_READ_HELP
from zeus_kfp.pipelines.local import LocalRunError, run_recurrence
from zeus_kfp.pipelines.package import CompiledPackage
from zeus_kfp.simulate.trace_trial import TraceBackend
from zeus_kfp.steps import spec_to_params
from zeus_kfp.steps.gpu_power import gpu_power
from zeus_kfp.store import open_store

TESTS = Path(__file__).resolve().parents[1]


def fake_gpu(tmp_path: Path, name: str, max_w: int) -> Path:
    """A directory whose pynvml.py makes `import pynvml` the fake with one GPU of `max_w` watts."""
    shim = tmp_path / f"nvml-{max_w}"
    shim.mkdir()
    (shim / "pynvml.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(TESTS)!r})\n"
        "from power_train.fake_pynvml import FakeDevice, make_module\n"
        f"sys.modules[__name__] = make_module([FakeDevice(name={name!r}, max_mw={max_w * 1000}, "
        f"limit_mw={max_w * 1000})])\n"
    )
    return shim


def test_the_compiled_parameter_reads_the_gpu_and_says_so(tmp_path):
    package = CompiledPackage.read(compile_pipeline(tmp_path / "p.yaml", attempts=1))
    param = package.parameters["max_power_w"]
    assert param["defaultValue"] == 0.0 and param["description"] == MAX_POWER_READ_HELP
    assert "read from the GPU at run time" in MAX_POWER_READ_HELP
    # the gate registers the job with the figure gpu-power read; the steps after it read the spec from the store
    gate = package.spec["root"]["dag"]["tasks"]["gate"]["inputs"]["parameters"]["max_power_w"]
    assert gate == {"taskOutputParameter": {"outputParameterKey": "Output", "producerTask": "gpu-power"}}
    (opened,) = [c for c in package.spec["components"].values() if "preprocess" in c.get("dag", {}).get("tasks", {})]
    assert "max_power_w" not in opened["dag"]["tasks"]["preprocess"]["inputs"]["parameters"]
    gpu = package.spec["deploymentSpec"]["executors"]["exec-gpu-power"]["container"]["resources"]["accelerator"]
    assert gpu["resourceType"] == "nvidia.com/gpu" and gpu["resourceCount"] == "1"
    assert package.kubernetes("gpu-power")["tolerations"] == package.kubernetes("attempt-1-train")["tolerations"]


@pytest.mark.parametrize("how", ["option", "spec file"])
def test_a_job_that_pins_it_keeps_its_figure_and_reads_nothing(tmp_path, how):
    spec = tmp_path / "job.yaml"
    body = "job_id: pinned\nbatch_sizes: [16, 32]\ndefault_batch_size: 32\ntarget_metric: 0.9\nmax_epochs: 3\n"
    spec.write_text(body + ("max_power_w: 450\n" if how == "spec file" else ""))
    out = tmp_path / "p.yaml"
    args = ["compile", "-o", str(out), "--command", "{python} t.py", "--spec", str(spec), "--attempts", "1"]
    result = CliRunner().invoke(app, args + (["--max-power-w", "450"] if how == "option" else []))
    assert result.exit_code == 0, result.output
    assert "time priced at max_power_w=450 W (pinned)" in result.output
    package = CompiledPackage.read(out)
    assert package.default("max_power_w") == 450.0 and not package.has_task("gpu-power")
    own = CliRunner().invoke(app, ["compile", "-o", str(out), "--command", "{python} t.py", "--spec", str(spec)])
    if how == "option":  # the file alone does not pin it: read at run time
        assert "read at run time by the gpu-power step" in own.output
        assert CompiledPackage.read(out).has_task("gpu-power")


def test_the_step_reads_pins_and_refuses():
    assert gpu_power(450.0).watts == 450.0 and "pinned" in gpu_power(450.0).source
    simulated = gpu_power(0.0, gpu="simulated")
    assert simulated.watts == 250.0 and "simulated" in simulated.source  # a CPU pod: the simulated V100, said so
    with pytest.raises(FieldError, match="max_power_w"):
        gpu_power(-1.0)


def _recurrence(pipeline, tmp_path: Path, job: str, rid: str, **overrides) -> None:
    trace = TraceBackend("cifar100", "v100")
    params = spec_to_params(trace.spec(job, max_attempts=1))
    params.pop("max_attempts")
    params.pop("max_power_w")  # the compiled default: 0, read it
    arguments = dict(params, store_uri=str(tmp_path / "store"), trial_backend=trace.name, preprocess_ref="")
    run_recurrence(
        pipeline,
        dict(arguments, recurrence_id=rid, **overrides),
        outputs_dir=tmp_path / "runs" / rid,
        log_path=tmp_path / "runs" / f"{rid}.log",
    )


@pytest.mark.slow
def test_a_run_prices_time_at_its_gpus_maximum_and_a_changed_gpu_is_refused(tmp_path, monkeypatch):
    path = compile_pipeline(tmp_path / "p.yaml", kfp_backend="2.15", attempts=1, gpus=1, store_retries=0)
    pipeline = components.load_component_from_file(str(path))
    monkeypatch.setenv("PYTHONPATH", str(fake_gpu(tmp_path, "NVIDIA H100 80GB HBM3", 700)))
    _recurrence(pipeline, tmp_path, "on-h100", "r1")
    store = open_store(str(tmp_path / "store"))
    spec = store.get_job("on-h100")
    assert spec.max_power_w == 700.0  # not the compiled 0, not 300, not the V100 trace's 250
    trial = store.trials("on-h100").iloc[0]
    assert trial["cost"] == pytest.approx(spec.cost_model.cost(trial["energy_j"], trial["time_s"]))
    assert "time is priced at 700 W, read from this pod's GPU" in (tmp_path / "runs" / "r1.log").read_text()

    _recurrence(pipeline, tmp_path, "pinned", "p1", max_power_w=450.0)  # a run that pins it reads nothing
    assert store.get_job("pinned").max_power_w == 450.0

    monkeypatch.setenv("PYTHONPATH", str(fake_gpu(tmp_path, "NVIDIA A100-SXM4-40GB", 400)))
    with pytest.raises(LocalRunError, match="max_power_w"):  # the job's costs were priced at 700 W
        _recurrence(pipeline, tmp_path, "on-h100", "r2")
    assert len(store.trials("on-h100")) == 1
