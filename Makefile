# Every target creates the virtual environment it needs; a fresh clone needs only Python 3.11+.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
# pytest workers: most integration tests wait on real servers, not the CPU, so 3 fit 2 cores.
TEST_WORKERS ?= 3

.PHONY: help venv demo test lint typecheck pytest proto bench figures real-traces real-figures \
	prometheus kubectl clean image image-tools

help:
	@echo "make demo       run the scaler on the bundled trace (no Prometheus, no cluster needed)"
	@echo "make test       linters (ruff, mypy) + the whole test suite (installs Prometheus if missing)"
	@echo "make bench      GetMetrics latency/throughput with 1,000 targets vs a trivial gRPC server"
	@echo "make figures    the README's backtest figures: every shared trace, with and without drift"
	@echo "make real-traces  fetch real load traces from outside ../shared (bench/REALTRACES.md)"
	@echo "make real-figures the same figures on them, one backtest at a time"
	@echo "make proto      regenerate scaler/_pb from protos/externalscaler.proto"
	@echo "make image      build the container image IMAGE (default predictive-scaler:dev) with podman"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/scaler demo

prometheus:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || \
		{ echo "installing Debian's prometheus (the tests run a real server)"; \
		  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; }

kubectl:
	@command -v kubectl >/dev/null || { echo "the manifest tests need kubectl 1.27+ on PATH \
	(kubectl kustomize); install it from pkgs.k8s.io or Google Cloud's apt repository"; exit 1; }

# The image (Dockerfile) with podman, as root. The base is made from Debian's archive when missing
# (deploy/image/base.sh); the Python wheels are downloaded by this machine's pip and lent to the
# build read-only (deploy/image/wheels.sh). PODMAN_BUILD_FLAGS replaces that lending, e.g. with
# PODMAN_BUILD_FLAGS= (the build's pip then uses PyPI itself).
IMAGE              ?= predictive-scaler:dev
IMAGE_WHEELS       ?= out/image
PODMAN_BUILD_FLAGS ?= -v $(abspath $(IMAGE_WHEELS))/wheels:/run/scaler-wheels:ro \
                      -v $(abspath $(IMAGE_WHEELS))/pip.conf:/etc/pip.conf:ro

image-tools:
	@command -v podman >/dev/null && command -v runc >/dev/null && command -v mmdebstrap >/dev/null || \
		{ echo "installing podman, runc and mmdebstrap (make image, tests/integration/test_image.py)"; \
		  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap >/dev/null; }

image: $(STAMP) image-tools
	deploy/image/base.sh
	PYTHON=$(BIN)/python deploy/image/wheels.sh $(IMAGE_WHEELS)
	podman build --isolation chroot --network host $(PODMAN_BUILD_FLAGS) \
		--build-arg REVISION=$$(git rev-parse --short HEAD 2>/dev/null || echo unknown) -t $(IMAGE) .

lint: $(STAMP)
	$(BIN)/ruff check scaler models tests bench
	$(BIN)/ruff format --check scaler models tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

# One BLAS thread per test worker, as every scaler command runs (scaler/threads.py): 3 workers
# with a spinning BLAS thread each would be 6 on 2 cores.
pytest: $(STAMP) prometheus kubectl image-tools
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile

test: lint typecheck pytest

proto: $(STAMP)
	$(BIN)/python scaler/_pb/generate.py

bench: $(STAMP)
	$(BIN)/python bench/getmetrics.py

figures: $(STAMP)
	$(BIN)/python bench/figures.py --jobs 2 --json out/figures/figures.json

real-traces: $(STAMP)
	$(BIN)/python bench/realtraces.py

real-figures: real-traces
	$(BIN)/python bench/figures.py --traces out/realtraces/traces --out out/realfigures \
		--jobs 1 --json out/realfigures/figures.json

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
