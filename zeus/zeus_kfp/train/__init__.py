"""Training integrations: ZeusDataLoader for Zeus-aware torch scripts, the runner for any script."""

from zeus_kfp.train.env import TrialEnv, TrialEnvError
from zeus_kfp.train.example import example_command, example_spec, make_dataset
from zeus_kfp.train.runner import run_trial
from zeus_kfp.train.session import ZeusTrial

__all__ = [
    "TrialEnv",
    "TrialEnvError",
    "ZeusDataLoader",
    "ZeusTrial",
    "example_command",
    "example_spec",
    "make_dataset",
    "run_trial",
]


def __getattr__(name: str):  # torch is heavy: import the loader only when asked for
    if name == "ZeusDataLoader":
        from zeus_kfp.train.dataloader import ZeusDataLoader

        return ZeusDataLoader
    raise AttributeError(name)
