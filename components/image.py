"""The container images the components run in on a cluster, and where a compile finds them.

Two builds of one layout (images/): a CPU image for the steps that only touch the store
(preprocess, bandit, feedback, report) and a CUDA image for train and a cluster trial's pods.
Nobody publishes them: `make push-image IMAGE_REPO=<your registry>/zeus-kfp` builds and pushes
`<repo>:<version>-cpu` and `-cuda` (the version from setup.cfg, the same as zeus_kfp.__version__), and
`zeus-kfp compile --image-repo <repo>` names exactly those tags (`image_tags`; a test compares the
two). So a compiled pipeline only ever names images the user said exist: `compile` refuses to
guess. `--image` / `--train-image` (or ZEUS_KFP_IMAGE / ZEUS_KFP_TRAIN_IMAGE / ZEUS_KFP_IMAGE_REPO,
read when compiling) name them one by one, e.g. a train image of your own built FROM ours or with
zeus-kfp installed into your PyTorch image (docs/kubeflow.md). The images have this package installed, which
is why components need no packages_to_install and skip reinstalling kfp.

The components' own base images (`LOCAL_IMAGE`, `LOCAL_TRAIN_IMAGE`: what `make image` tags without a
registry) only matter to kfp.local, which runs every step in this Python and never pulls them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from zeus_kfp import __version__
from zeus_kfp.errors import FieldError

LOCAL_REPO = "zeus-kfp"  # `make image` without IMAGE_REPO: a local name no cluster can pull
IMAGE_REPO_ENV, IMAGE_ENV, TRAIN_IMAGE_ENV = "ZEUS_KFP_IMAGE_REPO", "ZEUS_KFP_IMAGE", "ZEUS_KFP_TRAIN_IMAGE"

# Where the image keeps the repository's examples/ (the example job's scripts): the compiled
# pipeline's default training command points here, since a path on the compiling machine would
# mean nothing inside the pod. images/Dockerfile must copy examples/ to this folder.
IMAGE_EXAMPLES_DIR = "/opt/zeus-kfp/examples"


def image_tags(repo: str) -> tuple[str, str]:
    """(CPU image, CUDA image) of `repo` as `make image IMAGE_REPO=<repo>` tags them."""
    return f"{repo}:{__version__}-cpu", f"{repo}:{__version__}-cuda"


LOCAL_IMAGE, LOCAL_TRAIN_IMAGE = image_tags(LOCAL_REPO)


@dataclass(frozen=True)
class Images:
    """The images of one compiled pipeline: the store steps', train's, and a cluster trial's pods'."""

    steps: str
    train: str
    launch: str


def resolve_images(
    *,
    image: str | None = None,
    train_image: str | None = None,
    image_repo: str | None = None,
    gpus: int = 1,
    pods_need_cuda: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Images:
    """The images a compile names, from what the user said (options first, then ZEUS_KFP_* variables).

    image_repo gives both tags (image_tags); image / train_image override one each. With only a train
    image, every step runs on it (it has zeus-kfp installed, as it must). A train step with GPUs (and a
    cluster trial's pods, `pods_need_cuda`) needs a CUDA image: the train image or the repo's -cuda tag.
    Nothing given: FieldError naming the options, since the default tags exist on no registry (KFP would
    wait for the image pull forever)."""
    env = os.environ if environ is None else environ
    repo = image_repo or env.get(IMAGE_REPO_ENV) or None
    repo_cpu, repo_cuda = image_tags(repo) if repo else (None, None)
    cpu = image or env.get(IMAGE_ENV) or repo_cpu
    cuda = train_image or env.get(TRAIN_IMAGE_ENV) or repo_cuda
    if cpu is None and cuda is None:
        raise FieldError(
            "image",
            None,
            "the registry you pushed the images to: --image-repo REPO (`make push-image IMAGE_REPO=REPO` pushes "
            f"REPO:{__version__}-cpu and -cuda), or --image / --train-image; no public registry holds zeus-kfp's "
            "images, and a pod whose image cannot be pulled waits forever",
        )
    if cuda is None and (gpus > 0 or pods_need_cuda):
        raise FieldError(
            "train_image",
            None,
            "a CUDA image for the trials' GPUs: --train-image, or --image-repo for its -cuda tag",
        )
    steps = cpu or cuda
    explicit_train = train_image or env.get(TRAIN_IMAGE_ENV)
    train = cuda if gpus > 0 else (explicit_train or steps)  # a CPU train step: the user's image, else the CPU one
    return Images(steps=steps, train=train, launch=cuda or steps)
