"""What one recurrence did, read back from the store (zeus_kfp.summaries): what `zeus-kfp run` prints and
what `run_local` returns to notebooks. Totals are zeus_kfp.cost.Figures.of its trials, as the simulator sums them."""

from __future__ import annotations

import math

import pandas as pd

from zeus_kfp.cost import Figures
from zeus_kfp.summaries import RecurrenceSummary, TrialFiles
from zeus_kfp.trials import trials_of


def summarize(
    trials: pd.DataFrame,
    job_id: str,
    recurrence_id: str,
    wall_s: float = math.nan,
    files: tuple[TrialFiles, ...] = (),
) -> RecurrenceSummary:
    """The summary of `recurrence_id` from a store trials frame (zeus_kfp.store column names); `files` where its
    trials' logs and models went."""
    mine = trials[trials["recurrence_id"].astype(str) == str(recurrence_id)].sort_values("attempt")
    if mine.empty:
        raise LookupError(f"job {job_id!r} has no trials for recurrence {recurrence_id!r} in the store")
    rows = tuple(trials_of(mine))
    finished = [t for t in rows if t.finished]
    total = Figures.of(finished) if finished else Figures(math.nan, math.nan, math.nan)
    return RecurrenceSummary(
        job_id=job_id,
        recurrence=int(mine["recurrence"].iloc[0]),
        recurrence_id=str(recurrence_id),
        trials=rows,
        reached=any(t.reached for t in rows),
        **total.to_dict(),
        simulated=any(t.simulated for t in rows),
        wall_s=wall_s,
        files=files,
    )
