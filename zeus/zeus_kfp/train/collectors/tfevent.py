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

Metric names follow Katib's TFEvent collector: the job's metric (`accuracy`) is the tag of that
name in the directory and in every subdirectory, and a metric named with a directory
(`train/accuracy`) is the tag in a directory of that name only (Katib's "{{dirname}}/{{metric
name}}"); so name the directory when several hold the tag (`train/`, `test/`), as Katib's docs say.
Other scalars are named by their tag, prefixed with the event file's directory relative to the
collector's (`test/loss`). Unlike Katib, a tag must equal the name, not merely start with it
(Katib's prefix test reads `accuracy_top5` as `accuracy`). Each scalar is one observation at the
event's wall time.

Progress: only the job's metric's own tag carries its events' steps, and a tag named as a counter
(`epoch`, `step`, `global_step`, ...; zeus_kfp.train.collectors.counters), in any directory, sets that
counter (at its event's step). Other tags' observations carry no step: most scripts log `Loss/train`
at the global step and `Accuracy/val` at the epoch index, and one counter fed from both would go
back and forth between the two (a trial charged 4x the work it did). Which axis the metric's tag is on
is read off the other tags, whose steps are never progress themselves: where the metric is logged at a
step below one another tag has already reached, it is on a coarser axis than theirs, the epoch index, and
its steps are the epoch counter from then on (`Accuracy/val` at 1, 2, 3 while `Loss/train` is at 782,
1564, ...); else they are the step counter (logged at the global step, or the only tag there is).

Event files already in the directory when the trial starts are not the trial's (`claim`): a
SummaryWriter always writes a new file, so an earlier trial's files are left where they are and
never read. `keep` copies the files that were read into the trial's log.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from zeus_kfp.train.collectors.collector import CollectorError
from zeus_kfp.train.collectors.counters import counter_kind
from zeus_kfp.train.collectors.observation import Observation, make_observations

EVENT_FILE_MARK = "tfevents"  # TensorBoard's own test for an event file name
SCALARS_PLUGIN = "scalars"
KEPT_DIR = "collected/tfevents"  # where `keep` copies the event files in the trial's log


def metric_name_of(relative_dir: str, tag: str, metric_name: str) -> str:
    """The name an observation of `tag` in `relative_dir` (POSIX, "." for the collector's own) gets
    (the module docstring's rules)."""
    if counter_kind(tag) is not None or ("/" not in metric_name and tag == metric_name):
        return tag
    name = tag if relative_dir == "." else f"{relative_dir}/{tag}"
    if "/" in metric_name and (name == metric_name or name.endswith("/" + metric_name)):
        return metric_name
    return name


def _scalar(value) -> float | None:
    """A summary value's scalar (after TensorBoard's data_compat migration), or None for non-scalars."""
    from tensorboard.util import tensor_util

    if value.metadata.plugin_data.plugin_name != SCALARS_PLUGIN or not value.HasField("tensor"):
        return None
    array = tensor_util.make_ndarray(value.tensor)
    return float(array.item()) if array.size == 1 else None


class TFEventCollector:
    kind = "tfEvent"

    def __init__(self, directory: Path, metric_name: str = "") -> None:
        self.directory = directory
        self.metric_name = metric_name
        self.source = str(directory)
        self.files_read = 0
        self.scalars_read = 0
        self._loaders: dict[Path, object] = {}
        self._earlier: set[Path] = set()
        self._others_step: int | None = None  # the highest step another tag has reached
        self.metric_on_epochs = False  # the metric's tag is logged at the epoch index (module docstring)

    def _event_files(self) -> list[Path]:
        return [p for p in sorted(self.directory.rglob(f"*{EVENT_FILE_MARK}*")) if p.is_file()]

    def claim(self, aside: Path) -> list[str]:
        """Remember the event files already there: they are an earlier process's, never read."""
        self._earlier = set(self._event_files()) if self.directory.is_dir() else set()
        if not self._earlier:
            return []
        return [f"{len(self._earlier)} event file(s) in {self.directory} existed before the trial: not read"]

    def keep(self, log_dir: Path) -> None:
        """Copies of the event files read, in the trial's log, unless they are written there already."""
        if self.directory.resolve().is_relative_to(log_dir.resolve()):
            return
        for path in self._loaders:
            target = log_dir / KEPT_DIR / path.relative_to(self.directory)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)

    def _discover(self) -> None:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

        for path in self._event_files():
            if path not in self._loaders and path not in self._earlier:
                self._loaders[path] = EventFileLoader(str(path))
                self.files_read += 1

    def poll(self) -> list[Observation]:
        if not self.directory.is_dir():
            return []
        try:
            self._discover()
            events = []
            for path, loader in self._loaders.items():
                relative = path.parent.relative_to(self.directory).as_posix()
                for event in loader.Load():  # type: ignore[attr-defined]
                    for value in event.summary.value:
                        scalar = _scalar(value)
                        if scalar is not None:
                            events.append((float(event.wall_time), int(event.step), relative, value.tag, scalar))
            # In the order the script wrote them across its writers (train/, validation/ are two files), as far
            # as this read sees them: the stop rules, the cost replay and the metric's axis read them in order.
            out: list[Observation] = []
            for wall_time, step, relative, tag, scalar in sorted(events, key=lambda e: (e[0], e[1])):
                out += self._observe(metric_name_of(relative, tag, self.metric_name), tag, scalar, step, wall_time)
            self.scalars_read += len(out)
            return out
        except OSError as exc:
            raise CollectorError(self.kind, self.source, f"cannot read the event files: {exc}") from None

    def _observe(self, name: str, tag: str, scalar: float, step: int, wall_time: float) -> list[Observation]:
        """One scalar event's observations: the metric's tag carries its step or epoch, a counter tag sets its
        counter, other tags carry none (the module docstring's "Progress")."""
        if name == self.metric_name:
            if self._others_step is not None and step < self._others_step:
                self.metric_on_epochs = True  # a coarser axis than the other tags': the epoch index
            if self.metric_on_epochs:
                return make_observations([(name, scalar)], epoch=step, at=wall_time)
            return make_observations([(name, scalar)], step=step, at=wall_time)
        if counter_kind(tag) is not None:
            return make_observations([(name, scalar)], step=step, at=wall_time)
        self._others_step = step if self._others_step is None else max(self._others_step, step)
        return make_observations([(name, scalar)], at=wall_time)

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
