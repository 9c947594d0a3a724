"""The prometheus collector: scrape the script's /metrics on 127.0.0.1 at an interval.

The exposition text is parsed with prometheus_client's own parser (the format's reference
implementation in Python). A scrape sees current values only, so observations are the *changes*
between scrapes: a series yields an observation when its value differs from the previous scrape's,
or when the script's epoch counter moved since the series was last observed (a new evaluation
that happened to give the same value). A value set and overwritten between two scrapes is never
seen: that is the nature of pulling, in Katib as here; scripts whose every value matters should
use stdOut or file.

Series names: a gauge's or untyped sample's name; a counter's name without `_total`; labels in
Prometheus notation (`accuracy{split="val"}`); `*_created` series, histograms and summaries are
skipped (they are not metric values). Gauges or counters named "step" and "epoch" are the
progress counters that every observation of the same scrape carries.

The endpoint is always 127.0.0.1 (the script runs beside the runner, in its pod): while the
script starts, a refused connection is normal; `finish` reports an endpoint that never answered.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable

from zeus_kfp.train.collectors.collector import CollectorError, OwnSource
from zeus_kfp.train.collectors.counters import epoch_value, step_value
from zeus_kfp.train.collectors.observation import Observation, make_observations

LOCALHOST = "127.0.0.1"
SCRAPE_TIMEOUT_S = 2.0
VALUE_TYPES = ("gauge", "counter", "untyped", "unknown")


def _series_name(family_name: str, family_type: str, sample_name: str, labels: dict[str, str]) -> str | None:
    if sample_name.endswith("_created"):
        return None
    name = family_name if family_type == "counter" else sample_name
    if labels:
        name += "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
    return name


def parse_exposition(text: str) -> dict[str, float]:
    """Series name -> value of one scrape (see the module docstring for the names)."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.type not in VALUE_TYPES:
            continue
        for sample in family.samples:
            name = _series_name(family.name, family.type, sample.name, sample.labels)
            if name is not None:
                values[name] = float(sample.value)
    return values


class PrometheusCollector(OwnSource):
    kind = "prometheus"

    def __init__(
        self,
        port: int,
        path: str = "/metrics",
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = f"http://{LOCALHOST}:{port}{path}"
        self.source = self.url
        self.interval_s = interval_s
        self.scrapes = 0
        self.last_error = ""
        self._clock = clock
        self._next_at = float("-inf")
        self._last: dict[str, float] = {}
        self._epoch_of: dict[str, int | None] = {}

    def poll(self) -> list[Observation]:
        now = self._clock()
        if now < self._next_at:
            return []
        self._next_at = now + self.interval_s
        return self.scrape()

    def scrape(self) -> list[Observation]:
        """One scrape now: the series that changed since the previous one."""
        try:
            with urllib.request.urlopen(self.url, timeout=SCRAPE_TIMEOUT_S) as response:
                text = response.read().decode("utf-8", errors="replace")
        except (urllib.error.URLError, OSError) as exc:
            self.last_error = str(getattr(exc, "reason", exc))
            return []
        try:
            values = parse_exposition(text)
        except ValueError as exc:
            raise CollectorError(self.kind, self.source, f"not Prometheus text exposition: {exc}") from None
        self.scrapes += 1
        epoch = epoch_value(values.get("epoch"))
        changed = []
        for name, value in values.items():
            moved = epoch is not None and self._epoch_of.get(name) != epoch
            if self._last.get(name) != value or moved:
                changed.append((name, value))
                self._last[name] = value
                self._epoch_of[name] = epoch
        if not changed:
            return []
        return make_observations(changed, epoch=epoch, step=step_value(values.get("step")), at=time.time())

    def finish(self) -> list[Observation]:
        found = self.scrape()  # the script has exited: its server is usually gone, but try once
        if self.scrapes == 0:
            why = f"the endpoint never answered ({self.last_error})" if self.last_error else "never scraped"
            raise CollectorError(self.kind, self.source, why)
        return found
