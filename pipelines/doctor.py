"""`zeus-kfp doctor`: will a run of this pipeline work on that cluster? A preflight from the user's
machine, through the KFP API and the store, that says what it checked, what failed and what it
could not check from here (and why).

Checks: the backend's version (KFP API healthz) against the backend the pipeline was compiled
for and against the hazard rules (pipelines/compat.py); the namespace, reachable with the
token (listing its experiments); the store URI, usable from here with ZEUS_S3_* and allowed for
the namespace in multi-user mode. Plain HTTP with `requests`, so every answer can be reported
as it came; the token travels as a bearer header and is never printed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from zeus_kfp.pipelines.backends import TARGETS, closest_target, get_backend, parse_version
from zeus_kfp.pipelines.compat import check
from zeus_kfp.pipelines.package import CompiledPackage
from zeus_kfp.steps.params import NAMESPACE_TOKEN
from zeus_kfp.store.errors import MULTI_USER_KEY_PREFIXES

OK, FAIL, UNKNOWN = "ok", "FAIL", "not checked"
TIMEOUT_S = 10.0
ALWAYS_UNCHECKED = (
    "that the Secret named by --minio-secret exists in the namespace (needs the Kubernetes API; "
    "kubectl get secret -n <namespace>)",
    "that the pods reach the store endpoint compiled into the pipeline (an in-cluster address; "
    "the store check above runs from here)",
    "that zeusd runs on the GPU nodes (kubectl get ds zeusd -n zeus-system; without it trials measure only)",
    "that GPU nodes match the train step's node selector and tolerations",
)


@dataclass(frozen=True)
class Finding:
    status: str  # OK, FAIL or UNKNOWN
    what: str
    detail: str

    def __str__(self) -> str:
        return f"{self.status:<11} {self.what}: {self.detail}"


def _get(host: str, path: str, token: str | None, **params: Any) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(f"{host.rstrip('/')}{path}", params=params, headers=headers, timeout=TIMEOUT_S)


def healthz(host: str, token: str | None) -> dict[str, Any]:
    """The API server's healthz: tag_name (its version), multi_user. v2beta1 first, then v1beta1."""
    info: dict[str, Any] = {}
    for version in ("v2beta1", "v1beta1"):
        resp = _get(host, f"/apis/{version}/healthz", token)
        if resp.ok:
            info = {**resp.json(), **info}
            if info.get("tag_name") not in (None, "", "unknown"):
                break
    return info


def check_backend(info: dict[str, Any], target: str | None, package: CompiledPackage | None) -> list[Finding]:
    what = "backend version"
    tag = str(info.get("tag_name") or "")
    try:
        version = parse_version(tag)
    except ValueError:
        return [Finding(UNKNOWN, what, f"the KFP API did not say its version (healthz tag_name={tag or 'absent'})")]
    fits = closest_target(version)
    release = ".".join(map(str, version))
    if fits is None:
        supported = ", ".join(TARGETS)
        return [Finding(FAIL, what, f"KFP {release} is older than every supported backend ({supported})")]
    out = []
    if target is None:
        out.append(Finding(UNKNOWN, what, f"KFP {release}; no compiled target to compare (give --package)"))
    elif get_backend(target).name != fits.name:
        out.append(
            Finding(
                FAIL,
                what,
                f"KFP {release}, but the pipeline was compiled for {target}: compile with --kfp-backend {fits.name}",
            )
        )
    else:
        out.append(Finding(OK, what, f"KFP {release} ({fits.ships_with}), the pipeline's compiled target {target}"))
    if package is not None:
        violations = check(package.docs, version)
        if violations:
            out.append(Finding(FAIL, "backend hazards", "; ".join(map(str, violations))))
        else:
            out.append(Finding(OK, "backend hazards", f"the pipeline trips none of the known hazards of KFP {release}"))
    return out


def check_namespace(host: str, token: str | None, namespace: str | None, multi_user: bool | None) -> Finding:
    what = "namespace"
    if multi_user and not namespace:
        return Finding(FAIL, what, "the KFP API is multi-user: give --namespace (your profile) or set KFP_NAMESPACE")
    params = {"page_size": 1} | ({"namespace": namespace} if namespace else {})
    try:
        resp = _get(host, "/apis/v2beta1/experiments", token, **params)
    except requests.RequestException as err:
        return Finding(FAIL, what, f"the KFP API did not answer ({type(err).__name__})")
    shown = namespace or "(the default)"
    if resp.status_code in (401, 403):
        return Finding(
            FAIL, what, f"{shown} refused the token with HTTP {resp.status_code}: check the token and the namespace"
        )
    if not resp.ok:
        return Finding(FAIL, what, f"listing experiments in {shown} failed with HTTP {resp.status_code}")
    return Finding(OK, what, f"{shown} reachable with {'the token' if token else 'no token'}")


def prefix_allowed(uri: str, namespace: str | None) -> bool | None:
    """Whether a multi-user namespace's key may use `uri`; None when it is not KFP's bucket."""
    match = re.match(r"^s3://([^/]+)/?(.*)$", uri)
    if not match or match.group(1) != "mlpipeline":
        return None
    key = match.group(2).rstrip("/") + "/"
    return any(key.startswith(p.format(ns=namespace or "<namespace>")) for p in MULTI_USER_KEY_PREFIXES)


def check_store(uri: str | None, namespace: str | None, multi_user: bool | None) -> list[Finding]:
    what = "store"
    if not uri:
        return [Finding(UNKNOWN, what, "no store URI (give --store or --package)")]
    if NAMESPACE_TOKEN in uri:  # the run's pods put their own namespace there; here, the one given
        if not namespace:
            return [Finding(UNKNOWN, what, f"{uri}: give --namespace, the namespace the runs are in")]
        uri = uri.replace(NAMESPACE_TOKEN, namespace)
    out = []
    if multi_user and prefix_allowed(uri, namespace) is False:
        allowed = ", ".join(f"mlpipeline/{p.format(ns=namespace)}*" for p in MULTI_USER_KEY_PREFIXES)
        out.append(
            Finding(FAIL, "store prefix", f"{uri} is outside what namespace {namespace}'s key may use: {allowed}")
        )
    if uri.startswith("s3://") and not os.environ.get("ZEUS_S3_ENDPOINT"):
        out.append(
            Finding(
                UNKNOWN,
                what,
                f"{uri}: set ZEUS_S3_ENDPOINT, ZEUS_S3_ACCESS_KEY and ZEUS_S3_SECRET_KEY to check it from here "
                "(e.g. after kubectl port-forward to the cluster's object store)",
            )
        )
        return out
    from zeus_kfp.store import open_store
    from zeus_kfp.store.errors import StoreError

    try:
        jobs = open_store(uri).list_jobs()
    except (StoreError, ValueError) as err:
        out.append(Finding(FAIL, what, str(err)))
    else:
        out.append(Finding(OK, what, f"{uri} usable from here ({len(jobs)} job(s))"))
    return out


def run_doctor(
    host: str,
    *,
    token: str | None = None,
    namespace: str | None = None,
    package: Path | None = None,
    kfp_backend: str | None = None,
    store_uri: str | None = None,
) -> list[Finding]:
    """Every check, in order; a check that cannot run says so instead of failing the others."""
    pkg = CompiledPackage.read(package) if package else None
    target = kfp_backend or (pkg.target if pkg else None)
    try:
        info = healthz(host, token)
    except (requests.RequestException, ValueError) as err:
        findings = [Finding(FAIL, "KFP API", f"{host} did not answer ({type(err).__name__}): check --host")]
        info = None
    else:
        findings = check_backend(info, target, pkg)
    multi_user = None if info is None else info.get("multi_user")
    if info is not None:
        findings.append(check_namespace(host, token, namespace, multi_user))
    uri = store_uri or (pkg.default("store_uri") if pkg else None)
    findings += check_store(uri, namespace, multi_user)
    findings += [Finding(UNKNOWN, "cluster", item) for item in ALWAYS_UNCHECKED]
    return findings
