"""docs/kubeflow.md's "From your laptop to a nightly run" runs as a bash script, per Kubeflow version, as written:
the README's own script from its compile line to a nightly run.

For each of Kubeflow 1.10, 1.11, 26.03 and standalone KFP 2.17, the page's two blocks run with
`bash -euo pipefail` in a directory holding the repository's Makefile, images/ and deploy/, the README's train.py
and job.yaml and the page's Dockerfile.train, the page's settings replaced by the test's own (its servers' ports, a
namespace of its own), and stand-ins for what they talk to (no cluster, no Docker engine here):

- `docker` and `kubectl` on the PATH: a recorder, and tests/ux/standin_kubectl.py answering from a
  description of that version's cluster (Services, tokens, Secrets; a port-forward to a Service that
  version does not have fails);
- the KFP API: ux/kfp_api_server.py, playing that version (healthz tag, multi-user, token, /pipeline
  behind the Istio gateway), reached by the real kfp.Client inside `zeus-kfp`;
- the Kubernetes API: tests/launch/kube_api_server.py with that version's training CRD (PyTorchJob on
  1.10, Trainer v2.1.0's TrainJob on 1.11 and 26.03, v2.3.0's on 2.17), which `kubectl apply --dry-run=server`
  and `zeus-kfp dry-run`'s Trainer detection reach through the kubeconfig;
- the object store: moto behind that version's stand-in (tests/s3_standins.py: MinIO 2019 on 1.10, a
  Kubeflow namespace key on 1.11 and 26.03, SeaweedFS on 2.17).

The README's own-script compile line is the Kubeflow 1.11 block's, and every block's is that line with its
version's backend and launcher: one sequence from the README to a nightly run.

Between the blocks, "the nightly run": the package the first block compiled runs one recurrence through
kfp.local with the parameters `zeus-kfp submit` sent (trace-backed trials, so it takes seconds), its steps
seeing the run's namespace and the Secret's keys; the second block then reads the results back from a
laptop, through the port-forward, with the namespace's key.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kfp import components
from s3_standins import KUBEFLOW_BUCKET, Upstream

from ux.cli_process import cli_env
from ux.kfp_api_server import API, KfpApiServer
from ux.test_readme import MARKED, commands, section
from zeus_kfp.pipelines.local import run_recurrence
from zeus_kfp.simulate.trace_trial import TraceBackend
from zeus_kfp.steps import spec_to_params
from zeus_kfp.store import open_store

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
KUBEFLOW = ROOT / "docs" / "kubeflow.md"  # the admin path, linked from the README
TESTS = ROOT / "tests"
BLOCK = re.compile(r"<!-- test: (?P<what>settings|cluster \S+|results \S+) -->\n```bash\n(?P<body>.*?)\n```", re.S)
SETTINGS = ("REGISTRY", "NAMESPACE", "KFP_PORT", "S3_PORT")
TOKEN = "tok-readme-cluster-3f9"
REGISTRY = "registry.example.com/ml/zeus-kfp"


@dataclass(frozen=True)
class Version:
    """What one Kubeflow version's cluster is, as the stand-ins play it."""

    name: str
    tag: str
    multi_user: bool
    kfp_service: str  # namespace/name of the Service in front of the KFP API
    kfp_prefix: str
    s3_service: str
    s3_flavour: str
    kinds: tuple[str, ...]
    trainer: str
    namespace: str | None  # None: a fresh profile namespace per test


VERSIONS = [
    Version("kubeflow-1.10", "2.5.0", True, "istio-system/istio-ingressgateway", "/pipeline", "kubeflow/minio-service",
            "ignored", ("PyTorchJob",), "v2.3.0", None),
    Version("kubeflow-1.11", "2.15.0", True, "istio-system/istio-ingressgateway", "/pipeline", "kubeflow/minio-service",
            "least-privilege", ("TrainJob", "PyTorchJob"), "v2.1.0", None),
    Version("kubeflow-26.03", "2.16.0", True, "istio-system/istio-ingressgateway", "/pipeline", "kubeflow/seaweedfs",
            "least-privilege", ("TrainJob", "PyTorchJob"), "v2.1.0", None),
    Version("kfp-2.17", "2.17.0", False, "kubeflow/ml-pipeline-ui", "", "kubeflow/seaweedfs", "racy",
            ("TrainJob",), "v2.3.0", "kubeflow"),
]  # fmt: skip


def blocks() -> dict[str, str]:
    return {m["what"]: m["body"] for m in BLOCK.finditer(KUBEFLOW.read_text(encoding="utf-8"))}


def own_files() -> dict[str, str]:
    """The files the blocks build and compile from: the README's train.py and job.yaml, the page's Dockerfile.train."""
    written = {m["file"]: m["body"] for m in MARKED.finditer(section("Use your own training script")) if m["file"]}
    page = {m["file"]: m["body"] for m in MARKED.finditer(KUBEFLOW.read_text(encoding="utf-8")) if m["file"]}
    return {name: written[name] for name in ("train.py", "job.yaml")} | {"Dockerfile.train": page["Dockerfile.train"]}


def compile_line(body: str) -> list[str]:
    """A block's `zeus-kfp compile` command (continuations joined, its comment dropped) as argv."""
    (line,) = [line for line in body.replace("\\\n", " ").splitlines() if line.startswith("zeus-kfp compile ")]
    (argv,) = commands(line)
    return argv


def test_the_readmes_compile_line_is_every_blocks_but_for_its_version():
    """The README's own-script line, with its registry as the page's $REGISTRY, is the Kubeflow 1.11 block's; the
    other blocks' differ from it only in their backend and launcher (and 1.10's pull Secret)."""
    readme = [arg.replace(REGISTRY, "$REGISTRY") for arg in compile_line(section("Use your own training script"))]
    found = blocks()
    assert compile_line(found["cluster kubeflow-1.11"]) == readme
    version_of = {"kubeflow-1.10": ("2.5", "pytorchjob"), "kubeflow-26.03": ("2.16", "trainjob"),
                  "kfp-2.17": ("2.17", "trainjob")}  # fmt: skip
    for name, (backend, launcher) in version_of.items():
        line = compile_line(found[f"cluster {name}"])
        if "--image-pull-secret" in line:
            del line[line.index("--image-pull-secret") : line.index("--image-pull-secret") + 2]
        expected = list(readme)
        expected[expected.index("--kfp-backend") + 1] = backend
        expected[expected.index("--launcher") + 1] = launcher
        assert line == expected, name


def test_the_readme_has_a_settings_block_and_both_blocks_for_every_version():
    found = blocks()
    assert set(found) == {"settings"} | {f"{kind} {v.name}" for v in VERSIONS for kind in ("cluster", "results")}
    (line,) = found["settings"].splitlines()
    assigned = [word.split("=", 1)[0] for word in shlex.split(line)[1:]]
    assert line.startswith("export ") and tuple(assigned) == SETTINGS  # the values the test gives its own
    assert BLOCK.search(README.read_text(encoding="utf-8")) is None  # one copy of each block: docs/kubeflow.md's
    assert "docs/kubeflow.md" in README.read_text(encoding="utf-8")  # which the README links


def _stand_in_bin(tmp: Path, log: Path) -> Path:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").write_text(f'#!/bin/sh\nexec {sys.executable} {TESTS / "ux" / "standin_kubectl.py"} "$@"\n')
    (bin_dir / "docker").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')  # no Docker engine: what would be built
    for tool in ("kubectl", "docker"):
        (bin_dir / tool).chmod(0o755)
    return bin_dir


def _run(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def _nightly_run(package: Path, submitted: dict, namespace: str, s3_env: dict, tmp: Path, monkeypatch) -> None:
    """What the cluster runs each night, stood in by kfp.local: the compiled package with the submitted
    parameters, trials replayed from the NSDI'23 trace (the job's settings the trace's), in the run's namespace."""
    trace = TraceBackend("cifar100", "v100")
    job_id = (
        submitted.get("job_id")
        or components.load_component_from_file(str(package)).component_spec.inputs["job_id"].default
    )  # the package's: the README's job.yaml
    settings = spec_to_params(trace.spec(job_id))
    for fixed in ("max_attempts", "max_power_w"):  # compiled in / read at run time by gpu-power
        settings.pop(fixed)
    arguments = submitted | settings | {"trial_backend": trace.name, "preprocess_ref": "", "recurrence_id": "night-1"}
    for key in [k for k in os.environ if k.startswith("ZEUS_S3_")]:
        monkeypatch.delenv(key)
    for key, value in (s3_env | {"ZEUS_NAMESPACE": namespace}).items():
        monkeypatch.setenv(key, value)  # what the steps' pods get: the Secret's keys, metadata.namespace
    # kfp.local gives the steps the compiled environment, whose store endpoint is the in-cluster Service
    # (minio-service.kubeflow, seaweedfs.kubeflow): here that name resolves to the stand-in, as the cluster's DNS would.
    text = package.read_text()
    for endpoint in set(re.findall(r"value: (http://[a-z-]+\.kubeflow:9000)", text)):
        text = text.replace(endpoint, "http://" + s3_env["ZEUS_S3_ENDPOINT"].split("://")[-1])
    (tmp / "as-resolved.yaml").write_text(text)
    pipeline = components.load_component_from_file(str(tmp / "as-resolved.yaml"))
    run_recurrence(pipeline, arguments, outputs_dir=tmp / "night", log_path=tmp / "night.log")


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: v.name)
def test_the_readme_cluster_section_runs_as_a_script(version, s3_server, s3_standin, tmp_path, monkeypatch):
    from launch.kube_api_server import StandInServer

    namespace = version.namespace or f"team-{uuid.uuid4().hex[:6]}"
    key = {"accesskey": f"{namespace}-access", "secretkey": f"{namespace}-secret-value"}
    options = {"namespace": namespace} if version.s3_flavour == "least-privilege" else {}
    store = s3_standin(version.s3_flavour, **options)
    e = s3_server.env
    upstream = Upstream(
        s3_server.endpoint, e["ZEUS_S3_ACCESS_KEY"], e["ZEUS_S3_SECRET_KEY"], region=e["ZEUS_S3_REGION"]
    )
    upstream.ensure_bucket(KUBEFLOW_BUCKET)
    client = upstream.client()
    for obj in client.list_objects(KUBEFLOW_BUCKET, prefix=f"private/{namespace}/", recursive=True):
        client.remove_object(KUBEFLOW_BUCKET, obj.object_name)  # this namespace's store starts empty
    work = tmp_path / "repo"
    work.mkdir()
    for name in ("Makefile", "setup.cfg", "images", "deploy"):
        (work / name).symlink_to(ROOT / name)
    for name, body in own_files().items():  # the README's script and job, the page's Dockerfile.train
        (work / name).write_text(body + "\n")
    docker_log, kubectl_log = tmp_path / "docker.log", tmp_path / "kubectl.log"

    with KfpApiServer() as kfp_api, StandInServer() as kube:
        kfp_api.state.tag_name, kfp_api.state.multi_user = version.tag, version.multi_user
        kfp_api.state.prefix = version.kfp_prefix
        if version.multi_user:
            kfp_api.state.token, kfp_api.state.namespaces = TOKEN, {namespace}
        kube.installed, kube.trainer = version.kinds, version.trainer
        kfp_port = int(kfp_api.url.rsplit(":", 1)[1])
        s3_port = int(store.endpoint.rsplit(":", 1)[1])
        services = {
            version.kfp_service: {"port": 80, "serves": "kfp"},
            version.s3_service: {"port": 9000, "serves": "s3"},
        }
        cluster = {
            "services": services,
            "local": {"kfp": kfp_port, "s3": s3_port},
            "tokens": {f"{namespace}/default-editor": TOKEN} if version.multi_user else {},
            "secrets": {f"{version.namespace or namespace}/mlpipeline-minio-artifact": key},
            "api": kube.url,
            "log": str(kubectl_log),
        }  # fmt: skip
        (tmp_path / "cluster.json").write_text(json.dumps(cluster))
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": kube.url}}], "users": [{"name": "u", "user": {}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        }))  # fmt: skip
        path = f"{_stand_in_bin(tmp_path, docker_log)}:{Path(sys.executable).parent}:{os.environ['PATH']}"
        env = cli_env(
            PATH=path, HOME=str(tmp_path), KUBECONFIG=str(kubeconfig), ZEUS_TEST_CLUSTER=str(tmp_path / "cluster.json")
        )
        settings = f"export REGISTRY={REGISTRY} NAMESPACE={namespace} KFP_PORT={kfp_port} S3_PORT={s3_port}\n"
        found = blocks()

        setup = _run(settings + found[f"cluster {version.name}"], work, env)
        assert setup.returncode == 0, setup.stdout + setup.stderr
        (run,) = kfp_api.state.posts("/runs")
        _nightly_run(work / "zeus_pipeline.yaml", run.body["runtime_config"]["parameters"], namespace,
                     store.env | {"ZEUS_S3_ACCESS_KEY": key["accesskey"], "ZEUS_S3_SECRET_KEY": key["secretkey"]},
                     tmp_path, monkeypatch)  # fmt: skip
        results = _run(settings + found[f"results {version.name}"], work, env)
        assert results.returncode == 0, results.stdout + results.stderr

    # The stand-ins saw what a cluster of this version would have: nothing refused, every call answered.
    kubectl_calls = [json.loads(line) for line in kubectl_log.read_text().splitlines()]
    assert [c for c in kubectl_calls if "error" in c] == []
    forwarded = {c["argv"][c["argv"].index("port-forward") + 3] for c in kubectl_calls if "port-forward" in c["argv"]}
    assert forwarded == {f"svc/{version.kfp_service.split('/')[1]}", f"svc/{version.s3_service.split('/')[1]}"}
    # The images: built and pushed under the registry the package names; the train image is the README's script on
    # the CUDA image, whose tag make pushed.
    docker = docker_log.read_text()
    pushed = re.findall(r"^push (\S+)$", docker, re.M)
    assert sorted(pushed) == [f"{REGISTRY}/my-model:1", f"{REGISTRY}:0.1.0-cpu", f"{REGISTRY}:0.1.0-cuda"]
    assert f"build -f Dockerfile.train --build-arg BASE={REGISTRY}:0.1.0-cuda -t {REGISTRY}/my-model:1 ." in docker
    package = yaml.safe_load_all((work / "zeus_pipeline.yaml").read_text()).__next__()
    containers = [e["container"] for e in package["deploymentSpec"]["executors"].values()]
    images = {c["image"] for c in containers} | {e["value"] for c in containers for e in c.get("env", [])
                                                  if e["name"] == "ZEUS_LAUNCH_IMAGE"}  # fmt: skip
    assert images == {f"{REGISTRY}:0.1.0-cpu", f"{REGISTRY}/my-model:1"}  # the steps', train's and the trial pods'
    defaults = {k: v.get("defaultValue") for k, v in package["root"]["inputDefinitions"]["parameters"].items()}
    assert defaults["train_command"] == ["{python}", "/opt/app/train.py", "--batch-size", "{batch_size}"]
    assert defaults["job_id"] == "my-model" and defaults["launcher"] in ("trainjob", "pytorchjob")  # the README's
    # The KFP API: the package compiled for this backend went up, one run, one nightly recurring run.
    requests = kfp_api.state.requests
    assert [r.path for r in requests if r.path.startswith(API) is False] == []
    assert run.body["pipeline_spec"]["pipeline_spec"]["pipelineInfo"]["description"].endswith(
        f"Compiled for KFP backend {version.tag.rsplit('.', 1)[0]}."
    )
    (recurring,) = kfp_api.state.posts("/recurringruns")
    assert recurring.body["trigger"] == {"cron_schedule": {"cron": "0 0 2 * * *"}} and recurring.body["no_catchup"]
    assert len(kfp_api.state.posts("/pipelines/upload")) == 1
    if version.multi_user:
        auth = [{k.lower(): v for k, v in r.headers.items()}.get("authorization") for r in requests]
        assert set(auth) == {f"Bearer {TOKEN}"}  # the token kubectl created, on every request
    # The trial job a distributed run would create: accepted by this version's CRD, strictly.
    (dry,) = [c for c in kube.calls if c[0] == "dry-run-create"]
    assert dry[1] == ("PyTorchJob" if version.name == "kubeflow-1.10" else "TrainJob")
    # The results, read back from the laptop: the nightly recurrence under the run's own namespace.
    assert "my-model" in results.stdout and "trials" in results.stdout
    assert sorted(p.name for p in (work / "my-model-plots").glob("*.png"))
    trials = open_store(f"s3://{KUBEFLOW_BUCKET}/private/{namespace}/zeus-kfp").trials("my-model")
    assert list(trials["recurrence_id"].unique()) == ["night-1"] and trials["finished"].all()
