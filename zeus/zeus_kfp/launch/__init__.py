"""Launching a trial: on the step's machine (one process, or torchrun) or as a Kubeflow training job.

zeus_kfp.launch.config says where a trial runs; zeus_kfp.launch.torchrun runs ranks and names the one that
failed; zeus_kfp.launch.manifests, kube and cluster create, watch and clean up TrainJobs (Kubeflow
Trainer) and PyTorchJobs (Training Operator) through the kubernetes client, imported only there.
"""

from zeus_kfp.launch.config import CLUSTER_LAUNCHERS, DEFAULT_RUNTIME, LAUNCHERS, LaunchConfig, LaunchError

__all__ = ["CLUSTER_LAUNCHERS", "DEFAULT_RUNTIME", "LAUNCHERS", "LaunchConfig", "LaunchError"]
