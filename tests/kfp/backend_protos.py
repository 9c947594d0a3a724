"""Strict schema parse of a compiled pipeline against one KFP backend's own protos.

The .proto files (tests/kfp/protos/b<version>/) are compiled at test time with
grpcio-tools' protoc into a FileDescriptorSet and loaded into a private descriptor pool per
version. Why at test time, not generated once and committed: the three versions define the same
proto package and file names, so their classes cannot share protobuf's default pool or be
imported side by side as _pb2 modules; generated code is also tied to the protobuf runtime it
was made for (gencode/runtime version checks), while the .proto files are the reviewable source.
protoc takes about 0.1 s per version.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import google.rpc.status_pb2
import grpc_tools
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from grpc_tools import protoc

PROTO_DIR = Path(__file__).parent / "protos"
_WELL_KNOWN = Path(grpc_tools.__file__).parent / "_proto"  # google/protobuf/*.proto
_GOOGLEAPIS = Path(google.rpc.status_pb2.__file__).parents[2]  # google/rpc/status.proto


@dataclass(frozen=True)
class BackendSchema:
    """PipelineSpec, PlatformSpec and KubernetesExecutorConfig as one backend release knows them."""

    release: str
    pipeline_spec: type
    platform_spec: type
    executor_config: type

    def problems(self, docs: list[dict[str, Any]]) -> list[str]:
        """Every part of the compiled YAML a strict parse refuses (unknown fields, wrong types)."""
        parts: list[tuple[str, type, Any]] = [("PipelineSpec", self.pipeline_spec, docs[0])]
        if len(docs) > 1 and docs[1]:
            parts.append(("PlatformSpec", self.platform_spec, docs[1]))
            executors = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
            parts += [(f"executor {label}", self.executor_config, cfg) for label, cfg in executors.items()]
        out = []
        for what, cls, doc in parts:
            try:
                json_format.ParseDict(doc, cls(), ignore_unknown_fields=False)
            except json_format.ParseError as err:
                out.append(f"{what}: {err}")
        return out


def load_schema(release: str, workdir: Path | None = None) -> BackendSchema:
    """Compile b<release>'s protos and return its message classes (in a pool of their own)."""
    source = PROTO_DIR / f"b{release}"
    if not source.is_dir():
        raise FileNotFoundError(f"no protos for KFP backend {release} under {PROTO_DIR}")
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        out = Path(tmp) / "descriptors.pb"
        rc = protoc.main(
            [
                "protoc",
                f"-I{source}",
                f"-I{_WELL_KNOWN}",
                f"-I{_GOOGLEAPIS}",
                "--include_imports",
                f"--descriptor_set_out={out}",
                "pipeline_spec.proto",
                "kubernetes_executor_config.proto",
            ]
        )
        if rc != 0:
            raise RuntimeError(f"protoc failed ({rc}) on {source}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)

    def message(name: str) -> type:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))

    return BackendSchema(
        release,
        message("ml_pipelines.PipelineSpec"),
        message("ml_pipelines.PlatformSpec"),
        message("kfp_kubernetes.KubernetesExecutorConfig"),
    )
