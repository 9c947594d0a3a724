"""A STAND-IN for kubectl, for running docs/kubeflow.md's cluster blocks as a script (test_readme_cluster.py).

There is no cluster here, so this answers the few kubectl commands docs/kubeflow.md uses from a description of
the cluster a test plays (a JSON file named by $ZEUS_TEST_CLUSTER): which Services exist (a port-forward to
one that does not, or to a wrong port, is an error), which service-account tokens and Secret keys a namespace
has, and where the Kubernetes API stand-in (tests/launch/kube_api_server.py) listens, to which
`apply --dry-run=server -f -` sends each manifest (strict field validation, dry run) as kubectl does.
Every call is appended to the JSON-lines log named in the description, with "error" set when it failed.
The servers a port-forward would reach already listen on the local ports the test gave the script.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path

import yaml

PLURALS = {"TrainJob": "trainjobs", "PyTorchJob": "pytorchjobs"}


class Refused(Exception):
    """What a real kubectl would fail with here."""


def _namespace(args: list[str]) -> tuple[str | None, list[str]]:
    out, namespace, i = [], None, 0
    while i < len(args):
        if args[i] in ("-n", "--namespace"):
            namespace, i = args[i + 1], i + 2
            continue
        if args[i].startswith("--namespace="):
            namespace = args[i].split("=", 1)[1]
        else:
            out.append(args[i])
        i += 1
    return namespace, out


def port_forward(cluster: dict, namespace: str | None, args: list[str]) -> str:
    target, ports = args[0], args[1]
    if not target.startswith("svc/"):
        raise Refused(f"port-forward to {target}: docs/kubeflow.md forwards to Services")
    service = cluster["services"].get(f"{namespace}/{target[4:]}")
    local, _, remote = ports.partition(":")
    if service is None:
        raise Refused(f'services "{target[4:]}" not found in namespace {namespace}')
    if int(remote) != service["port"]:
        raise Refused(f"Service {target[4:]} does not have a service port {remote}")
    if int(local) != cluster["local"][service["serves"]]:
        raise Refused(f"local port {local} is not where the test's {service['serves']} stand-in listens")
    return f"Forwarding from 127.0.0.1:{local} -> {remote}"


def create_token(cluster: dict, namespace: str | None, args: list[str]) -> str:
    token = cluster["tokens"].get(f"{namespace}/{args[0]}")
    if token is None:
        raise Refused(f'serviceaccounts "{args[0]}" not found in namespace {namespace}')
    return token


def get_secret(cluster: dict, namespace: str | None, args: list[str]) -> str:
    name, rest = args[0], args[1:]
    secret = cluster["secrets"].get(f"{namespace}/{name}")
    if secret is None:
        raise Refused(f'secrets "{name}" not found in namespace {namespace}')
    output = rest[rest.index("-o") + 1] if "-o" in rest else ""
    match = re.fullmatch(r"jsonpath=\{\.data\.(\w+)\}", output)
    if not match or match.group(1) not in secret:
        raise Refused(f"the stand-in answers -o jsonpath={{.data.KEY}} for the keys {sorted(secret)}, not {output!r}")
    return base64.b64encode(secret[match.group(1)].encode()).decode()


def apply(cluster: dict, namespace: str | None, args: list[str]) -> str:
    if "-k" in args:
        directory = Path(args[args.index("-k") + 1])
        if not (directory / "kustomization.yaml").is_file():
            raise Refused(f"{directory}: no kustomization.yaml")
        return f"kustomization {directory} applied" + (f" in namespace {namespace}" if namespace else "")
    if "--dry-run=server" not in args or args[args.index("-f") + 1] != "-":
        raise Refused("the stand-in applies -k DIR, or --dry-run=server -f - (a manifest on stdin)")
    lines = []
    for doc in yaml.safe_load_all(sys.stdin.read()):
        if not doc:
            continue
        ns = doc["metadata"].get("namespace") or namespace or "default"
        group, version = doc["apiVersion"].split("/")
        url = f"{cluster['api']}/apis/{group}/{version}/namespaces/{ns}/{PLURALS[doc['kind']]}"
        request = urllib.request.Request(
            f"{url}?dryRun=All&fieldValidation=Strict", data=json.dumps(doc).encode(), method="POST"
        )
        request.add_header("Content-Type", "application/json")
        try:
            urllib.request.urlopen(request).close()
        except urllib.error.HTTPError as err:
            raise Refused(f"{doc['kind']} {doc['metadata']['name']}: {err.code} {err.read().decode()[:800]}") from None
        lines.append(f"{doc['kind'].lower()}.{group}/{doc['metadata']['name']} created (server dry run)")
    return "\n".join(lines)


COMMANDS = {"port-forward": port_forward, "create": create_token, "get": get_secret, "apply": apply}


def main(argv: list[str]) -> int:
    cluster = json.loads(Path(os.environ["ZEUS_TEST_CLUSTER"]).read_text())
    namespace, args = _namespace(argv)
    entry: dict = {"argv": argv}
    try:
        if args[:2] == ["create", "token"]:
            out = create_token(cluster, namespace, args[2:])
        elif args[:2] == ["get", "secret"]:
            out = get_secret(cluster, namespace, args[2:])
        elif args and args[0] in ("port-forward", "apply"):
            out = COMMANDS[args[0]](cluster, namespace, args[1:])
        else:
            raise Refused(f"the stand-in kubectl does not know {' '.join(argv)!r}")
    except Refused as err:
        entry["error"] = str(err)
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        with open(cluster["log"], "a") as log:
            log.write(json.dumps(entry) + "\n")
    sys.stdout.write(out + ("" if args[:2] in (["create", "token"], ["get", "secret"]) else "\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
