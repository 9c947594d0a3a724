"""The zeus-kfp KFP components: thin lightweight Python components whose bodies import zeus
and call one function of zeus.steps. They run in the project's image on a cluster and under
kfp.local.SubprocessRunner here; `components_for(image)` rebuilds them on another image.
"""

from __future__ import annotations

from dataclasses import dataclass

from kfp import dsl
from kfp.dsl.python_component import PythonComponent

from components.artifacts import PowerProfile
from components.bandit import bandit
from components.feedback import feedback
from components.image import DEFAULT_IMAGE, ZEUS_KFP_IMAGE
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


__all__ = [
    "DEFAULT_COMPONENTS",
    "DEFAULT_IMAGE",
    "ZEUS_KFP_IMAGE",
    "PowerProfile",
    "ZeusComponents",
    "bandit",
    "components_for",
    "feedback",
    "passthrough",
    "preprocess",
    "report",
    "train",
]
