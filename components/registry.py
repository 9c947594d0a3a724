"""All the pipeline's components in one place, and the same components on another image."""

from __future__ import annotations

from dataclasses import dataclass

from kfp import dsl
from kfp.dsl.python_component import PythonComponent

from components.bandit import bandit
from components.feedback import feedback
from components.image import ZEUS_KFP_IMAGE
from components.passthrough import passthrough
from components.preprocess import preprocess
from components.report import report
from components.train import train


@dataclass(frozen=True)
class ZeusComponents:
    """The pipeline's components, all on one image."""

    preprocess: PythonComponent
    bandit: PythonComponent
    train: PythonComponent
    feedback: PythonComponent
    passthrough: PythonComponent
    report: PythonComponent


DEFAULT_COMPONENTS = ZeusComponents(preprocess, bandit, train, feedback, passthrough, report)


def components_for(image: str | None = None) -> ZeusComponents:
    """The components on `image` (None: ZEUS_KFP_IMAGE). Same functions, only the base image differs."""
    if not image or image == ZEUS_KFP_IMAGE:
        return DEFAULT_COMPONENTS
    rebuilt = {
        name: dsl.component(getattr(DEFAULT_COMPONENTS, name).python_func, base_image=image, install_kfp_package=False)
        for name in ZeusComponents.__dataclass_fields__
    }
    return ZeusComponents(**rebuilt)
