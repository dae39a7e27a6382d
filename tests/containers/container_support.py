"""What the container tests share: the environment they read, running the kit and Compose,
building a stack's image, and giving its disk space back.

The container tests (test_*_stack.py, test_engine_errors.py) are run by
scripts/ci_containers.sh, which installs and starts the engine, makes the local base
images and serves the local package mirror:

    KIT_DOCKER_TESTS=1 .venv/bin/python -m pytest tests/containers -m docker

One module per stack, each building its image once (a module fixture). The images are
6-9 GB each and a build needs about twice its image while it commits its pip layer, so
with KIT_TEST_RELEASE_IMAGES=1 (CI sets it) a module removes its stack's images when its
tests are done: the job then needs the disk of one stack at a time, not of all three.

Environment the tests read (all optional):
    KIT_TEST_BASE_IMAGE           base image for the cpu stack (default: the stack's own)
    KIT_TEST_PIP_EXTRA_INDEX_URL  the local package mirror(s) for the build
    KIT_TEST_CA_CERT              CA bundle to put into the image (TLS-inspecting proxy)
    KIT_TEST_CUDA10_BASE_IMAGE    an Ubuntu 18.04 image for the cuda10 stack (its test is
                                  skipped without one: Docker Hub is unreachable in CI)
    KIT_TEST_APEX_SRC             a local Apex 241dd6c4 source (a `git archive` tarball of
                                  github.com/NVIDIA/apex at that commit; CI has its own copy):
                                  the cuda10 image is built with it (GitHub is unreachable);
                                  without it, without Apex
    KIT_TEST_CUDA12_BASE_IMAGE    an Ubuntu 24.04 image for the cuda12 stack (its tests are
                                  skipped without one)
    KIT_TEST_CUDA12_APEX_SRC      a local Apex 25.01 source (a `git archive` tarball of tag
                                  25.01; CI has its own copy) for the cuda12 image; without it,
                                  the image is built without Apex (`--no-apex`, what a user
                                  without GitHub and without a local copy runs) and its Apex
                                  checks skip; scripts/ci_containers.sh runs the cuda12 tests
                                  both ways

The tests run in file order: the build first, then what uses the image.
    KIT_TEST_RELEASE_IMAGES       1: remove each stack's mpkit images (and dangling layers)
                                  once its module is done (CI: the disk holds one stack)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]
KIT = [sys.executable, "-m", "kit"]
BASE = os.environ.get("KIT_TEST_BASE_IMAGE", "")
MIRROR = os.environ.get("KIT_TEST_PIP_EXTRA_INDEX_URL", "")
CA_CERT = os.environ.get("KIT_TEST_CA_CERT", "")
CUDA10_BASE = os.environ.get("KIT_TEST_CUDA10_BASE_IMAGE", "")
APEX_SRC = os.environ.get("KIT_TEST_APEX_SRC", "")
CUDA12_BASE = os.environ.get("KIT_TEST_CUDA12_BASE_IMAGE", "")
CUDA12_APEX_SRC = os.environ.get("KIT_TEST_CUDA12_APEX_SRC", "")
RELEASE_IMAGES = os.environ.get("KIT_TEST_RELEASE_IMAGES", "") == "1"
BUILD_TIMEOUT_S = 40 * 60
RUN_TIMEOUT_S = 20 * 60


def kit_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"PYTHONUNBUFFERED": "1", "COLUMNS": "120", "DOCKER_BUILDKIT": "0"})
    env.update(extra)
    return env


def run_cmd(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=kw.pop("cwd", ROOT), capture_output=True, text=True, timeout=timeout, **kw)
    # Shown by pytest on failure (and with -s): the command's own words.
    print(proc.stdout[-6000:], proc.stderr[-6000:], sep="\n", flush=True)
    return proc


def build_options(base: str = BASE) -> list[str]:
    opts = []
    if base:
        opts += ["--base", base]
    if CA_CERT:
        opts += ["--ca-cert", CA_CERT]
    if MIRROR:
        opts += ["--pip-extra-index-url", MIRROR]
    return opts


def docker_client():
    import docker

    return docker.from_env(timeout=120)


def check_bundle(bundle: Path, owner: int) -> None:
    assert bundle.stat().st_uid == owner, f"{bundle} is owned by uid {bundle.stat().st_uid}, expected {owner}"
    verify = run_cmd(KIT + ["bundle", "verify", str(bundle)], timeout=120)
    assert verify.returncode == 0, verify.stderr
    with tarfile.open(bundle) as tf:
        names = {Path(n).name for n in tf.getnames()}
    assert {"manifest.json", "results.json"} <= names



def give_results_away(results: Path) -> int:
    """Make ``results`` and return the uid its files must have: the invoking user's, or, as root
    (CI), another user's (4321) that the folder is given to, so that the rule "files in the
    results folder belong to its owner" is tested against an owner who did not start the run."""
    results.mkdir(parents=True, exist_ok=True)
    owner = os.getuid()
    if owner == 0:
        owner = 4321
        os.chown(results, owner, owner)
    return owner


def assert_all_owned(results: Path, owner: int) -> None:
    """Every file and folder under ``results`` belongs to ``owner``."""
    wrong = [f"{p.relative_to(results)} (uid {p.lstat().st_uid})" for p in results.rglob("*") if p.lstat().st_uid != owner]
    assert not wrong, f"not owned by uid {owner}: {wrong[:10]}"


def build_stack_image(stack: str, options: list[str]) -> str:
    """`kit image build --stack STACK OPTIONS`; returns the tag it printed last."""
    proc = run_cmd(KIT + ["image", "build", "--stack", stack, *options], timeout=BUILD_TIMEOUT_S, env=kit_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    tag = proc.stdout.strip().splitlines()[-1]
    assert tag.startswith(f"mpkit:{stack}-"), tag
    return tag


def stack_image(stack: str, options: list[str]) -> Iterator[str]:
    """The body of a stack's module fixture: build the image, hand its tag to the module's
    tests, then (with KIT_TEST_RELEASE_IMAGES=1) remove every mpkit:STACK-* tag (the kit's
    and Compose's) and the layers nothing uses any more."""
    tag = build_stack_image(stack, options)
    try:
        yield tag
    finally:
        if RELEASE_IMAGES:
            release_stack_images(stack)


def release_stack_images(stack: str) -> None:
    client = docker_client()
    for image in client.images.list(name="mpkit"):
        for tag in image.tags:
            if tag.startswith(f"mpkit:{stack}-"):
                client.images.remove(tag, force=True)
    client.images.prune(filters={"dangling": True})
    free = shutil.disk_usage(client.info().get("DockerRootDir") or "/").free
    print(f"released the {stack} images: {free / 1e9:.1f} GB free where Docker keeps its data", flush=True)


def compose_run(files: list[str], tmp_path: Path, **env_extra: str) -> tuple[subprocess.CompletedProcess, Path, int]:
    """`docker compose up --build --exit-code-from bench bench` with these files, then
    `down`; returns (the process, the results folder, the owner its files must have)."""
    assert shutil.which("docker"), "the docker CLI is needed for Compose"
    results, data = tmp_path / "results", tmp_path / "data"
    data.mkdir()
    # As root (CI), the folder is another user's: the entrypoint must switch to the folder's
    # owner, so every file must end up theirs.
    owner = give_results_away(results)
    env = kit_env(KIT_RESULTS_DIR=str(results), KIT_DATA_DIR=str(data), KIT_PIP_EXTRA_INDEX_URL=MIRROR, **env_extra)
    ca_copy = ROOT / "docker" / "extra-ca.pem"
    made_ca = False
    if CA_CERT and not ca_copy.exists():
        shutil.copyfile(CA_CERT, ca_copy)  # what the docs tell proxy users to do
        made_ca = True
    args = [a for f in files for a in ("-f", f)]
    # a bench container left by an earlier test that died half-way would be attached to as well
    # (and its stop would become `up`'s exit status): start from none
    run_cmd(["docker", "compose", *args, "down", "--remove-orphans"], timeout=120, env=env)
    try:
        proc = run_cmd(["docker", "compose", *args, "up", "--build", "--exit-code-from", "bench", "bench"],
                    timeout=BUILD_TIMEOUT_S, env=env)
    finally:
        if made_ca:
            ca_copy.unlink()
        run_cmd(["docker", "compose", *args, "down"], timeout=120, env=env)
    return proc, results, owner


def compose_up(files: list[str], tmp_path: Path, **env_extra: str) -> tuple[Path, int, str]:
    """`docker compose up bench` with these files; returns (the one bundle, its expected
    owner, what Compose printed)."""
    proc, results, owner = compose_run(files, tmp_path, **env_extra)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    bundles = sorted(results.glob("*.tar.gz"))
    assert len(bundles) == 1, sorted(p.name for p in results.iterdir())
    assert_all_owned(results, owner)
    return bundles[0], owner, proc.stdout + proc.stderr



def compose_smoke_on_cpu(files: list[str], tmp_path: Path, base: str, apex_src: str, name: str):
    """Compose's bench service from ``files`` plus a throw-away override that drops the GPU
    reservation and runs the smoke suite on the CPU (what compose.cpu.yaml does for the cpu
    stack). Apex comes the way Compose takes a local source: the archive copied to
    docker/apex-src.tar.gz and KIT_APEX_FROM=archive (the build checks it with the same code
    as `kit image build --apex-src`); without one, KIT_BUILD_APEX=0. Returns the bundle, checked."""
    override = tmp_path / f"compose.{name}-on-cpu.yaml"
    override.write_text(
        "services:\n"
        "  bench:\n"
        "    deploy: !reset {}\n"
        '    command: ["run", "--smoke", "--suite", "all", "--device", "cpu"]\n'
    )
    dropped = ROOT / "docker" / "apex-src.tar.gz"
    apex_env = {"KIT_BUILD_APEX": "0"}
    if apex_src:
        shutil.copyfile(apex_src, dropped)
        apex_env = {"KIT_APEX_FROM": "archive"}
    try:
        bundle, owner, _ = compose_up([*files, str(override)], tmp_path, KIT_BASE=base, **apex_env)
    finally:
        if apex_src:
            dropped.unlink()
    check_bundle(bundle, owner=owner)
    return bundle


def run_apex_checks_in(image: str, *docker_args: str) -> None:
    """tests/containers/apex_cpu_checks.py inside ``image`` (its installed Apex and torch, on the
    CPU): apex.amp and FP16_Optimizer import, and the kit's loss scaling agrees with Apex's."""
    checks = ROOT / "tests" / "containers"
    proc = run_cmd(["docker", "run", "--rm", "--network", "host", "--entrypoint", "python", *docker_args,
                    "-v", f"{checks}:/checks:ro", image, "/checks/apex_cpu_checks.py"], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "imported apex.amp and apex.fp16_utils.FP16_Optimizer" in proc.stdout
    assert proc.stdout.count("ok:") == 3, proc.stdout


def image_list_row(tag: str) -> dict:
    """``kit image list --json -``'s row for ``tag``."""
    import json

    listing = run_cmd(KIT + ["image", "list", "--json", "-"], timeout=120, env=kit_env())
    assert listing.returncode == 0, listing.stderr
    return next(i for i in json.loads(listing.stdout) if i["tag"] == tag)
