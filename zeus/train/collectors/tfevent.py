"""The tfEvent collector: scalars from TensorFlow event files in a directory, as they appear.

The reader is TensorBoard's own `EventFileLoader` (the `tensorboard` package), chosen over
`tbparse` and over a hand-written TFRecord reader because:
- it is the reader TensorBoard itself uses for live reload, maintained with the format: it reads
  records incrementally (each `Load()` yields only the events appended since the last), checks
  the CRCs, and waits at a record cut short by a writer mid-flush instead of failing;
- it normalizes both scalar encodings (TF1/torch `simple_value`, TF2 scalar tensors) through its
  `data_compat` layer, so every writer's scalars come out the same;
- it needs no TensorFlow (TensorBoard's stub), and the package is already needed to serve
  TensorBoard (`zeus-kfp tensorboard`) and to write event files (torch.utils.tensorboard wraps
  it). `tbparse` wraps the same reader but reads whole directories into pandas, not incrementally.

Metric names follow Katib's TFEvent collector: a scalar's tag, prefixed with the event file's
directory relative to the collector's (`train/accuracy` for `<dir>/train/events.out.tfevents.*`).
Each scalar is one observation with the event's step and wall time; a tag named "epoch" or "step"
also sets that counter.
"""

from __future__ import annotations

from pathlib import Path

from zeus.train.collectors.base import CollectorError
from zeus.train.collectors.observation import Observation, make_observations

EVENT_FILE_MARK = "tfevents"  # TensorBoard's own test for an event file name
SCALARS_PLUGIN = "scalars"


def _scalar(value) -> float | None:
    """A summary value's scalar (after TensorBoard's data_compat migration), or None for non-scalars."""
    from tensorboard.util import tensor_util

    if value.metadata.plugin_data.plugin_name != SCALARS_PLUGIN or not value.HasField("tensor"):
        return None
    array = tensor_util.make_ndarray(value.tensor)
    return float(array.item()) if array.size == 1 else None


class TFEventCollector:
    kind = "tfEvent"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.source = str(directory)
        self.files_read = 0
        self.scalars_read = 0
        self._loaders: dict[Path, object] = {}

    def _discover(self) -> None:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

        for path in sorted(self.directory.rglob(f"*{EVENT_FILE_MARK}*")):
            if path not in self._loaders and path.is_file():
                self._loaders[path] = EventFileLoader(str(path))
                self.files_read += 1

    def poll(self) -> list[Observation]:
        if not self.directory.is_dir():
            return []
        try:
            self._discover()
            out: list[Observation] = []
            for path, loader in self._loaders.items():
                prefix = path.parent.relative_to(self.directory).as_posix()
                for event in loader.Load():  # type: ignore[attr-defined]
                    for value in event.summary.value:
                        scalar = _scalar(value)
                        if scalar is None:
                            continue
                        tag = value.tag if prefix == "." else f"{prefix}/{value.tag}"
                        out += make_observations([(tag, scalar)], step=int(event.step), at=float(event.wall_time))
            self.scalars_read += len(out)
            return out
        except OSError as exc:
            raise CollectorError(self.kind, self.source, f"cannot read the event files: {exc}") from None

    def finish(self) -> list[Observation]:
        found = self.poll()
        if not self.directory.is_dir():
            raise CollectorError(
                self.kind, self.source, "the directory was never created (is it the script's log dir?)"
            )
        if self.scalars_read == 0:
            raise CollectorError(
                self.kind,
                self.source,
                f"no scalar events in {self.files_read} event file(s) (file names must contain '{EVENT_FILE_MARK}')",
            )
        return found
