# Two entry points (README Quickstart): `make run` and `make test`. Both set up .venv from scratch.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# The component images (images/README.md). Nobody publishes them: push them to your registry with
# `make push-image IMAGE_REPO=registry.example.com/ml/zeus-kfp`, then `zeus-kfp compile --image-repo` the same
# repo names exactly these tags (components/image.py; tests/ux/test_images.py compares them with `make -n`).
IMAGE_REPO ?= zeus-kfp
VERSION    := $(shell sed -n 's/^version *= *//p' setup.cfg)
IMAGE_CPU  := $(IMAGE_REPO):$(VERSION)-cpu
IMAGE_CUDA := $(IMAGE_REPO):$(VERSION)-cuda

.PHONY: setup run test lint clean image push-image wheel

# pip prints what it collects and installs (about a minute on a fresh clone): no --quiet, so setup is never silent.
$(STAMP): setup.cfg pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -c constraints.txt -e '.[test]'
	touch $(STAMP)
	@echo "setup done: .venv is ready (activate it with '. .venv/bin/activate', or call .venv/bin/zeus-kfp)"

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/zeus-kfp run

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 -q

image:
	docker build -f images/Dockerfile -t $(IMAGE_CPU) .
	docker build -f images/Dockerfile.cuda -t $(IMAGE_CUDA) .

push-image:
	@case "$(IMAGE_REPO)" in */*) ;; *) echo "set IMAGE_REPO to a repository your cluster pulls from, e.g. make push-image IMAGE_REPO=registry.example.com/ml/zeus-kfp" >&2; exit 2;; esac
	$(MAKE) image IMAGE_REPO=$(IMAGE_REPO)
	docker push $(IMAGE_CPU)
	docker push $(IMAGE_CUDA)

# The package as a wheel, to install into a PyTorch image of your own (README: "Run it on Kubeflow").
wheel: $(STAMP)
	$(BIN)/python -m pip wheel --no-deps --no-build-isolation -w dist .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info dist
