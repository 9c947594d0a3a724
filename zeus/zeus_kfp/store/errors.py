"""What can go wrong in the store, as types callers can catch and people can act on.

Every message names the thing to check (a key, an endpoint and bucket, a field and its
allowed values) and never a credential: these messages end up in KFP logs and CLI output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zeus_kfp.job import JobSpecError

# The prefixes of KFP's bucket (mlpipeline) a profile's key may use in multi-user mode (KFP 2.15+
# manifests); {ns} is the namespace.
MULTI_USER_KEY_PREFIXES = ("artifacts/", "private-artifacts/{ns}/", "private/{ns}/", "shared/")
MULTI_USER_PREFIXES = "mlpipeline/{artifacts, private-artifacts/<namespace>, private/<namespace>, shared}/*"


class StoreError(Exception):
    """Base class of every store failure."""


class StoreInputError(JobSpecError):
    """An identifier or argument the store was given is not allowed (a job id that would leave
    its prefix, an unknown phase, a bad URI). A JobSpecError so CLI and steps report it alike."""


class StoreUnavailableError(StoreError):
    """The object store did not answer after bounded retries. Says where, never with what keys."""

    def __init__(self, endpoint: str, bucket: str, attempts: int, cause: str) -> None:
        self.endpoint = endpoint
        self.bucket = bucket
        self.attempts = attempts
        super().__init__(
            f"store unreachable: endpoint {endpoint!r}, bucket {bucket!r}, {attempts} attempts ({cause}). "
            "Check ZEUS_S3_ENDPOINT, ZEUS_S3_SECURE, that the server is up and reachable from this pod, "
            "and that the access key may use the bucket."
        )


class StoreAnswerError(StoreError):
    """The server answered a request with a 4xx the store does not expect (often no S3 error body at
    all: a proxy or a web UI): not retried, and not "unreachable", because it is reachable. Names
    where and what came back, never the keys."""

    def __init__(self, endpoint: str, bucket: str, status: int, detail: str) -> None:
        self.endpoint = endpoint
        self.bucket = bucket
        self.status = status
        super().__init__(
            f"store answered HTTP {status}: endpoint {endpoint!r}, bucket {bucket!r} "
            f"({detail[:160]}). Check that ZEUS_S3_ENDPOINT points at the S3/MinIO server itself, not a proxy or UI."
        )


class StoreAccessError(StoreError):
    """The server answered but refused this request. Names where, the request and the permission it
    needed, never the keys.

    On Kubeflow in multi-user mode (KFP 2.15+) a profile's key may use only some prefixes of the
    `mlpipeline` bucket, so a refusal there is most often the prefix, not the key: the message
    says which prefixes are allowed (MULTI_USER_PREFIXES) and which one the store asked for.
    """

    def __init__(self, endpoint: str, bucket: str, code: str, prefix: str = "", request: str = "") -> None:
        self.endpoint = endpoint
        self.bucket = bucket
        self.code = code
        self.prefix = prefix
        self.request = request
        where = f"s3://{bucket}/{prefix}".rstrip("/")
        asked = f"{request} under {where}" if request else where
        super().__init__(
            f"store refused {asked}: endpoint {endpoint!r} ({code}). The store needs s3:GetObject, "
            "s3:PutObject and s3:ListBucket (with this prefix) there. Check the access key and secret "
            "(ZEUS_S3_ACCESS_KEY / ZEUS_S3_SECRET_KEY, usually from a Kubernetes Secret) and the bucket "
            f"policy. On Kubeflow in multi-user mode a namespace's key may only use {MULTI_USER_PREFIXES}: "
            "use a store under s3://mlpipeline/private/<namespace>/ (the default of "
            "`zeus-kfp compile --namespace <namespace>`)."
        )


class DeleteRefusedError(StoreError):
    """The server refused a DELETE (a Kubeflow 1.11 namespace key may not delete). The store never needs
    one to stay correct: compaction then keeps what it would have reclaimed, and says so once."""

    def __init__(self, key: str, location: str, code: str = "AccessDenied") -> None:
        self.key = key
        super().__init__(
            f"store refused DeleteObject of {key} in {location} ({code}): s3:DeleteObject is not granted; "
            "nothing is lost, superseded snapshots are kept"
        )


def changes_text(changes: dict[str, tuple[Any, Any]]) -> str:
    """Changed fields as people read them: "metric_name: 'acuracy' -> 'accuracy'; max_epochs: 5 -> 8"."""
    return "; ".join(f"{name}: {old!r} -> {new!r}" for name, (old, new) in sorted(changes.items()))


class JobSpecMismatchError(ValueError):
    """A run presented a spec that differs from the job's spec in force, and it cannot take its place.

    The bandit's history is only comparable under one spec: a run's gate replaces the spec while none of the job's
    trials under it has reached the target and no recurrence runs (zeus_kfp.store.gating), and refuses it after. The
    message, one line, lists every changed field as stored -> given and says what helps: `settled_by` the trial
    that reached (then `zeus-kfp delete` or a new job id), `running` the recurrence in flight (then wait).
    """

    def __init__(
        self,
        job_id: str,
        changes: dict[str, tuple[Any, Any]],
        *,
        settled_by: int | None = None,
        running: int | None = None,
    ) -> None:
        self.job_id = job_id
        self.changes = changes
        self.settled_by = settled_by
        listed = changes_text(changes)
        if settled_by is not None:
            message = (
                f"job {job_id!r} has a spec settled by its trial {settled_by}, which reached the target under it, so "
                f"a changed spec ({listed}) is refused: `zeus-kfp delete {job_id}` starts the job afresh, or run the "
                "changed job under a new --job-id (on a cluster: --param job_id=...)"
            )
        elif running is not None:
            message = (
                f"job {job_id!r} is running recurrence {running} under its spec, so a changed spec ({listed}) is "
                "refused for now: a run takes it once none runs (and none of its trials has reached the target)"
            )
        else:
            message = (
                f"job {job_id!r} is stored with a different spec ({listed}); a run of it takes a changed spec through "
                "its recurrence gate while none of its trials has reached the target"
            )
        super().__init__(message)


class EventConflictError(ValueError):
    """An event was written again with different content (a retried step that decided otherwise).

    Nothing is overwritten: the stored event stays, and this names its key.
    """

    def __init__(self, key: str, detail: str) -> None:
        self.key = key
        super().__init__(f"conflicting write to {key}: {detail}; the stored event is kept")


class UnknownTrialError(LookupError):
    """A trial or recurrence was referenced before it was recorded (finish before dispatch)."""


class UnknownJobError(LookupError):
    """No job with this id is stored."""


class StoreFormatError(StoreError):
    """An entry of a newer store format than this zeus-kfp reads (docs/STORE.md, "Format"). Never skipped:
    leaving an entry out would change the job's history, so the read stops and says to upgrade."""

    def __init__(self, key: str, written: int, known: int) -> None:
        self.key = key
        super().__init__(
            f"{key} was written by a newer zeus-kfp (store format {written}; this one reads format {known} and "
            "older): upgrade zeus-kfp to read this job"
        )


class CorruptObjectError(StoreError):
    """A stored object cannot be read as what its key says (checksum, encoding, schema, permissions)."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"bad object {key}: {reason}")


class StoreWarning(UserWarning):
    """A stored object was skipped on read (see `ObjectProblem`); the object itself is left in place."""


@dataclass(frozen=True)
class ObjectProblem:
    """One object a read skipped, and why. Collected on `Store.problems` and emitted as a warning."""

    key: str
    reason: str

    def __str__(self) -> str:
        return f"{self.key}: {self.reason}"


class JobDeletedError(StoreError):
    """A reader or compactor wrote into a job (a hole it closed, a snapshot) that was deleted, or deleted and
    made again, while it read: what it wrote is undone, and it says so rather than answer from a job that is
    gone. Reading again reads the job as it is now."""

    def __init__(self, job_id: str, location: str) -> None:
        self.job_id = job_id
        super().__init__(
            f"job {job_id!r} in {location} was deleted (or deleted and made again) while it was read; "
            "what this read wrote into it is removed: read it again"
        )
