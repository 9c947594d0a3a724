"""zeus-kfp: energy-optimal recurring training (Zeus, NSDI'23) as a library.

The library never imports kfp or the layers above it (pipelines/, components/). zeus/cli/ is the
exception by design: it is the command line, the top layer, and imports them only inside its
commands (tests/test_layering.py enforces both)."""

from zeus.job import JobSpec, JobSpecError, TrialRecord, TrialResult, TrialStatus, zeus_cost

__all__ = ["JobSpec", "JobSpecError", "TrialRecord", "TrialResult", "TrialStatus", "zeus_cost"]
__version__ = "0.1.0"
