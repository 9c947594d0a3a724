"""What one recurrence did, read back from the store (zeus.summaries): what `zeus-kfp run` prints and
what `run_local` returns to notebooks. Totals come from zeus.report so every view agrees."""

from __future__ import annotations

import math

import pandas as pd

from zeus.report import per_recurrence
from zeus.summaries import RecurrenceSummary, TrialFiles, TrialSummary


def _opt(value) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _text(value) -> str:
    return "" if value is None or pd.isna(value) else str(value)


def summarize(
    trials: pd.DataFrame,
    job_id: str,
    recurrence_id: str,
    wall_s: float = math.nan,
    files: tuple[TrialFiles, ...] = (),
) -> RecurrenceSummary:
    """The summary of `recurrence_id` from a store trials frame (zeus.store column names); `files` where its
    trials' logs and models went."""
    mine = trials[trials["recurrence_id"].astype(str) == str(recurrence_id)].sort_values("attempt")
    if mine.empty:
        raise LookupError(f"job {job_id!r} has no trials for recurrence {recurrence_id!r} in the store")
    rows = tuple(
        TrialSummary(
            recurrence=int(r.recurrence),
            attempt=int(r.attempt),
            trial=int(r.trial),
            batch_size=int(r.batch_size),
            status=str(r.status),
            power_limit_w=_opt(r.power_limit_w),
            cost=_opt(r.cost),
            energy_j=_opt(r.energy_j),
            time_s=_opt(r.time_s),
            metric=_opt(r.metric),
            simulated=bool(r.simulated),
            reason=_text(r.reason),
            source=_text(r.source),
            stage=_text(r.stage),
            cost_threshold=_opt(r.cost_threshold),
        )
        for r in mine.itertuples(index=False)
    )
    totals = per_recurrence(mine)
    total = totals.iloc[0] if not totals.empty else None
    return RecurrenceSummary(
        job_id=job_id,
        recurrence=int(mine["recurrence"].iloc[0]),
        recurrence_id=str(recurrence_id),
        trials=rows,
        reached=any(t.reached for t in rows),
        cost=float(total["cost"]) if total is not None else math.nan,
        energy_j=float(total["energy_j"]) if total is not None else math.nan,
        time_s=float(total["time_s"]) if total is not None else math.nan,
        simulated=any(t.simulated for t in rows),
        wall_s=wall_s,
        files=files,
    )
