"""images/Dockerfile(.cuda) without a Docker engine: parse them, then build and install the package
from exactly the files they copy and import, from that installed copy, what the components call."""

from __future__ import annotations

import ast
import configparser
import importlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = {"cpu": ROOT / "images" / "Dockerfile", "cuda": ROOT / "images" / "Dockerfile.cuda"}
WORKDIR = "/opt/zeus-kfp"


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    logical, current = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1] if " " in ln else "") for ln in logical]


def args_of(path: Path) -> dict[str, str]:
    return dict(rest.split("=", 1) for instr, rest in instructions(path) if instr == "ARG" and "=" in rest)


def run_commands(path: Path) -> list[str]:
    build_args = args_of(path)
    commands = [rest for instr, rest in instructions(path) if instr == "RUN"]
    return [re.sub(r"\$\{(\w+)\}", lambda m: build_args.get(m.group(1), m.group(0)), c) for c in commands]


def env_of(path: Path) -> dict[str, str]:
    """The image's ENV settings (KEY=VALUE pairs, several per ENV line allowed)."""
    pairs = [word for instr, rest in instructions(path) if instr == "ENV" for word in rest.split()]
    return dict(pair.split("=", 1) for pair in pairs if "=" in pair)


def copies(path: Path) -> list[tuple[list[str], str]]:
    out = []
    for instr, rest in instructions(path):
        if instr == "COPY":
            *sources, dest = rest.split()
            out.append((sources, dest))
    return out


def setup_cfg() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return cfg


def pinned_torch() -> str:
    pins = dict(ln.split("==") for ln in (ROOT / "constraints.txt").read_text().splitlines() if "==" in ln)
    return pins["torch"].strip()


@pytest.mark.parametrize("flavour", ["cpu", "cuda"])
def test_dockerfile_installs_pinned_torch_then_the_package(flavour: str) -> None:
    path = DOCKERFILES[flavour]
    base = next(rest for instr, rest in instructions(path) if instr == "FROM")
    if flavour == "cpu":
        assert base == "python:3.11-slim"
    else:
        assert re.fullmatch(r"nvidia/cuda:[\d.]+-(cudnn-)?runtime-ubuntu[\d.]+", base), base
        assert any("python3.11 -m venv" in c for c in run_commands(path))
    runs = run_commands(path)
    torch_runs = [c for c in runs if re.search(r"\btorch==", c)]
    assert len(torch_runs) == 1
    assert f"torch=={pinned_torch()}" in torch_runs[0]  # the same pin as constraints.txt
    index = re.search(r"--index-url (\S+)", torch_runs[0]).group(1)
    assert re.fullmatch(r"https://download\.pytorch\.org/whl/(cpu|cu\d+)", index)
    assert (flavour == "cpu") == index.endswith("/cpu")
    # The package itself, regular install, under the constraints; after torch (so torch is not re-resolved).
    package_runs = [i for i, c in enumerate(runs) if re.search(r"pip install -c constraints\.txt \.(\s|$)", c)]
    assert len(package_runs) == 1 and package_runs[0] > runs.index(torch_runs[0])
    assert "-e " not in runs[package_runs[0]]


@pytest.mark.parametrize("flavour", ["cpu", "cuda"])
def test_dockerfile_copies_what_setup_cfg_packages_and_the_examples(flavour: str) -> None:
    copied = {
        Path(dest).name if dest not in ("./", ".") else src
        for srcs, dest in copies(DOCKERFILES[flavour])
        for src in srcs
    }
    cfg = setup_cfg()
    # The folders the package is built from: the src folder (package_dir's "= zeus") and the folders its
    # linked packages point to (zeus/zeus_kfp/components -> ../../components): a link copied without its
    # target is a dangling link in the image.
    source_root = cfg["options"]["package_dir"].replace("=", "").strip()
    library = ROOT / source_root / "zeus_kfp"
    linked = {Path(os.readlink(p)).name for p in library.iterdir() if p.is_symlink()}
    folders = {source_root, *linked}
    assert linked == {"components", "pipelines"}
    assert folders <= copied, f"setup.cfg's package folders {folders} not all copied: {copied}"
    long_description = cfg["metadata"]["long_description"].removeprefix("file:").strip()
    assert {"setup.cfg", "pyproject.toml", "constraints.txt", long_description, "examples"} <= copied
    assert any(dest == "./examples" for _, dest in copies(DOCKERFILES[flavour]))
    assert next(r for i, r in instructions(DOCKERFILES[flavour]) if i == "WORKDIR") == WORKDIR
    # The compiled pipeline runs the example from there (components/image.py says where).
    from zeus_kfp.components.image import IMAGE_EXAMPLES_DIR

    assert f"{WORKDIR}/examples" == IMAGE_EXAMPLES_DIR
    # ...and zeus_kfp.train.example finds the scripts there through the image's environment.
    assert env_of(DOCKERFILES[flavour])["ZEUS_KFP_EXAMPLES_DIR"] == IMAGE_EXAMPLES_DIR


@pytest.mark.parametrize("flavour", ["cpu", "cuda"])
def test_dockerfile_runs_as_a_non_root_user(flavour: str) -> None:
    users = [rest for instr, rest in instructions(DOCKERFILES[flavour]) if instr == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert any(f"--uid {users[-1]}" in c for c in run_commands(DOCKERFILES[flavour]))
    dockerignore = DOCKERFILES[flavour].with_name(DOCKERFILES[flavour].name + ".dockerignore")
    assert ".venv" not in dockerignore.read_text() and dockerignore.read_text().splitlines()[2] == "*"


def component_calls() -> dict[str, list[tuple[str, str]]]:
    """Per component, every zeus name its source imports or calls (`m.x` counts as zeus_kfp...m.x). Parsed
    from the function source KFP embeds in the component (inspect.getsource), which is what runs in the image."""
    from zeus_kfp.components.registry import DEFAULT_COMPONENTS, STEP_NAMES

    found: dict[str, list[tuple[str, str]]] = {}
    for step in STEP_NAMES:
        tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(DEFAULT_COMPONENTS, step).python_func)))
        modules, calls = {}, []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "zeus_kfp":
                calls += [(node.module, alias.name) for alias in node.names]
                modules |= {alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                calls.append((modules[node.value.id], node.attr))
        found[step] = calls
    return found


def component_imports() -> list[tuple[str, str]]:
    return sorted({call for calls in component_calls().values() for call in calls})


def test_each_component_calls_the_step_function_of_its_name_and_everything_it_calls_exists() -> None:
    for step, calls in component_calls().items():
        # `from zeus_kfp.steps.train import train as step`: the function, imported from its module
        from_steps = [(module, name) for module, name in calls if module.startswith("zeus_kfp.steps")]
        assert from_steps[-1] == (f"zeus_kfp.steps.{step}", step), calls
    for module, name in component_imports():
        found = hasattr(importlib.import_module(module), name) or importlib.util.find_spec(f"{module}.{name}")
        assert found, f"components import {module}.{name}, which is missing"


@pytest.mark.slow
def test_the_package_builds_and_installs_from_the_copied_files(tmp_path: Path) -> None:
    """What `pip install .` in the image does, from only the files the Dockerfile copies; then the
    components' imports, the package data and the examples link work from the installed copy."""
    ctx = tmp_path / "ctx"
    for sources, _dest in copies(DOCKERFILES["cpu"]):
        for src in sources:
            origin = ROOT / src
            if origin.is_dir():
                ignored = shutil.ignore_patterns("__pycache__", "*.pyc")  # links as links, as docker's COPY
                shutil.copytree(origin, ctx / src, symlinks=True, ignore=ignored)
            else:
                ctx.mkdir(exist_ok=True)
                shutil.copy2(origin, ctx / src)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels, ctx], check=True)
    wheel = next(wheels.glob("zeus_kfp-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", site, wheel], check=True)
    check = f"""
import importlib, importlib.util, json, pathlib
import zeus_kfp, zeus_kfp.components, zeus_kfp.pipelines
from zeus_kfp.train import example_command
mods = [zeus_kfp, zeus_kfp.components, zeus_kfp.pipelines]
calls = {json.dumps(component_imports())}
missing = [f"{{m}}.{{n}}" for m, n in calls
           if not (hasattr(importlib.import_module(m), n) or importlib.util.find_spec(f"{{m}}.{{n}}"))]
traces = sorted(p.name for p in (pathlib.Path(zeus_kfp.__file__).parent / "simulate" / "traces").glob("*.csv"))
print(json.dumps({{"files": [m.__file__ for m in mods], "missing": missing, "traces": traces,
                  "example": example_command("zeus")[1]}}))
"""
    # The image points zeus at its examples with ZEUS_KFP_EXAMPLES_DIR; here ctx/examples stands in for it.
    env = dict(os.environ, PYTHONPATH=str(site), ZEUS_KFP_EXAMPLES_DIR=str(ctx / "examples"))
    out = subprocess.run([sys.executable, "-c", check], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(f.startswith(str(site)) for f in result["files"]), result["files"]  # the installed copy, not the repo
    assert result["missing"] == []
    assert {"summary_train.csv", "summary_power_v100.csv"} <= set(result["traces"])
    assert Path(result["example"]).is_file() and result["example"].startswith(str(ctx / "examples"))


def pushed_tags(repo: str) -> dict[str, str]:
    """What `make push-image IMAGE_REPO=<repo>` pushes, {flavour: tag}, read from `make -n` (the commands it
    would run): the tags it builds from which Dockerfile, and that it pushes exactly those."""
    out = subprocess.run(
        ["make", "-n", "-s", "push-image", f"IMAGE_REPO={repo}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    built = dict(re.findall(r"docker build -f images/(Dockerfile(?:\.cuda)?) -t (\S+) \.", out))
    pushed = re.findall(r"docker push (\S+)", out)
    tags = {"cuda" if name.endswith(".cuda") else "cpu": tag for name, tag in built.items()}
    assert sorted(pushed) == sorted(tags.values()), out
    return tags


def test_compile_names_exactly_the_images_make_push_image_pushes(tmp_path: Path) -> None:
    """`make push-image IMAGE_REPO=R` and `zeus-kfp compile --image-repo R` agree: the CPU image for the store
    steps, the CUDA image for train and a cluster trial's pods (from images/Dockerfile and Dockerfile.cuda)."""
    from zeus_kfp.components.image import image_tags
    from zeus_kfp.pipelines.compile import compile_pipeline
    from zeus_kfp.pipelines.package import CompiledPackage

    repo = "registry.example.com/ml/zeus-kfp"
    tags = pushed_tags(repo)
    version = setup_cfg()["metadata"]["version"]
    assert (tags["cpu"], tags["cuda"]) == image_tags(repo) == (f"{repo}:{version}-cpu", f"{repo}:{version}-cuda")
    package = CompiledPackage.read(compile_pipeline(tmp_path / "p.yaml", attempts=2, gpus=1, image_repo=repo))
    images = package.images()
    on_gpus = {label for label in images if "-train" in label or label == "exec-gpu-power"}
    assert {images[label] for label in on_gpus} == {tags["cuda"]}
    assert {i for label, i in images.items() if label not in on_gpus} == {tags["cpu"]}
    assert package.env("attempt-1-train")["ZEUS_LAUNCH_IMAGE"] == tags["cuda"]


def test_make_push_image_refuses_a_repo_no_cluster_can_pull_from() -> None:
    proc = subprocess.run(["make", "-s", "push-image"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "set IMAGE_REPO" in proc.stderr


@pytest.mark.parametrize(
    ("given", "steps", "train"),
    [
        ({"image_repo": "r.io/z"}, "r.io/z:{v}-cpu", "r.io/z:{v}-cuda"),
        ({"train_image": "r.io/mine:1"}, "r.io/mine:1", "r.io/mine:1"),  # one image of your own: every step on it
        ({"image_repo": "r.io/z", "train_image": "r.io/mine:1"}, "r.io/z:{v}-cpu", "r.io/mine:1"),
        ({"image": "r.io/cpu:1", "train_image": "r.io/gpu:1"}, "r.io/cpu:1", "r.io/gpu:1"),
    ],
)
def test_the_images_a_compile_names_come_from_what_the_user_said(tmp_path, monkeypatch, given, steps, train) -> None:
    from zeus_kfp import __version__
    from zeus_kfp.pipelines.compile import compile_pipeline
    from zeus_kfp.pipelines.package import CompiledPackage

    monkeypatch.delenv("ZEUS_KFP_IMAGE_REPO", raising=False)
    package = CompiledPackage.read(compile_pipeline(tmp_path / "p.yaml", attempts=1, **given))
    assert package.image("preprocess") == steps.format(v=__version__)
    assert package.image("attempt-1-train") == train.format(v=__version__)


@pytest.mark.parametrize(("given", "field"), [({}, "image"), ({"image": "r.io/cpu:1"}, "train_image")])
def test_a_compile_without_images_it_can_name_is_refused(tmp_path, monkeypatch, given, field) -> None:
    """No default registry: the old default tags were pushed nowhere, so every pod hung in ImagePullBackOff."""
    from zeus_kfp.errors import FieldError
    from zeus_kfp.pipelines.compile import compile_pipeline

    for name in ("ZEUS_KFP_IMAGE_REPO", "ZEUS_KFP_IMAGE", "ZEUS_KFP_TRAIN_IMAGE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(FieldError) as err:
        compile_pipeline(tmp_path / "p.yaml", attempts=1, gpus=1, **given)
    assert err.value.field == field and "--image-repo" in str(err.value)
    assert not (tmp_path / "p.yaml").exists()


def _own_image_dockerfile() -> str:
    """docs/kubeflow.md's Dockerfile for installing zeus-kfp into your own PyTorch image (an indented list block)."""
    text = (ROOT / "docs" / "kubeflow.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- test: write Dockerfile.own -->\n\s*```dockerfile\n(.*?)\n\s*```", text, re.S)
    assert match, "docs/kubeflow.md: the own-image Dockerfile block"
    return textwrap.dedent(match.group(1))


@pytest.mark.slow
def test_zeus_kfp_installs_into_your_own_pytorch_image_keeping_its_torch(tmp_path: Path) -> None:
    """`make wheel` writes the wheel docs/kubeflow.md's own-image Dockerfile copies and installs; installing it where a
    torch is already present (this venv, torch 2.13.0: any image with torch >= 2.4) installs zeus-kfp alone."""
    dockerfile = tmp_path / "Dockerfile.own"
    dockerfile.write_text(_own_image_dockerfile())
    steps = instructions(dockerfile)
    assert steps[0][0] == "FROM" and steps[0][1].startswith("pytorch/pytorch:")
    version = setup_cfg()["metadata"]["version"]
    wheel_name = f"zeus_kfp-{version}-py3-none-any.whl"
    (sources, _dest), *_ = copies(dockerfile)
    assert sources == [f"dist/{wheel_name}"]
    assert any(f"pip install --no-cache-dir /tmp/{wheel_name}" in c for c in run_commands(dockerfile))
    made = subprocess.run(["make", "-n", "-s", "wheel"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "pip wheel --no-deps --no-build-isolation -w dist ." in made
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist", ROOT], check=True)
    wheel = tmp_path / "dist" / wheel_name
    assert wheel.is_file()
    report = tmp_path / "report.json"
    subprocess.run([*pip, "install", "--dry-run", "--no-index", "--report", report, wheel], check=True)
    installed = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    assert installed == ["zeus-kfp"]  # torch and every other dependency kept as the image has them
