"""What each pipeline step does, as plain functions named after their KFP components, each in the module of its
name (gate, preprocess, bandit, train, feedback, report, gpu_power): a component (components/) is a few lines
that call the function of its name (`from zeus_kfp.steps.train import train as step; step(...)`), so the logic
is testable without kfp and never imports it.

The package's attribute of a step's name is its module, never its function: `zeus_kfp.steps.train` is the
module to patch or import by name. What is shared between steps and their callers is exported here.
"""

from zeus_kfp.run_settings import DEFAULT_DISPATCH_TIMEOUT_S, RunSettings, check_dispatch_timeout
from zeus_kfp.steps.abandoned import abandoned_line, fail_interrupted, fail_stale, fail_unfinished
from zeus_kfp.steps.bandit import Choice
from zeus_kfp.steps.gpu_power import MaxPower
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
from zeus_kfp.steps.preprocess import PASS_THROUGH_NOTE, Prepared, StepError, prepare, run_preprocess
from zeus_kfp.steps.request import TrialRequest
from zeus_kfp.steps.summary import summarize
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
    "check_dispatch_timeout",
    "fail_interrupted",
    "fail_stale",
    "fail_unfinished",
    "prepare",
    "run_arguments",
    "run_preprocess",
    "run_settings_from_params",
    "spec_from_params",
    "spec_to_params",
    "summarize",
    "threshold_from_param",
    "threshold_to_param",
]
