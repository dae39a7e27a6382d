# The kit's everyday commands. Each target is one call of the CLI or pytest;
# the virtual environments are made on first use.
PY      ?= python3
VENV    ?= .venv
# GPU index for `make run` (empty: kit launch's default, GPU 0; the cpu stack uses none)
GPU     ?=
STACK   ?= auto
# base image for the build, e.g. a local one where Docker Hub is unreachable
# (scripts/make_base_image.sh); empty: the stack's own
BASE    ?=
# CA certificate (PEM) of a TLS-inspecting proxy, for the image build's pip
CA_CERT ?=
ARGS    ?=
BIN     := $(VENV)/bin
GPU_OPT  = $(if $(GPU),--gpu $(GPU))
BASE_OPT = $(if $(BASE),--base $(BASE))
CA_OPT   = $(if $(CA_CERT),--ca-cert $(CA_CERT))

.PHONY: help test test-gpu run doctor image smoke bench-h200 clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

run: $(VENV)/.host ## run the main job in a container on GPU=N (default 0; CPU smoke run where no GPU; BASE=image, CA_CERT=pem for the build)
	KIT_LAUNCH_VIA=make $(BIN)/kit launch $(GPU_OPT) --stack $(STACK) $(BASE_OPT) $(CA_OPT) $(ARGS)

test: $(VENV)/.test ## run the test suite (no GPU needed; the first run downloads torch 2.14.1, about 3.2 GB)
	$(BIN)/python -m pytest $(ARGS)

test-gpu: $(VENV)/.test ## run the GPU tests (needs an NVIDIA GPU)
	$(BIN)/python -m pytest -m gpu $(ARGS)

doctor: $(VENV)/.host ## check driver, GPUs, Docker and which image stack fits
	$(BIN)/kit doctor $(ARGS)

image: $(VENV)/.host ## build the image for STACK (auto, cuda10, cuda12, cpu) on BASE (default: the stack's); CA_CERT=pem behind a proxy
	KIT_LAUNCH_VIA=make $(BIN)/kit image build --stack $(STACK) $(BASE_OPT) $(CA_OPT) $(ARGS)

smoke: $(VENV)/.test ## a one-minute native run on synthetic data
	$(BIN)/kit run --smoke --suite all $(ARGS)

bench-h200: $(VENV)/.test ## the performance-target benchmark (see docs/performance.md)
	KIT="$(BIN)/python -m kit" PY=$(BIN)/python bash scripts/bench_h200.sh

# The host side installs in seconds: typer, rich, docker, nvidia-ml-py, scipy, matplotlib, orjson.
$(VENV)/.host: pyproject.toml kit/__init__.py
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -e .
	touch $@

# Tests also need the benchmark stack (torch, torchvision, fastai) on the CPU.
$(VENV)/.test: $(VENV)/.host requirements-test.txt
	$(BIN)/pip install -q -r requirements-test.txt
	touch $@

clean: ## remove the virtual environment and caches (keeps data/ and results/)
	rm -rf $(VENV) .pytest_cache
