"""The container image every component runs in on a cluster.

One constant, overridable at compile time by the ZEUS_KFP_IMAGE environment variable (read
when this module is imported) or per compile with `zeus-kfp compile --image`. The image is
built from images/Dockerfile(.cuda) and has this package installed, which is why components
need no packages_to_install and skip reinstalling kfp.
"""

import os

DEFAULT_IMAGE = "ghcr.io/zeus-kfp/zeus-kfp:0.1.0"
ZEUS_KFP_IMAGE = os.environ.get("ZEUS_KFP_IMAGE", DEFAULT_IMAGE)

# Where the image keeps the repository's examples/ (the example job's scripts): the compiled
# pipeline's default training command points here, since a path on the compiling machine would
# mean nothing inside the pod. images/Dockerfile must copy examples/ to this folder.
IMAGE_EXAMPLES_DIR = "/opt/zeus-kfp/examples"
