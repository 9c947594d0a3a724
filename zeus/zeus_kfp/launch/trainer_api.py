"""Which TrainJob the cluster's Kubeflow Trainer accepts: v2.1 (Kubeflow 1.11) or v2.2 and later.

Why ask: Trainer v2.2 replaced `podTemplateOverrides` with `runtimePatches` and added
`activeDeadlineSeconds`. A TrainJob in the other version's shape is not refused by an API server that
validates loosely (the kubernetes client sends no fieldValidation by default): it silently drops the
fields it does not know, and the trial's pods never carry the labels the train step finds them by. So the
train step reads the TrainJob schema the cluster serves and builds the shape it accepts (and creates with
strict field validation, so a mismatch would fail loudly instead: zeus_kfp.launch.kube).

The schema comes from the API server's OpenAPI v3 document of trainer.kubeflow.org/v1alpha1, which the
API server builds from the installed CRD and serves to every authenticated client (the system:discovery
role), so the pipeline's service account needs no right to read CRDs. ZEUS_LAUNCH_TRAINER_API=v2.1 or v2.2
skips the question.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from zeus_kfp.launch.config import ENV
from zeus_kfp.launch.kube import LaunchSetupError

GROUP, VERSION, KIND = "trainer.kubeflow.org", "v1alpha1", "TrainJob"
OPENAPI_PATH = f"/openapi/v3/apis/{GROUP}/{VERSION}"


class TrainerApiError(LaunchSetupError):
    """The cluster's TrainJob schema could not be read or has neither shape; says what to check or set."""


def api_of_spec(spec_properties: Mapping[str, Any]) -> str:
    """ "v2.2" (runtimePatches: Trainer v2.2 and later) or "v2.1" (podTemplateOverrides) from the properties of
    a TrainJob schema's `spec`."""
    if "runtimePatches" in spec_properties:
        return "v2.2"
    if "podTemplateOverrides" in spec_properties:
        return "v2.1"
    raise TrainerApiError(
        "the cluster's TrainJob schema has neither runtimePatches (Trainer v2.2+) nor podTemplateOverrides "
        f"(v2.1): set {ENV['trainer_api']}=v2.1 or v2.2 if you know which it accepts"
    )


def api_of_crd(crd: Mapping[str, Any]) -> str:
    """The TrainJob shape a CustomResourceDefinition (trainer.kubeflow.org_trainjobs.yaml) accepts."""
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    return api_of_spec(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])


def _trainjob_schema(document: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for schema in (document.get("components") or {}).get("schemas", {}).values():
        kinds = schema.get("x-kubernetes-group-version-kind") or []
        if any(k.get("group") == GROUP and k.get("kind") == KIND and k.get("version") == VERSION for k in kinds):
            return schema
    return None


def detect(api_client: Any) -> str:
    """The cluster's TrainJob shape ("v2.1" or "v2.2"), from its OpenAPI v3 document (see the module doc)."""
    # deferred: kubernetes takes 0.7 s to import; only a cluster trial uses it
    from kubernetes.client.exceptions import ApiException

    try:
        response = api_client.call_api(
            OPENAPI_PATH, "GET", auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True
        )
        document = json.loads(response.data)
    except ApiException as exc:
        if exc.status == 404:
            raise TrainerApiError(
                f"the cluster serves no {GROUP}/{VERSION} API: is Kubeflow Trainer v2 installed? "
                "(launcher pytorchjob runs on the Training Operator v1)"
            ) from exc
        raise TrainerApiError(
            f"could not read the TrainJob schema ({exc.status} {exc.reason} from {OPENAPI_PATH}): set "
            f"{ENV['trainer_api']}=v2.1 or v2.2"
        ) from exc
    schema = _trainjob_schema(document)
    if schema is None:
        raise TrainerApiError(f"{OPENAPI_PATH} describes no {KIND}: is Kubeflow Trainer v2 installed?")
    return api_of_spec(schema.get("properties", {}).get("spec", {}).get("properties", {}))
