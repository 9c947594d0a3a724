"""All the pipeline's components in one place: the same components on other images, and under
another name (the name a task gets in the compiled pipeline and the KFP UI)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kfp import dsl
from kfp.dsl.python_component import PythonComponent

from zeus_kfp.components.bandit import bandit
from zeus_kfp.components.feedback import feedback
from zeus_kfp.components.gate import gate
from zeus_kfp.components.gpu_power import gpu_power
from zeus_kfp.components.image import LOCAL_IMAGE, LOCAL_TRAIN_IMAGE
from zeus_kfp.components.preprocess import preprocess
from zeus_kfp.components.report import report
from zeus_kfp.components.train import train


@dataclass(frozen=True)
class ZeusComponents:
    """The pipeline's components: train and gpu-power on the train image, the store steps (the gate first) on
    the CPU image."""

    gate: PythonComponent
    preprocess: PythonComponent
    bandit: PythonComponent
    train: PythonComponent
    feedback: PythonComponent
    report: PythonComponent
    gpu_power: PythonComponent


DEFAULT_COMPONENTS = ZeusComponents(gate, preprocess, bandit, train, feedback, report, gpu_power)
STEP_NAMES = tuple(ZeusComponents.__dataclass_fields__)


def _on_image(component: PythonComponent, image: str) -> PythonComponent:
    if component.component_spec.implementation.container.image == image:
        return component
    return dsl.component(component.python_func, base_image=image, install_kfp_package=False)


def components_for(
    image: str | None = None, train_image: str | None = None, gpu_image: str | None = None
) -> ZeusComponents:
    """The components on `image` (the store steps; None: LOCAL_IMAGE) with train on `train_image`
    (None: LOCAL_TRAIN_IMAGE) and gpu-power on `gpu_image`, the image of the trials' GPUs (None: train's).
    Same functions, only the base image differs."""
    image = image or LOCAL_IMAGE
    train_image = train_image or LOCAL_TRAIN_IMAGE
    on = {"train": train_image, "gpu_power": gpu_image or train_image}
    return ZeusComponents(
        **{name: _on_image(getattr(DEFAULT_COMPONENTS, name), on.get(name, image)) for name in STEP_NAMES}
    )


def renamed(component: PythonComponent, name: str) -> PythonComponent:
    """The same component under another name. KFP names a task after its component (made unique
    with -2, -3, ...), so this is how a task gets a readable name ("attempt-2-train") without
    set_display_name, which breaks producer lookups on KFP backends up to 2.5 (kubeflow/pipelines
    #11173). Only the name changes: the executor still runs the same Python function."""
    spec = dataclasses.replace(component.component_spec, name=name)
    return PythonComponent(component_spec=spec, python_func=component.python_func)
