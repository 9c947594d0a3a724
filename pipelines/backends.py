"""The KFP backends zeus-kfp compiles for, and what differs between them.

The targets are the backends people have: Kubeflow 1.10 ships KFP 2.5.0, Kubeflow 1.11
ships 2.15.0, Kubeflow 26.03 (the manifests after 1.11) ships 2.16.0, and 2.17.0 is the latest standalone
backend. What differs between them, read from kubeflow/pipelines at each release tag (see
pipelines/compat.py for the rules and their issues):

- set_retry on a task nested in a condition is ignored before 2.14 (kubeflow/pipelines #11288,
  fixed by #11908): on 2.5 only root tasks get a retry policy, so nothing claims a retry that
  will not happen.
- kfp-kubernetes >= 2.15 writes `secretAsEnv[].optional`; 2.5's KubernetesExecutorConfig has no
  such field (its driver ignores it, a strict parse rejects it: #12495, #12049), so it is dropped
  for 2.5 (false, the only value we write, is what the field's absence means).
- the container securityContext (kfp-kubernetes set_security_context) exists from 2.17 only.
- KFP's own object store is MinIO (`minio-service.kubeflow:9000`) up to the 2.15 manifests and
  SeaweedFS (`seaweedfs.kubeflow:9000`) from 2.16, whose manifests have no `minio-service` any more:
  so 2.16 is a target of its own (2.15's YAML, 2.17's endpoint), not "the newest target below it".
"""

from __future__ import annotations

from dataclasses import dataclass

from zeus_kfp.errors import FieldError

MINIO_ENDPOINT = "minio-service.kubeflow:9000"
SEAWEEDFS_ENDPOINT = "seaweedfs.kubeflow:9000"


class BackendError(FieldError):
    """A KFP backend we do not compile for, or a combination that backend cannot run."""


@dataclass(frozen=True)
class Backend:
    """One KFP backend release and what the compiled pipeline may use on it."""

    name: str  # what --kfp-backend takes: "2.5"
    version: tuple[int, int, int]
    ships_with: str
    store_endpoint: str
    retries_nested: bool  # set_retry honoured inside conditions (>= 2.14)
    secret_optional_field: bool  # KubernetesExecutorConfig.SecretAsEnv.optional known (>= 2.15)
    security_context: bool  # KubernetesExecutorConfig.security_context known (>= 2.17)

    @property
    def release(self) -> str:
        return ".".join(map(str, self.version))


TARGETS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend("2.5", (2, 5, 0), "Kubeflow 1.10", MINIO_ENDPOINT, False, False, False),
        Backend("2.15", (2, 15, 0), "Kubeflow 1.11", MINIO_ENDPOINT, True, True, False),
        Backend("2.16", (2, 16, 0), "Kubeflow 26.03", SEAWEEDFS_ENDPOINT, True, True, False),
        Backend("2.17", (2, 17, 0), "standalone KFP (latest)", SEAWEEDFS_ENDPOINT, True, True, True),
    )
}
LATEST = "2.17"


def parse_version(text: str) -> tuple[int, int, int]:
    """'2.5', '2.5.0', 'v2.15.0' or '2.17.0-rc.1' -> (major, minor, patch); ValueError otherwise."""
    core = str(text).strip().lstrip("v").split("-", 1)[0].split("+", 1)[0]
    parts = core.split(".")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a version: {text!r}")
    major, minor, patch = (int(p) for p in [*parts, "0"][:3])
    return major, minor, patch


def get_backend(name: str | None) -> Backend:
    """The target named by `--kfp-backend` (None: the latest). '2.15.0' is taken as '2.15'."""
    if name is None or str(name).strip() == "":
        return TARGETS[LATEST]
    try:
        major, minor, _ = parse_version(name)
    except ValueError:
        major = minor = -1
    backend = TARGETS.get(f"{major}.{minor}")
    if backend is None:
        raise BackendError(
            "kfp_backend",
            name,
            f"one of {', '.join(TARGETS)} (KFP 2.5 = Kubeflow 1.10, 2.15 = Kubeflow 1.11, 2.16 = Kubeflow 26.03, "
            "2.17 = latest); "
            "older backends mishandle conditions, retries and placeholders (see pipelines/compat.py)",
        )
    return backend


def closest_target(version: tuple[int, int, int]) -> Backend | None:
    """The newest target not newer than a backend's version (what to compile for it), or None."""
    fitting = [b for b in TARGETS.values() if b.version <= version]
    return max(fitting, key=lambda b: b.version) if fitting else None
