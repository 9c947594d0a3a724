"""Which `begin` entries open a recurrence: the recurrence gate's rule, decided from the log alone.

The rule is docs/STORE.md, "The settled view" (rule 2), and a gated begin's fields its "Entry kinds". Why a
rule of the log: whether a begin opens a recurrence is a pure function of the log before its slot and of the
entry itself, so every reader agrees, and two schedules and a manual submit racing to start one job cannot
exceed its cap: the slot order is agreed (log.py), and the begin that would exceed the cap at its slot is
skipped, wherever its writer thought it stood. No conditional write, no lock. The begin carries its writer's
`at` (and its period, cap, attempts and timeout), so the rule reads no clock and no setting of its own.

The same rule settles the job's spec. A gated begin carries the spec its run presents; one that differs from the
spec in force takes its place ("spec replaced": a new epoch of the job, whose history starts empty) only while no
trial of the spec in force has reached the target before its slot ("spec settled" otherwise) and no recurrence
runs ("spec in use"). So two first runs with different specs still settle on one (the second finds the first
running), a typo'd first run's spec gives way to the fixed one, and no reached result is ever set aside: every
reader decides each of these from the log before the begin's slot, as it decides the cap.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from zeus_kfp.job import TrialStatus
from zeus_kfp.run_settings import NO_DRIFT

SPEC_REPLACED, SPEC_SETTLED, SPEC_IN_USE = "spec replaced", "spec settled", "spec in use"
OPENED_BY = ("first", "time", "drift", "forced", "plain", SPEC_REPLACED)  # why a begin opened a recurrence
SKIPPED_BY = ("not due", "no drift", "no free slot", SPEC_SETTLED, SPEC_IN_USE)  # why a gated begin did not
DRIFT_COLUMNS = ["drift_detector", "drift_stat", "drift_threshold"]
PRESENTED = ("spec", "zeus_aware", "metric_pattern", "metrics_collector", "keep")  # GateRequest's, beside the gate's
# A trial that reached the target or failed ends its recurrence, as the pipeline's feedback step decides
# (zeus_kfp.steps.feedback.ends_recurrence): the store imports no step, so the rule is stated here too.
ENDING_STATUSES = pa.array([TrialStatus.REACHED.value, TrialStatus.FAILED.value])
_NEVER = np.iinfo(np.int64).max


@dataclass(frozen=True)
class GateRequest:
    """What a gated begin carries (entries.GATE_FIELDS): the run's period and cap, the job's attempts, the run's
    dispatch timeout, whether it was forced, and the drift detector's statistic against this threshold (None: none
    ran). Period, cap, detector and timeout are run settings (zeus_kfp.run_settings), which each begin records."""

    period_s: float
    max_running: int
    max_attempts: int
    timeout_s: float
    forced: bool = False
    drift_detector: str = NO_DRIFT
    drift_stat: float | None = None
    drift_threshold: float | None = None
    # What the run presents beside its settings (None: it did not say, as a begin written before them): the job's
    # spec (spec_text), which the rule above settles, and how its script reports, which the job remembers.
    spec: str | None = None
    zeus_aware: bool | None = None
    metric_pattern: str | None = None
    metrics_collector: str | None = None
    keep: str | None = None

    def __post_init__(self) -> None:
        for name in ("period_s", "timeout_s", "drift_stat", "drift_threshold"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and _finite(value)):
                raise ValueError(f"invalid {name}={value!r}: allowed a finite number")

    def entry(self) -> dict:
        """The begin's fields; what the run did not present is left out (as a begin written before them)."""
        return {k: v for k, v in asdict(self).items() if v is not None or k not in PRESENTED}


def spec_text(spec: dict) -> str:
    """A spec's fields (JobSpec.to_dict) as the canonical JSON the rule compares: keys sorted, no spaces."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond a float's range: no float column holds it
        return False


@dataclass(frozen=True)
class GateOutcome:
    """What the gate's rule made of one begin: `opened` a recurrence (numbered `recurrence`) or not, and `why`
    (one of OPENED_BY or SKIPPED_BY); with the drift statistic its request carried (None: no detector ran)."""

    recurrence_id: str
    opened: bool
    why: str
    recurrence: int | None
    drift_detector: str
    drift_stat: float | None
    drift_threshold: float | None


class _Groups:
    """Rows grouped by recurrence code, each group in slot order: `slots[code]`, `values[code]`."""

    def __init__(self, codes: np.ndarray, slots: np.ndarray, values: np.ndarray) -> None:
        order = np.lexsort((slots, codes))
        self.codes, self.slots, self.values = codes[order], slots[order], values[order]

    def before(self, code: int, slot: int) -> np.ndarray:
        """The values of `code`'s rows in slots before `slot`."""
        lo, hi = np.searchsorted(self.codes, [code, code + 1])
        cut = lo + np.searchsorted(self.slots[lo:hi], slot)
        return self.values[lo:cut]


@dataclass(frozen=True)
class Outcomes:
    """What the rule made of the first begins (slot order): `opened`, `why`, each begin's `epoch` (the index in
    `specs` of the spec in force when it opened; -1 for a skipped one), and `specs`, the job's specs in the order
    they were in force (the first: the spec register's)."""

    opened: np.ndarray
    why: list[str]
    epoch: np.ndarray
    specs: tuple[str, ...]


def gate_outcomes(
    rows: pa.Table,
    rid: np.ndarray,
    slot: np.ndarray,
    at: np.ndarray,
    begun: np.ndarray,
    finished: np.ndarray,
    first_spec: str | None,
) -> Outcomes:
    """For the first begins `begun` (row numbers, slot order): whether each opened a recurrence, why, and under
    which spec. `rid`: each row's recurrence code (-1: none); `finished`: the rows of each trial's first result;
    `first_spec`: the spec register's (spec_text); None where it cannot be read (a damaged job), and then the
    first spec a begin presents stands for it."""
    why = ["plain"] * len(begun)
    opened = np.ones(len(begun), dtype=bool)
    epoch = np.zeros(len(begun), dtype=np.int64)
    specs = [first_spec]
    requests = rows.select(["max_running", "period_s", "max_attempts", "timeout_s", "forced"]).take(begun)
    gated = pc.is_valid(requests.column("max_running")).to_numpy(zero_copy_only=False)
    if not gated.any():
        return Outcomes(opened, why, epoch, tuple(specs))
    presented = rows.column("spec").take(begun).to_pylist()
    reached = finished[pc.equal(rows.column("status").take(finished), TrialStatus.REACHED.value).to_numpy(False)]
    epoch_of: dict[int, int] = {}  # recurrence code -> the epoch it opened in
    detectors = rows.column("drift_detector").take(begun).to_pylist()
    stats = rows.column("drift_stat").take(begun).to_pylist()
    thresholds = rows.column("drift_threshold").take(begun).to_pylist()
    request = requests.to_pylist()
    ending = finished[pc.is_in(rows.column("status").take(finished), value_set=ENDING_STATUSES).to_numpy(False)]
    end_rows = np.flatnonzero(pc.equal(rows.column("kind"), "end").to_numpy(zero_copy_only=False))
    ending = np.concatenate([ending, end_rows])
    end_slot = np.full(int(rid.max(initial=0)) + 2, _NEVER, dtype=np.int64)
    np.minimum.at(end_slot, rid[ending], slot[ending])
    results = _Groups(rid[finished], slot[finished], slot[finished])
    active = np.flatnonzero(rid >= 0)
    activity = _Groups(rid[active], slot[active], at[active])

    def ended(code: int, s: int, a: int, req: dict) -> bool:
        if end_slot[code] < s or len(results.before(code, s)) >= req["max_attempts"]:
            return True
        return int(activity.before(code, s).max(initial=0)) < a - req["timeout_s"] * 1e6

    def settled(s: int) -> bool:
        """Whether a trial of a recurrence opened under the spec in force reached the target before slot `s`."""
        return any(epoch_of.get(int(rid[r])) == len(specs) - 1 for r in reached[slot[reached] < s])

    running: list[int] = []
    last_at: int | None = None
    for i, row in enumerate(begun.tolist()):
        if gated[i]:
            req, s, a = request[i], int(slot[row]), int(at[row])
            running = [code for code in running if not ended(code, s, a, req)]
            spec = presented[i]
            if spec is not None and spec != specs[-1]:  # writers write spec_text; compare another's as the rule does
                spec = spec_text(json.loads(spec))
            if specs == [None]:
                specs[0] = spec
            if spec is not None and spec != specs[-1]:
                if settled(s) or running:
                    opened[i], why[i], epoch[i] = False, SPEC_SETTLED if settled(s) else SPEC_IN_USE, -1
                    continue
                specs.append(spec)  # a new epoch: the changed spec is the job's from here on
                why[i] = SPEC_REPLACED
                running.append(int(rid[row]))
                last_at = int(at[row])
                epoch[i] = epoch_of[int(rid[row])] = len(specs) - 1
                continue
            detector = detectors[i] or NO_DRIFT
            drifted = detector != NO_DRIFT and stats[i] is not None and stats[i] > thresholds[i]
            first = last_at is None
            # period 0: due whatever the clocks say (racing writers stamp `at` before they get a slot, so a later
            # slot may carry an earlier time)
            time_due = first or req["period_s"] == 0 or a - last_at >= req["period_s"] * 1e6
            if not (time_due or drifted or req["forced"]):
                opened[i], why[i], epoch[i] = False, "not due" if detector == NO_DRIFT else "no drift", -1
                continue
            if 0 < req["max_running"] <= len(running):
                opened[i], why[i], epoch[i] = False, "no free slot", -1
                continue
            why[i] = "first" if first else "drift" if drifted else "time" if time_due else "forced"
        running.append(int(rid[row]))
        last_at = int(at[row])
        epoch[i] = epoch_of[int(rid[row])] = len(specs) - 1
    return Outcomes(opened, why, epoch, tuple(specs))


def outcomes_table(requests: pa.Table, outcomes: Outcomes) -> pa.Table:
    """Every first begin (`requests`, slot order) with its outcome, the number of the recurrence it opened and
    the epoch (the job's spec) it opened under."""
    opened = outcomes.opened
    number = np.where(opened, np.cumsum(opened), 0)
    return requests.append_column("opened", pa.array(opened))\
        .append_column("why", pa.array(outcomes.why, pa.string()))\
        .append_column("recurrence", pa.array(number, pa.int64(), mask=~opened))\
        .append_column("epoch", pa.array(outcomes.epoch, pa.int64(), mask=~opened))  # fmt: skip


def outcome_of(table: pa.Table, i: int) -> GateOutcome:
    row = {name: table.column(name)[i].as_py() for name in table.column_names}
    return GateOutcome(
        recurrence_id=row["recurrence_id"],
        opened=row["opened"],
        why=row["why"],
        recurrence=row["recurrence"],
        drift_detector=row["drift_detector"] or NO_DRIFT,
        drift_stat=row["drift_stat"],
        drift_threshold=row["drift_threshold"],
    )
