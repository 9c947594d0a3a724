"""The lines steps print for `zeus-kfp run` to read back (pipelines.local.StepWatcher), which the KFP UI's
step logs show as they are: each a `StepLine`, whose prefix is the contract between the step that writes
it and the reader, so neither spells it alone.

Only what no typed source tells the reader in time: the recurrence's number (before any trial exists),
where a trial's log and model went (paths on this machine that no store holds) and the lost trials a
bandit step recorded failed. The bandit's decision is not among them: the reader takes it from the store's
dispatch record (zeus_kfp.store), typed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StepLine:
    """One kind of line: `prefix`, then its value."""

    prefix: str

    def say(self, value: object) -> str:
        """The line a step prints."""
        return f"{self.prefix}{value}"

    def read(self, line: str) -> str | None:
        """The value of `line` if it is one of these (ANSI colours and indentation already stripped), else None."""
        return line[len(self.prefix) :] if line.startswith(self.prefix) else None


GATE = StepLine("gate: ")  # the recurrence gate's outcome (zeus_kfp.steps.gate.outcome_line)
RECURRENCE = StepLine("preprocess: recurrence ")  # "<number> (<recurrence id>)": the recurrence's number in the job
TRIAL_LOG = StepLine("train: trial log: ")  # where the trial's log went
MODEL = StepLine("train: model: ")  # where its model went, or NO_MODEL and why
NO_MODEL = "none"
LOST_TRIAL = StepLine(
    "bandit: lost "
)  # a trial the bandit step recorded failed (zeus_kfp.steps.abandoned.abandoned_line)
