"""The S3 stand-ins (tests/s3_standins.py) behave like the servers they stand for, so that a store test
passing on one means what it says: racy creates both succeed on `racy` yet a sequential probe is refused,
`ignored` overwrites, `atomic` lets exactly one of two racers win, and the least-privilege key is
refused exactly what Kubeflow 1.11's key is refused. Races are made certain with barriers, not sleeps."""

from __future__ import annotations

import http.client
import io
import os
import threading
import uuid

import pytest
from minio import Minio
from minio.commonconfig import CopySource
from minio.deleteobjects import DeleteObject
from minio.error import S3Error
from s3_standins import KUBEFLOW_BUCKET, Refusal, StandIn, StartStandIn

CREATE = {"If-None-Match": "*"}


def client_for(standin: StandIn, region: str | None = "us-east-1") -> Minio:
    """A minio client pointed at the stand-in with its ZEUS_S3_* key, as the store would make it."""
    env = standin.env
    endpoint, access, secret = env["ZEUS_S3_ENDPOINT"], env["ZEUS_S3_ACCESS_KEY"], env["ZEUS_S3_SECRET_KEY"]
    return Minio(endpoint, access, secret, secure=False, region=region)


@pytest.fixture
def bucket(s3_standin: StartStandIn) -> str:
    """A fresh bucket, made on the server itself (the `atomic` stand-in), never through a proxy."""
    name = f"zeus-test-{uuid.uuid4().hex[:16]}"
    client_for(s3_standin("atomic")).make_bucket(name)
    return name


def create(client: Minio, bucket: str, key: str, data: bytes) -> int:
    """A conditional create (`If-None-Match: *`, which minio's put_object cannot send): 200 or 412."""
    try:
        client._put_object(bucket, key, data, headers=dict(CREATE))
    except S3Error as error:
        if error.code == "PreconditionFailed":
            return 412
        raise
    return 200


def read(client: Minio, bucket: str, key: str) -> bytes:
    response = client.get_object(bucket, key)
    try:
        return response.read()
    finally:
        response.close()
        response.release_conn()


def race(standin: StandIn, bucket: str, key: str, payloads: list[bytes]) -> list[int]:
    """Send one conditional create per payload from its own thread, all released at once."""
    start = threading.Barrier(len(payloads), timeout=30)
    results: list[int | BaseException] = [RuntimeError("did not finish")] * len(payloads)

    def run(index: int) -> None:
        client = client_for(standin)
        try:
            start.wait()
            results[index] = create(client, bucket, key, payloads[index])
        except BaseException as error:  # reported below, in the test's thread
            results[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(payloads))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return [result for result in results if isinstance(result, int)]


@pytest.mark.parametrize("flavour", ["atomic", "racy", "ignored"])
def test_reads_writes_listings_and_ranges_pass_through(s3_standin: StartStandIn, bucket: str, flavour: str):
    client = client_for(s3_standin(flavour))
    for index in range(3):
        client.put_object(bucket, f"p/k{index}", io.BytesIO(b"v%d" % index), 2)
    assert read(client, bucket, "p/k1") == b"v1"
    assert client.stat_object(bucket, "p/k2").size == 2
    assert [item.object_name for item in client.list_objects(bucket, prefix="p/")] == ["p/k0", "p/k1", "p/k2"]
    response = client.get_object(bucket, "p/k0", offset=1, length=1)
    assert response.read() == b"0"
    response.close()
    with pytest.raises(S3Error) as info:
        client.stat_object(bucket, "p/missing")
    assert info.value.code == "NoSuchKey"


def test_racy_refuses_a_sequential_second_create(s3_standin: StartStandIn, bucket: str):
    client = client_for(s3_standin("racy"))
    assert create(client, bucket, "k", b"first") == 200
    with pytest.raises(S3Error) as info:
        client._put_object(bucket, "k", b"second", headers=dict(CREATE))
    assert (info.value.code, info.value.response.status) == ("PreconditionFailed", 412)
    assert read(client, bucket, "k") == b"first"


def test_racy_lets_two_racing_creates_of_one_key_both_succeed(s3_standin: StartStandIn, bucket: str):
    # Both proxy threads must pass the existence check before either may write: certain, not timed.
    standin = s3_standin("racy", barrier=threading.Barrier(2, timeout=30))
    payloads = [b"racer-a", b"racer-b"]
    assert race(standin, bucket, "trial/1", payloads) == [200, 200]
    client = client_for(standin)
    assert read(client, bucket, "trial/1") in payloads  # one racer was told "created" and lost its write
    assert create(client, bucket, "trial/1", b"late") == 412  # the key exists now: the barrier is not reached


def test_ignored_overwrites_on_a_second_create_and_ignores_if_match(s3_standin: StartStandIn, bucket: str):
    client = client_for(s3_standin("ignored"))
    assert create(client, bucket, "k", b"first") == 200
    assert create(client, bucket, "k", b"second") == 200
    assert read(client, bucket, "k") == b"second"
    client._put_object(bucket, "k", b"third", headers={"If-Match": '"not-the-etag"'})
    assert read(client, bucket, "k") == b"third"
    # The control: the server itself refuses that If-Match.
    with pytest.raises(S3Error) as info:
        client_for(s3_standin("atomic"))._put_object(bucket, "k", b"x", headers={"If-Match": '"not-the-etag"'})
    assert info.value.response.status == 412


def test_atomic_lets_exactly_one_of_two_racing_creates_win(s3_standin: StartStandIn, bucket: str):
    standin = s3_standin("atomic")
    for round_ in range(8):
        key = f"trial/{round_}"
        payloads = [b"a%d" % round_, b"b%d" % round_]
        results = race(standin, bucket, key, payloads)
        assert sorted(results) == [200, 412]
        assert read(client_for(standin), bucket, key) == payloads[results.index(200)]


# --- least-privilege -----------------------------------------------------------------------------


@pytest.fixture
def key_prefix() -> str:
    return f"private/ns1/{uuid.uuid4().hex[:12]}/"


def refused_since(standin: StandIn, before: int) -> list[Refusal]:
    return standin.refused[before:]


def test_least_privilege_reads_writes_and_lists_under_its_prefixes(s3_standin: StartStandIn, key_prefix: str):
    standin = s3_standin("least-privilege")
    before = len(standin.refused)
    client = client_for(standin)
    client.put_object(KUBEFLOW_BUCKET, key_prefix + "a", io.BytesIO(b"alpha"), 5)
    assert create(client, KUBEFLOW_BUCKET, key_prefix + "b", b"beta") == 200
    assert create(client, KUBEFLOW_BUCKET, key_prefix + "b", b"again") == 412  # moto behind it decides
    assert read(client, KUBEFLOW_BUCKET, key_prefix + "a") == b"alpha"
    assert client.stat_object(KUBEFLOW_BUCKET, key_prefix + "b").size == 4
    names = [item.object_name for item in client.list_objects(KUBEFLOW_BUCKET, prefix=key_prefix)]
    assert names == [key_prefix + "a", key_prefix + "b"]
    client.copy_object(KUBEFLOW_BUCKET, key_prefix + "c", CopySource(KUBEFLOW_BUCKET, key_prefix + "a"))
    assert read(client, KUBEFLOW_BUCKET, key_prefix + "c") == b"alpha"
    for shared in ("artifacts/", "shared/", "private-artifacts/ns1/"):
        client.put_object(KUBEFLOW_BUCKET, shared + key_prefix, io.BytesIO(b"s"), 1)
        assert [item.object_name for item in client.list_objects(KUBEFLOW_BUCKET, prefix=shared)] != []
    assert refused_since(standin, before) == []


def test_least_privilege_allows_multipart_uploads(s3_standin: StartStandIn, key_prefix: str):
    standin = s3_standin("least-privilege")
    client = client_for(standin)
    data = bytes(range(256)) * (6 * 1024 * 4)  # 6 MiB: two parts of minio's minimum 5 MiB part size
    client.put_object(KUBEFLOW_BUCKET, key_prefix + "big", io.BytesIO(data), len(data), part_size=5 * 1024 * 1024)
    assert read(client, KUBEFLOW_BUCKET, key_prefix + "big") == data


def denied(call, standin: StandIn) -> Refusal:
    """Run `call`, assert it raised S3Error AccessDenied, and return the one refusal it caused."""
    before = len(standin.refused)
    with pytest.raises(S3Error) as info:
        call()
    assert info.value.code == "AccessDenied"
    refusals = refused_since(standin, before)
    assert len(refusals) == 1, refusals
    return refusals[0]


def test_least_privilege_refuses_bucket_level_and_delete_calls(s3_standin: StartStandIn, key_prefix: str):
    standin = s3_standin("least-privilege")
    client = client_for(standin)
    client.put_object(KUBEFLOW_BUCKET, key_prefix + "a", io.BytesIO(b"alpha"), 5)
    b = KUBEFLOW_BUCKET
    assert denied(lambda: client.bucket_exists(b), standin) == ("HEAD", "/mlpipeline", "HeadBucket")
    assert denied(client.list_buckets, standin) == ("GET", "/", "ListBuckets")
    assert denied(lambda: client.make_bucket(b), standin) == ("PUT", "/mlpipeline", "CreateBucket")
    multi = [DeleteObject(key_prefix + "a")]
    assert denied(lambda: list(client.remove_objects(b, multi)), standin) == (
        "POST",
        "/mlpipeline",
        "multi-object delete",
    )
    assert denied(lambda: client.remove_object(b, key_prefix + "a"), standin)[::2] == ("DELETE", "DeleteObject")
    assert read(client, b, key_prefix + "a") == b"alpha"  # nothing was deleted
    # Without a region the client asks GetBucketLocation first, and that is refused too.
    location = denied(lambda: client_for(standin, region=None).stat_object(b, key_prefix + "a"), standin)
    assert location.reason == "GetBucketLocation"


def test_least_privilege_refuses_other_prefixes_and_buckets(s3_standin: StartStandIn, bucket: str):
    standin = s3_standin("least-privilege")
    client = client_for(standin)
    b = KUBEFLOW_BUCKET
    assert denied(lambda: list(client.list_objects(b, prefix="private/ns2/")), standin).reason.startswith("list prefix")
    assert denied(lambda: list(client.list_objects(b)), standin).reason == "list without a prefix"
    assert denied(lambda: list(client.list_objects(b, prefix="private/")), standin).reason.startswith("list prefix")
    put_ns2 = denied(lambda: client.put_object(b, "private/ns2/x", io.BytesIO(b"x"), 1), standin)
    assert put_ns2[:2] == ("PUT", "/mlpipeline/private/ns2/x")
    assert denied(lambda: client.stat_object(b, "private/ns2/x"), standin).method == "HEAD"
    assert denied(lambda: client.stat_object(bucket, "k"), standin).reason == f"bucket {bucket} is not mlpipeline"


def test_least_privilege_refusal_is_s3s_xml_error(s3_standin: StartStandIn):
    endpoint = s3_standin("least-privilege").env["ZEUS_S3_ENDPOINT"]
    host, _, port = endpoint.rpartition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", "/")
        response = connection.getresponse()
        body = response.read().decode()
    finally:
        connection.close()
    assert response.status == 403
    assert response.getheader("Content-Type") == "application/xml"
    assert body.startswith('<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>')
    assert "<Message>Access Denied</Message><Resource>/</Resource><RequestId>" in body


def test_least_privilege_with_kfp_2_17_key_may_delete_and_head_the_bucket(s3_standin: StartStandIn, key_prefix: str):
    standin = s3_standin("least-privilege", allow_delete=True)
    client = client_for(standin)
    client.put_object(KUBEFLOW_BUCKET, key_prefix + "a", io.BytesIO(b"alpha"), 5)
    assert client.bucket_exists(KUBEFLOW_BUCKET) is True
    client.remove_object(KUBEFLOW_BUCKET, key_prefix + "a")
    with pytest.raises(S3Error) as info:
        client.stat_object(KUBEFLOW_BUCKET, key_prefix + "a")
    assert info.value.code == "NoSuchKey"
    assert denied(lambda: client.remove_object(KUBEFLOW_BUCKET, "private/ns2/a"), standin).method == "DELETE"
    multi = [DeleteObject(key_prefix + "b")]
    assert denied(lambda: list(client.remove_objects(KUBEFLOW_BUCKET, multi)), standin).reason == "multi-object delete"


def test_least_privilege_namespace_is_configurable(s3_standin: StartStandIn):
    standin = s3_standin("least-privilege", namespace="team-b")
    client = client_for(standin)
    client.put_object(KUBEFLOW_BUCKET, "private/team-b/x", io.BytesIO(b"x"), 1)
    assert denied(lambda: client.put_object(KUBEFLOW_BUCKET, "private/ns1/x", io.BytesIO(b"x"), 1), standin)


# --- the fixtures -------------------------------------------------------------------------------


def test_s3_flavour_uri_points_the_env_at_its_standin(s3_flavour_uri: str, s3_flavour_standin: StandIn):
    assert {key: os.environ[key] for key in s3_flavour_standin.env} == s3_flavour_standin.env
    assert "ZEUS_S3_CREATE_BUCKET" not in os.environ
    bucket, _, prefix = s3_flavour_uri.removeprefix("s3://").partition("/")
    client = client_for(s3_flavour_standin)
    client.put_object(bucket, prefix + "/probe", io.BytesIO(b"p"), 1)  # the bucket is there already
    assert read(client, bucket, prefix + "/probe") == b"p"
    if s3_flavour_standin.flavour == "least-privilege":
        assert s3_flavour_uri.startswith("s3://mlpipeline/private/ns1/")
        assert s3_flavour_standin.refused == []
    else:
        assert bucket.startswith("zeus-test-") and prefix == "store"


def test_standins_are_cached_per_flavour_and_options(s3_standin: StartStandIn):
    assert s3_standin("racy") is s3_standin("racy")
    assert s3_standin("racy") is not s3_standin("racy", delay_s=0.0)
    assert s3_standin("atomic").endpoint != s3_standin("ignored").endpoint
    with pytest.raises(TypeError):
        s3_standin("ignored", delay_s=1.0)
    with pytest.raises(ValueError):
        s3_standin("seaweed")
