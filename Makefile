# Two entry points (README Quickstart): `make run` and `make test`; `make check` is the loop while working.
# All three set up .venv from scratch.
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

# zeusd (deploy/zeusd), built from ml-energy/zeus at a fixed commit: no zeusd release after v0.5.0 exists, and
# v0.5.0's /discover names no PCI address, by which the train step tells its GPUs from the node's others.
# mlenergy/zeusd:latest is pushed only on a zeusd-v* release tag; the images built since (ml-energy/zeus#255, 2026-08-03)
# carry the moving tag `master` only. This commit is ml-energy/zeus#257, the newest zeusd change read; a git build context at a
# commit is immutable, so the tag below always means the same daemon.
ZEUSD_COMMIT := 859a60159fcb3ceb7d0d4535b6e0689df97b2944
IMAGE_ZEUSD  := $(IMAGE_REPO)-zeusd:$(shell echo $(ZEUSD_COMMIT) | cut -c1-12)

.PHONY: setup run check test envs test-envs lint clean image push-image wheel image-zeusd push-image-zeusd prometheus sources

# pip installs uv (pinned in constraints.txt), and uv installs the rest: the same packages at the same versions as
# `pip install`, in 26-31 s on a fresh clone where pip took 61 s, and the two environments below in 18 s beside
# the suite where pip took about 180 s (benchmarks/RESULTS.md, "CI timings"). Most of setup is compiling .venv's
# bytecode, as pip does: where PYTHONDONTWRITEBYTECODE is set (it is on this machine) a module without its .pyc is
# compiled again by every process that imports it (uncompiled, the suite had done 18 % of its tests at 10 minutes,
# against 32 %). The two environments skip it: their tests run them without PYTHON* variables (tests/envs/venvs.py),
# so each process writes the .pyc of what it imports, once. uv reads none of pip's configuration, so the find-links
# pip is given (where a machine keeps wheels of its own, as this one keeps torch's CPU build) are handed on, read
# once and only by a recipe that installs; a package mirror is uv's own UV_INDEX_URL. uv prints what it installs.
FIND_LINKS = $(eval FIND_LINKS := $$(sort $$(PIP_FIND_LINKS) $$(shell $(PYTHON) -m pip config get global.find-links \
               2>/dev/null)))$(FIND_LINKS)
UV_INSTALL = $(BIN)/uv pip install $(foreach dir,$(FIND_LINKS),--find-links $(dir)) --python
$(STAMP): setup.cfg pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c constraints.txt uv
	$(UV_INSTALL) $(BIN)/python --compile-bytecode -c constraints.txt -e '.[test]' pip
	touch $(STAMP)
	@echo "setup done: .venv is ready (activate it with '. .venv/bin/activate', or call .venv/bin/zeus-kfp)"

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/zeus-kfp run

# The gate and train components and the pipeline function's parameters, written out from the
# declarations (zeus/zeus_kfp/job.py, zeus/zeus_kfp/steps/request.py): run after adding a setting
# (pipelines/sources.py says why; tests/test_sources.py fails until it has run).
sources: $(STAMP)
	$(BIN)/python -m zeus_kfp.pipelines.sources

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The fast tier: ruff and every test tests/tiers.py marks `fast` (no process, pipeline run, S3 server or other
# server, not slow), in under 2 minutes at low load; the tier's slowest tests are listed, so it stays fast.
check: lint
	$(BIN)/python -m pytest -n 2 -q -m fast --durations=10

# Everything, what CI runs (.ci/run): ruff and every tier, the environments' tests among them; the 25 slowest tests
# are listed. Three workers on two cores: with two, the suite left 15 % of the CPU idle while its tests waited on
# their processes, servers and pipeline steps (14 min 0 s against 16 min 37 s: benchmarks/RESULTS.md). The
# environments build in the background while the suite runs (18 s with uv): their tests, ordered after every
# other costly one, wait for the build (tests/envs/venvs.py) and so run beside the fast tier instead of after the
# suite. The build's output goes to $(ENVS_LOG), shown by a test that finds the build failed; a failed suite still
# waits for the build, so nothing is left running.
ENVS_LOG    := .envs-build.log
ENVS_STATUS := .envs-build.status
SUITE_ARGS  := -n 3 -q --durations=25 -m "envs or not envs"
WAIT_ENVS    = while [ ! -s $(ENVS_STATUS) ]; do sleep 1; done; [ "$$(cat $(ENVS_STATUS))" = 0 ] || \
               { tail -n 40 $(ENVS_LOG); echo "building the environments failed: the end of $(ENVS_LOG) is above" >&2; \
                 exit 1; }
test: lint
	@rm -f $(ENVS_STATUS)
	@echo "building $(LOWEST) and $(BESIDE) in the background while the suite runs (their output: $(ENVS_LOG))"
	@( $(MAKE) --no-print-directory envs > $(ENVS_LOG) 2>&1; echo $$? > $(ENVS_STATUS) ) &
	@echo '$(BIN)/python -m pytest $(SUITE_ARGS)'
	@ZEUS_TEST_ENVS_STATUS=$(CURDIR)/$(ENVS_STATUS) ZEUS_TEST_ENVS_LOG=$(CURDIR)/$(ENVS_LOG) \
	  $(BIN)/python -m pytest $(SUITE_ARGS) || { $(WAIT_ENVS); exit 1; }
	@$(WAIT_ENVS)

# The environments users already have. .venv-lowest holds every dependency at the floor setup.cfg
# declares (constraints-lowest.txt; torch stays at the CPU build on disk); .venv-beside-zeus holds zeus-kfp's
# wheel beside ml-energy's zeus==0.16.0, both non-editable as in an image. Each is built once and kept; the
# wheel is rebuilt every time, so the tests see the sources as they are.
LOWEST := .venv-lowest
BESIDE := .venv-beside-zeus
ENV_TEST_TOOLS := pytest pytest-xdist 'moto[s3,server]==5.2.5' hypothesis

$(LOWEST)/.installed: setup.cfg pyproject.toml constraints-lowest.txt | $(STAMP)
	rm -rf $(LOWEST)
	$(PYTHON) -m venv $(LOWEST)
	$(UV_INSTALL) $(LOWEST)/bin/python -c constraints-lowest.txt -e . $(ENV_TEST_TOOLS) pip
	touch $@

# pip here, as a user would: the test uninstalls and reinstalls with it too.
$(BESIDE)/.deps: setup.cfg pyproject.toml constraints.txt | $(STAMP)
	rm -rf $(BESIDE)
	$(PYTHON) -m venv $(BESIDE)
	$(UV_INSTALL) $(BESIDE)/bin/python pip
	$(BESIDE)/bin/python -m pip download --no-deps -d $(BESIDE)/wheels zeus==0.16.0
	$(BIN)/python -m pip wheel --no-deps --no-build-isolation -w $(BESIDE)/wheels .
	$(UV_INSTALL) $(BESIDE)/bin/python -c constraints.txt $(BESIDE)/wheels/*.whl
	touch $@

envs: $(STAMP) $(LOWEST)/.installed $(BESIDE)/.deps
	rm -f $(BESIDE)/wheels/zeus_kfp-*.whl $(BESIDE)/.installed
	$(BIN)/python -m pip wheel --no-deps --no-build-isolation -w $(BESIDE)/wheels .
	$(UV_INSTALL) $(BESIDE)/bin/python --no-deps --reinstall $(BESIDE)/wheels/zeus_kfp-*.whl
	touch $(BESIDE)/.installed

# The environments' tests alone (tests/envs: the store's contract and the run settings inside .venv-lowest, the
# main job and a plain script there, zeus-kfp beside ml-energy's zeus).
test-envs: envs
	$(BIN)/python -m pytest -n 2 -q -m envs tests/envs

image:
	docker build -f images/Dockerfile -t $(IMAGE_CPU) .
	docker build -f images/Dockerfile.cuda -t $(IMAGE_CUDA) .

push-image:
	@case "$(IMAGE_REPO)" in */*) ;; *) echo "set IMAGE_REPO to a repository your cluster pulls from, e.g. make push-image IMAGE_REPO=registry.example.com/ml/zeus-kfp" >&2; exit 2;; esac
	$(MAKE) image IMAGE_REPO=$(IMAGE_REPO)
	docker push $(IMAGE_CPU)
	docker push $(IMAGE_CUDA)

image-zeusd:
	docker build -f packaging/docker/Dockerfile -t $(IMAGE_ZEUSD) https://github.com/ml-energy/zeus.git#$(ZEUSD_COMMIT):zeusd

push-image-zeusd:
	@case "$(IMAGE_REPO)" in */*) ;; *) echo "set IMAGE_REPO to a repository your cluster pulls from, e.g. make push-image-zeusd IMAGE_REPO=registry.example.com/ml/zeus-kfp" >&2; exit 2;; esac
	$(MAKE) image-zeusd IMAGE_REPO=$(IMAGE_REPO)
	docker push $(IMAGE_ZEUSD)

# Debian's Prometheus for tests/ux/test_fleet.py, fetched without root (apt-get download + dpkg -x into
# ~/.cache/zeus-kfp-tests); the test fetches it itself when it is missing, this only does it ahead.
prometheus: $(STAMP)
	$(BIN)/python tests/prometheus_server.py

# The package as a wheel, to install into a PyTorch image of your own (docs/kubeflow.md: "What each step is").
wheel: $(STAMP)
	$(BIN)/python -m pip wheel --no-deps --no-build-isolation -w dist .

clean:
	rm -rf $(VENV) $(LOWEST) $(BESIDE) $(ENVS_LOG) $(ENVS_STATUS) .pytest_cache .ruff_cache *.egg-info dist
