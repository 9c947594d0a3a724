"""A user's run with nothing but a Kubeflow 1.11 namespace key: `zeus-kfp run`, then `zeus-kfp show`.

The store sits behind the least-privilege stand-in (tests/s3_standins.py): object-level Put/Get/List
under mlpipeline/{artifacts, private-artifacts/ns1, private/ns1, shared}/ and 403 AccessDenied for
everything else, as the key Kubeflow 1.11 puts in each profile namespace. The console script runs as
a real process and kfp.local runs every pipeline step as a subprocess of it, so every step reaches
the store with the same ZEUS_S3_* variables a pod gets from the namespace's Secret.
"""

from __future__ import annotations

import itertools
import json

import pytest
from minio import Minio
from s3_standins import KUBEFLOW_BUCKET

from ux.cli_process import run_cli

PREFIX = "private/ns1/zk"
STORE = f"s3://{KUBEFLOW_BUCKET}/{PREFIX}"
RECURRENCES = 2


def upstream_client(server) -> Minio:
    """The S3 server behind the stand-in, with its own key (to look at what the run left, not via the proxy)."""
    env = server.env
    return Minio(
        server.endpoint,
        env["ZEUS_S3_ACCESS_KEY"],
        env["ZEUS_S3_SECRET_KEY"],
        secure=env["ZEUS_S3_SECURE"] == "true",
        region=env["ZEUS_S3_REGION"],
    )


def stored_objects(client: Minio) -> set[str]:
    """Every bucket on the server and every key in KFP's bucket, as `bucket/` and `mlpipeline/key`."""
    buckets = {f"{bucket.name}/" for bucket in client.list_buckets()}
    keys = {f"{KUBEFLOW_BUCKET}/{obj.object_name}" for obj in client.list_objects(KUBEFLOW_BUCKET, recursive=True)}
    return buckets | keys


def recurrence_rows(shown: str) -> list[str]:
    """The first cell of each row of the `recurrences` table `show` prints."""
    lines = shown.splitlines()
    body = lines[lines.index("recurrences") + 3 :]  # title, header, rule
    return list(itertools.takewhile(str.isdigit, (line.split()[0] if line.strip() else "" for line in body)))


@pytest.mark.slow
def test_run_and_show_need_only_what_a_namespace_key_may_do(tmp_path, s3_server, s3_standin) -> None:
    standin = s3_standin("least-privilege")  # creates mlpipeline on the server behind it
    client = upstream_client(s3_server)
    for obj in client.list_objects(KUBEFLOW_BUCKET, prefix=f"{PREFIX}/", recursive=True):  # a rerun's leftovers
        client.remove_object(KUBEFLOW_BUCKET, obj.object_name)
    before = stored_objects(client)
    standin.refused.clear()

    args = ["--store", STORE]
    run = run_cli("run", "--recurrences", str(RECURRENCES), *args, cwd=tmp_path, timeout=600, **standin.env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    show = run_cli("show", "example", *args, "--json", cwd=tmp_path, **standin.env)
    assert show.returncode == 0, show.stderr
    assert [r["recurrence"] for r in json.loads(show.stdout)["recurrences"]] == list(range(1, RECURRENCES + 1))
    text = run_cli("show", "example", *args, cwd=tmp_path, COLUMNS="100", **standin.env)
    assert text.returncode == 0, text.stderr
    assert recurrence_rows(text.stdout) == [str(n) for n in range(1, RECURRENCES + 1)], text.stdout

    # Nothing refused but deletes of superseded snapshots, each said at most once in what the run printed
    # and logged (the steps' logs are in the default --runs-dir, one file per recurrence).
    refused = list(standin.refused)
    assert [r for r in refused if (r.method, r.reason) != ("DELETE", "DeleteObject")] == [], refused
    logs = sorted((tmp_path / ".zeus-kfp" / "runs").rglob("*.log"))
    assert len(logs) == RECURRENCES, logs
    output = run.stdout + run.stderr + "".join(log.read_text() for log in logs)
    for refusal in refused:
        key = refusal.path.removeprefix(f"/{KUBEFLOW_BUCKET}/{PREFIX}/")
        assert key.startswith("jobs/example/snapshots/"), refusal
        assert output.count(key) <= 1, key
    assert not refused or "DeleteObject" in output  # a refused delete is said, not swallowed

    # Nothing written outside the store's prefix (no bucket made, no key elsewhere in mlpipeline). Exact on
    # this worker's own moto; a shared ZEUS_TEST_S3_ENDPOINT may see other workers' stores appear too.
    written = stored_objects(client) - before
    assert written and all(name.startswith(f"{KUBEFLOW_BUCKET}/{PREFIX}/") for name in written), sorted(written)
