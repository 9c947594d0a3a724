"""zeus-kfp: energy-optimal recurring training (Zeus, NSDI'23) as a library. Never imports kfp."""

from zeus.cost import CostModel, zeus_cost
from zeus.job import JobSpec, JobSpecError, TrialResult, TrialStatus
from zeus.trials import Trial

__all__ = ["CostModel", "JobSpec", "JobSpecError", "Trial", "TrialResult", "TrialStatus", "zeus_cost"]
__version__ = "0.1.0"
