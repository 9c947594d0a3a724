"""The container images the components run in on a cluster, and their default tags.

Two builds of one layout (images/): a CPU image for the steps that only touch the store
(preprocess, bandit, feedback, report) and a CUDA image for train. The default tags are exactly
what `make image` builds (`<repo>:<version>-cpu` and `<repo>:<version>-cuda`, the version from
setup.cfg, the same as zeus.__version__); a test compares the two. Override them at compile time
with ZEUS_KFP_IMAGE / ZEUS_KFP_TRAIN_IMAGE (read when this module is imported) or per compile with
`zeus-kfp compile --image / --train-image`. The images have this package installed, which is why
components need no packages_to_install and skip reinstalling kfp.
"""

import os

from zeus import __version__

IMAGE_REPO = "ghcr.io/zeus-kfp/zeus-kfp"
DEFAULT_IMAGE = f"{IMAGE_REPO}:{__version__}-cpu"
DEFAULT_TRAIN_IMAGE = f"{IMAGE_REPO}:{__version__}-cuda"
# The CPU image: every step but train, and train too when the pipeline is compiled with --gpus 0.
ZEUS_KFP_IMAGE = os.environ.get("ZEUS_KFP_IMAGE") or DEFAULT_IMAGE
# The CUDA image for train when it requests GPUs.
ZEUS_KFP_TRAIN_IMAGE = os.environ.get("ZEUS_KFP_TRAIN_IMAGE") or DEFAULT_TRAIN_IMAGE

# Where the image keeps the repository's examples/ (the example job's scripts): the compiled
# pipeline's default training command points here, since a path on the compiling machine would
# mean nothing inside the pod. images/Dockerfile must copy examples/ to this folder.
IMAGE_EXAMPLES_DIR = "/opt/zeus-kfp/examples"
