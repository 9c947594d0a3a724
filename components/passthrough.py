"""passthrough: the Else branch of a guarded attempt. KFP v2 has no recursion, so the retry loop
is N unrolled attempts; once one reached the target, the later ones only hand its result on
(dsl.OneOf needs a producer in every branch)."""

from kfp import dsl

from components.image import ZEUS_KFP_IMAGE


@dsl.component(base_image=ZEUS_KFP_IMAGE, install_kfp_package=False)
def passthrough(reached: bool) -> bool:
    """Returns its input unchanged."""
    return reached
