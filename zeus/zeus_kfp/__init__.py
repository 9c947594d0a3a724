"""zeus-kfp: energy-optimal recurring training (Zeus, NSDI'23) as a library. Never imports kfp."""

from zeus_kfp.cost import CostModel, zeus_cost
from zeus_kfp.job import JobSpec, JobSpecError, TrialResult, TrialStatus
from zeus_kfp.trials import Trial

__all__ = ["CostModel", "JobSpec", "JobSpecError", "Trial", "TrialResult", "TrialStatus", "zeus_cost"]
__version__ = "0.1.0"
