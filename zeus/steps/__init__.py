"""What each pipeline step does, as plain functions named after their KFP components, each in the module of its
name (gate, preprocess, bandit, train, feedback, report, gpu_power): a component (components/) is a few lines
that call the function of its name, so the logic is testable without kfp and never imports it.

Here the package's attribute of a step's name is its function (`steps.train(...)`, as the components call
it), not its module: reach a module as `from zeus_kfp.steps.train import ...` or by its dotted name
(importlib, sys.modules), never `import zeus_kfp.steps.train as m` or a "zeus_kfp.steps.train.x" patch target,
which resolve to the function.
"""

from zeus_kfp.run_settings import DEFAULT_DISPATCH_TIMEOUT_S, RunSettings, check_dispatch_timeout
from zeus_kfp.steps.abandoned import abandoned_line, fail_interrupted, fail_stale, fail_unfinished
from zeus_kfp.steps.bandit import Choice, bandit
from zeus_kfp.steps.feedback import feedback
from zeus_kfp.steps.gate import gate
from zeus_kfp.steps.gpu_power import MaxPower, gpu_power
from zeus_kfp.steps.params import (
    BETA_DISABLED,
    NO_THRESHOLD,
    PROFILE_KIND,
    PYTHON_TOKEN,
    run_arguments,
    run_settings_from_params,
    spec_from_params,
    spec_to_params,
    threshold_from_param,
    threshold_to_param,
)
from zeus_kfp.steps.preprocess import PASS_THROUGH_NOTE, Prepared, StepError, prepare, preprocess, run_preprocess
from zeus_kfp.steps.report import report
from zeus_kfp.steps.request import TrialRequest
from zeus_kfp.steps.summary import summarize
from zeus_kfp.steps.train import train
from zeus_kfp.summaries import RecurrenceSummary

__all__ = [
    "BETA_DISABLED",
    "DEFAULT_DISPATCH_TIMEOUT_S",
    "NO_THRESHOLD",
    "PASS_THROUGH_NOTE",
    "PROFILE_KIND",
    "PYTHON_TOKEN",
    "Choice",
    "MaxPower",
    "Prepared",
    "RecurrenceSummary",
    "RunSettings",
    "StepError",
    "TrialRequest",
    "abandoned_line",
    "bandit",
    "check_dispatch_timeout",
    "fail_interrupted",
    "fail_stale",
    "fail_unfinished",
    "feedback",
    "gate",
    "gpu_power",
    "prepare",
    "preprocess",
    "report",
    "run_arguments",
    "run_preprocess",
    "run_settings_from_params",
    "spec_from_params",
    "spec_to_params",
    "summarize",
    "threshold_from_param",
    "threshold_to_param",
    "train",
]
