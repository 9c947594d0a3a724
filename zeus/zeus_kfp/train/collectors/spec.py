"""The collector spec, in the shape of Katib's metricsCollectorSpec, validated where it enters.

One spec, three entry points: the `metrics_collector` pipeline parameter (JSON or YAML text),
the CLI's `--metrics-collector`, and Python (`CollectorSpec.parse(dict | str)`, `run_trial(collector=...)`).

    kind: stdOut | file | tfEvent | prometheus | none          (default stdOut)
    source:
      fileSystemPath: {path, kind: file | directory, format: text | json}
      httpGet: {path: /metrics, port: 8080}
      filter: {metricsFormat: [regex with 2 groups, ...]}       (empty: Katib's name=value pattern)
    intervalSeconds: 1.0                                       (zeus-kfp: prometheus scrape interval)

A Katib user's metricsCollectorSpec is accepted as is: `collector: {kind: ...}` in place of
`kind`, Katib's kind names (StdOut, File, TensorFlowEvent, PrometheusMetric, None; any case),
File/Directory and TEXT/JSON, Katib's default paths (/var/log/katib/metrics.log,
/var/log/katib/tfevent/) and port (8080), and the spec wrapped as `{metricsCollectorSpec: ...}`
or inside a whole Experiment. Katib's `Custom` kind runs a sidecar container of the user's and
is refused: a KFP step runs no sidecars. What Katib's admission webhook refuses is refused here
too (a `filter` with format json, even an empty one; an httpGet path not starting with '/'), with
two deliberate exceptions: a relative fileSystemPath is the script's working directory's (Katib
wants an absolute path because its sidecar shares only a mounted volume with the training
container; here runner and script share the trial's own work directory, which is fresh per trial,
so a relative path is the safe choice for trials that may run side by side), and port 0 asks
for a free port (see below).

Paths may use the trial's {log_dir} and {work_dir}; a relative path is the script's working
directory's. Port 0 asks the runner for a free port, which it hands to the script as
{metrics_port} in the command and as ZEUS_METRICS_PORT.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from zeus_kfp.errors import FieldError
from zeus_kfp.train.metrics import MetricPatternError, compile_patterns

PARAM = "metrics_collector"
COLLECTOR_KINDS = ("stdOut", "file", "tfEvent", "prometheus", "none")
_KIND_NAMES = {
    "stdout": "stdOut",
    "file": "file",
    "tfevent": "tfEvent",
    "tensorflowevent": "tfEvent",
    "prometheus": "prometheus",
    "prometheusmetric": "prometheus",
    "none": "none",
}
PATH_KINDS = ("file", "directory")
FILE_FORMATS = ("text", "json")
KATIB_DEFAULT_PATHS = {"file": "/var/log/katib/metrics.log", "tfEvent": "/var/log/katib/tfevent/"}
PATH_KIND_OF = {"file": "file", "tfEvent": "directory"}
DEFAULT_HTTP_PATH = "/metrics"
DEFAULT_PORT = 8080  # Katib's default for PrometheusMetric
AUTO_PORT = 0
DEFAULT_INTERVAL_S = 1.0
LOCAL_HOSTS = ("127.0.0.1", "localhost")
_KEYS = {
    "": ("kind", "collector", "source", "intervalSeconds"),
    "collector": ("kind",),
    "source": ("fileSystemPath", "httpGet", "filter"),
    "source.fileSystemPath": ("path", "kind", "format"),
    "source.httpGet": ("path", "port", "host", "scheme"),
    "source.filter": ("metricsFormat",),
}
PORT_ALLOWED = (
    "a port number 1-65535, or 0 for a free port the runner picks and hands to the script as {metrics_port} "
    "(named ports have no meaning outside Kubernetes)"
)
KINDS_ALLOWED = (
    "stdOut, file, tfEvent, prometheus or none (Katib's StdOut, File, TensorFlowEvent, PrometheusMetric, None)"
)


class CollectorSpecError(FieldError):
    """A bad metrics_collector field; names the field, the collector and its source, and what is allowed."""

    def __init__(self, field_name: str, value: Any, allowed: str, *, collector: str = "") -> None:
        super().__init__(f"{PARAM}.{field_name}" if field_name else PARAM, value, allowed)
        if collector:
            self.args = (f"{collector}: {self.args[0]}",)


@dataclass(frozen=True)
class CollectorSpec:
    """How a plain script's metrics are collected (see the module docstring)."""

    kind: str = "stdOut"
    path: str | None = None
    file_format: str = "text"
    http_path: str = DEFAULT_HTTP_PATH
    http_port: int = DEFAULT_PORT
    metrics_format: tuple[str, ...] = ()
    interval_s: float = DEFAULT_INTERVAL_S

    # -- reading -------------------------------------------------------------------------------
    @classmethod
    def parse(cls, value: CollectorSpec | Mapping[str, Any] | str | None) -> CollectorSpec:
        """A spec from a dict, JSON or YAML text (Katib's shape or ours), or None/"" for stdOut."""
        if isinstance(value, CollectorSpec):
            return value
        if value is None or (isinstance(value, str) and not value.strip()):
            return cls()
        if isinstance(value, str):
            value = _load_text(value)
        if not isinstance(value, Mapping):
            raise CollectorSpecError("", value, "a mapping in the shape of Katib's metricsCollectorSpec")
        return _from_mapping(_unwrap(value))

    @classmethod
    def from_arg(cls, value: str) -> CollectorSpec:
        """A command-line value: JSON or YAML text, or @path to a file holding it (a Katib YAML)."""
        if value.startswith("@"):
            try:
                value = Path(value[1:]).expanduser().read_text()
            except OSError as exc:
                raise CollectorSpecError("", value, f"JSON or YAML text, or @path of a readable file ({exc})") from None
        return cls.parse(value)

    @classmethod
    def from_params(cls, metrics_collector: Any, metric_pattern: str = "") -> CollectorSpec:
        """The train step's two parameters: the spec, and the older single `metric_pattern`, which fills
        filter.metricsFormat when the spec names none."""
        spec = cls.parse(metrics_collector)
        if metric_pattern and not spec.metrics_format and spec.kind in ("stdOut", "file"):
            spec = _checked(replace(spec, metrics_format=(metric_pattern,)))
        return spec

    # -- using ---------------------------------------------------------------------------------
    def describe(self) -> str:
        """ "<kind> collector (<source>)": how messages name it."""
        if self.kind == "stdOut":
            source = "the script's stdout and stderr"
        elif self.kind == "prometheus":
            port = "{metrics_port}" if self.http_port == AUTO_PORT else str(self.http_port)
            source = f"http://127.0.0.1:{port}{self.http_path}"
        elif self.kind == "none":
            source = "no collection"
        else:
            source = f"{self.path}"
        return f"{self.kind} collector ({source})"

    def patterns(self) -> list[re.Pattern[str]]:
        return compile_patterns(list(self.metrics_format) or None)

    def to_dict(self) -> dict[str, Any]:
        """The canonical form (this module's shape); `parse(to_dict())` gives the spec back."""
        out: dict[str, Any] = {"kind": self.kind}
        source: dict[str, Any] = {}
        if self.kind in PATH_KIND_OF:
            path: dict[str, Any] = {"path": self.path, "kind": PATH_KIND_OF[self.kind]}
            if self.kind == "file":
                path["format"] = self.file_format
            source["fileSystemPath"] = path
        if self.kind == "prometheus":
            source["httpGet"] = {"path": self.http_path, "port": self.http_port}
            out["intervalSeconds"] = self.interval_s
        if self.metrics_format:
            source["filter"] = {"metricsFormat": list(self.metrics_format)}
        if source:
            out["source"] = source
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def _load_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    import yaml  # a dependency of kfp, declared in setup.cfg too

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CollectorSpecError("", text[:200], f"JSON or YAML of a metricsCollectorSpec ({exc})") from None


def _unwrap(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """The metricsCollectorSpec itself, from {metricsCollectorSpec: ...} or a whole Katib Experiment."""
    inner = spec.get("spec")
    if isinstance(inner, Mapping) and "metricsCollectorSpec" in inner:
        spec = inner["metricsCollectorSpec"]
    elif "metricsCollectorSpec" in spec:
        spec = spec["metricsCollectorSpec"]
    if not isinstance(spec, Mapping):
        raise CollectorSpecError("metricsCollectorSpec", spec, "a mapping")
    return spec


def _section(spec: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """The mapping at dotted `where` (empty if absent), its keys checked against _KEYS."""
    node: Any = spec
    for part in where.split(".") if where else []:
        node = node.get(part) if isinstance(node, Mapping) else None
        if node is None:
            return {}
    if not isinstance(node, Mapping):
        raise CollectorSpecError(where, node, "a mapping")
    unknown = sorted(set(node) - set(_KEYS[where]))
    if unknown:
        hint = "; Katib's Custom collector (a sidecar) cannot run in a KFP step" if "customCollector" in unknown else ""
        name = f"{where}.{unknown[0]}" if where else unknown[0]
        raise CollectorSpecError(name, node[unknown[0]], f"one of the keys {', '.join(_KEYS[where])}{hint}")
    return node


def _choice(value: Any, field_name: str, allowed: tuple[str, ...]) -> str:
    text = str(value).strip().lower() if value is not None else ""
    if text not in allowed:
        raise CollectorSpecError(field_name, value, " or ".join(allowed) + " (any case)")
    return text


def _kind(spec: Mapping[str, Any]) -> str:
    given = [k for k in (spec.get("kind"), _section(spec, "collector").get("kind")) if k is not None]
    if not given:
        return "stdOut"
    names = {_KIND_NAMES.get(str(k).strip().lower()) for k in given}
    if None in names or len(names) > 1:
        bad = given[0] if len(names) == 1 else given
        hint = "; Custom needs a sidecar, which a KFP step cannot run" if "custom" in str(bad).lower() else ""
        raise CollectorSpecError("kind", bad, KINDS_ALLOWED + hint)
    return names.pop()  # type: ignore[return-value]


def _port(value: Any) -> int:
    text = str(value).strip() if value is not None else str(DEFAULT_PORT)
    if isinstance(value, bool) or not text.isdigit() or int(text) > 65535:
        raise CollectorSpecError("source.httpGet.port", value, PORT_ALLOWED)
    return int(text)


def _from_mapping(spec: Mapping[str, Any]) -> CollectorSpec:
    _section(spec, "")
    kind = _kind(spec)
    fs, http, filt = (_section(spec, f"source.{s}") for s in ("fileSystemPath", "httpGet", "filter"))
    if fs and kind not in PATH_KIND_OF:
        raise CollectorSpecError(
            "source.fileSystemPath", dict(fs), f"no fileSystemPath for kind {kind} (only file, tfEvent)"
        )
    if http and kind != "prometheus":
        raise CollectorSpecError("source.httpGet", dict(http), f"no httpGet for kind {kind} (only prometheus)")
    fields: dict[str, Any] = {"kind": kind}
    if kind in PATH_KIND_OF:
        fields["path"] = str(fs.get("path") or KATIB_DEFAULT_PATHS[kind])
        if "kind" in fs and _choice(fs["kind"], "source.fileSystemPath.kind", PATH_KINDS) != PATH_KIND_OF[kind]:
            raise CollectorSpecError("source.fileSystemPath.kind", fs["kind"], f"{PATH_KIND_OF[kind]} for kind {kind}")
        if "format" in fs:
            if kind != "file":
                raise CollectorSpecError("source.fileSystemPath.format", fs["format"], "no format for kind tfEvent")
            fields["file_format"] = _choice(fs["format"], "source.fileSystemPath.format", FILE_FORMATS)
    if kind == "prometheus":
        if str(http.get("host") or LOCAL_HOSTS[0]).strip().lower() not in LOCAL_HOSTS:
            raise CollectorSpecError(
                "source.httpGet.host", http["host"], "127.0.0.1 or localhost (the script's own pod)"
            )
        if str(http.get("scheme") or "http").strip().lower() != "http":
            raise CollectorSpecError("source.httpGet.scheme", http["scheme"], "HTTP")
        http_path = str(http.get("path") or DEFAULT_HTTP_PATH)
        if not http_path.startswith("/"):
            raise CollectorSpecError(
                "source.httpGet.path", http.get("path"), "a URL path starting with '/', e.g. /metrics (as Katib)"
            )
        fields["http_path"] = http_path
        fields["http_port"] = _port(http.get("port"))
        interval = spec.get("intervalSeconds", DEFAULT_INTERVAL_S)
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0 < interval < math.inf:
            raise CollectorSpecError("intervalSeconds", interval, "a positive number of seconds")
        fields["interval_s"] = float(interval)
    source = spec.get("source")
    if fields.get("file_format") == "json" and isinstance(source, Mapping) and "filter" in source:
        raise CollectorSpecError(
            "source.filter", source["filter"], "no filter with format json (each line is a JSON object; as Katib)"
        )
    formats = filt.get("metricsFormat")
    if formats:
        if isinstance(formats, str) or not isinstance(formats, list) or not all(isinstance(f, str) for f in formats):
            raise CollectorSpecError("source.filter.metricsFormat", formats, "a list of regexes")
        if kind not in ("stdOut", "file"):
            raise CollectorSpecError("source.filter.metricsFormat", formats, "filters only for kinds stdOut and file")
        fields["metrics_format"] = tuple(formats)
    return _checked(CollectorSpec(**fields))


def _checked(spec: CollectorSpec) -> CollectorSpec:
    """Compile the filters now, so a bad regex fails where the spec enters, naming the collector."""
    try:
        spec.patterns()
    except MetricPatternError as exc:
        allowed = f"a regex with 2 groups (name, value); this one: {exc.why}"
        raise CollectorSpecError(
            "source.filter.metricsFormat", exc.pattern, allowed, collector=spec.describe()
        ) from None
    return spec
