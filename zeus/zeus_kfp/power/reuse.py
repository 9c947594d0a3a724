"""When a trial reuses a stored power profile instead of profiling again: the one rule.

Zeus profiles a batch size once and reuses that profile for later trials at the same size
(its JIT power-limit optimizer keeps the result per job and batch size). Profiling is not free:
the first epoch runs at every power limit, most of them not the best. So a trial at a batch size
whose profile the store already holds trains at that profile's optimum from its first step.
A profile goes stale as hardware and software change: it is measured again once it is
`reprofile_after` recurrences old (0: never), or when a run asks for it (`force`).

The bandit step (from the store's profiles table) and the simulator (from the profiles its own
trials produced) both decide through `ProfileBook.to_reuse`, so they agree on which trials profile.
What the trial does with the profile it is handed is the profiler's (zeus_kfp.power.profiler): a
complete one (zeus_kfp.power.search has nothing left to measure) is final, and the trial trains at its
choice and stores none of its own: the stored profile stays the measurement, with the recurrence it was
measured in, which is what its age is counted from. An unfinished one (an earlier trial ended mid-search)
is continued: the trial measures the limits still missing and stores the grown profile as its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from zeus_kfp.profiles import PowerProfile


@dataclass
class ProfileBook:
    """The latest usable profile per batch size."""

    latest: dict[int, PowerProfile] = field(default_factory=dict)

    @classmethod
    def from_frame(cls, profiles: pd.DataFrame) -> ProfileBook:
        """From the store's profiles table (zeus_kfp.store: batch_size, recurrence, trial and PROFILE_COLUMNS).

        Only each batch size's latest usable profile is built (what `record` would keep): the bandit step reads
        this every attempt, and building every stored profile through pandas cost 3.5 ms each, 7 s a step at
        2,000 profiles: benchmarks/profile_book.py."""
        book = cls()
        if profiles.empty:
            return book
        usable = PowerProfile.of(profiles).train_rows()  # a valid training row, row by row
        trials = profiles.loc[usable].groupby("batch_size")["trial"].max()
        for batch_size, trial in trials.items():
            rows = profiles[(profiles["batch_size"] == batch_size) & (profiles["trial"] == trial)]
            recurrence = int(rows["recurrence"].iloc[0])
            book.record(PowerProfile.of(rows, batch_size=int(batch_size), recurrence=recurrence, trial=int(trial)))
        return book

    def record(self, profile: PowerProfile) -> None:
        """Keep `profile` if it is usable and newer (by trial number) than the one held for its size."""
        held = self.latest.get(profile.batch_size)
        if profile.is_usable() and (held is None or profile.trial > held.trial):
            self.latest[profile.batch_size] = profile

    def to_reuse(
        self, batch_size: int, recurrence: int, *, reprofile_after: int, force: bool = False
    ) -> PowerProfile | None:
        """The profile a trial of `recurrence` at `batch_size` reuses, or None: it profiles."""
        held = self.latest.get(batch_size)
        if held is None or force:
            return None
        if reprofile_after > 0 and recurrence - held.recurrence >= reprofile_after:
            return None
        return held
