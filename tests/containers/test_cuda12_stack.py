"""Today's stack (cuda12) for real: Ubuntu 24.04, torch 2.9.1 with its CUDA wheels, Apex 25.01,
built without a CUDA base and run on the CPU; and a build whose downloads break off.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from container_support import (
    BUILD_TIMEOUT_S, CA_CERT, CUDA12_APEX_SRC, CUDA12_BASE, KIT, ROOT, RUN_TIMEOUT_S, build_options,
    check_bundle, compose_smoke_on_cpu, docker_client, image_list_row, kit_env, run_apex_checks_in,
    run_cmd, stack_image,
)

pytestmark = pytest.mark.docker



def _cuda12_apex_options() -> list[str]:
    return ["--apex-src", CUDA12_APEX_SRC] if CUDA12_APEX_SRC else ["--no-apex"]


@pytest.fixture(scope="module")
def cuda12_image():
    """The cuda12 image on a plain Ubuntu 24.04 (no CUDA base: CUDA and cuDNN come with the torch
    wheels), with Apex 25.01 python-only from the local snapshot, or without Apex where none is
    given. scripts/ci_containers.sh builds it just before (timed); this reuses its layers."""
    if not CUDA12_BASE:
        pytest.skip("KIT_TEST_CUDA12_BASE_IMAGE is not set (scripts/ci_containers.sh makes one)")
    yield from stack_image("cuda12", [*_cuda12_apex_options(), *build_options(CUDA12_BASE)])


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
    image = docker_client().images.get(cuda12_image)
    labels = image.labels
    assert labels["mpkit.stack"] == "cuda12" and labels["mpkit.base"] == CUDA12_BASE
    assert labels["mpkit.apex.built"] == ("1" if CUDA12_APEX_SRC else "0")
    assert image.attrs["Config"]["User"] == "kit"
    # what the image has: Ubuntu 24.04, Python 3.12, the lock installed exactly, torch's CUDA from its wheels
    script = ("set -e; . /etc/os-release; echo \"os $VERSION_ID\"; python --version; pip check; "
              "python -c 'import torch, torchvision, fastai; print(\"torch\", torch.__version__, torch.version.cuda, "
              "torch.backends.cudnn.version(), \"torchvision\", torchvision.__version__, \"fastai\", fastai.__version__)'; "
              "command -v nvcc || echo 'no nvcc'")
    proc = run_cmd(["docker", "run", "--rm", "--network", "host", "--entrypoint", "sh", cuda12_image, "-c", script], timeout=300)
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
    labels = docker_client().images.get(cuda12_image).labels
    assert labels["mpkit.apex.ref"] == "25.01" and labels["mpkit.apex.build_options"] == ""
    assert labels["mpkit.apex.commit"] == "e552ad997605dd883825106776eba230a6820345"
    assert labels["mpkit.apex.source"].startswith("local archive apex-25.01.tar.gz"), labels
    run_apex_checks_in(cuda12_image)
    row = image_list_row(cuda12_image)
    assert (row["stack"], row["apex_ref"], row["apex_build"]) == ("cuda12", "25.01", "python-only"), row


def test_kit_launch_cuda12_on_the_cpu_writes_a_bundle_naming_stack_torch_and_apex(cuda12_image, tmp_path):
    """`kit launch --stack cuda12` with a smoke run on the CPU (torch's CUDA build runs there):
    fp32 and bf16 cells measure, the Apex cells are skipped only for want of a GPU (Apex is there).

    Without a local Apex copy (KIT_TEST_CUDA12_APEX_SRC unset: a fresh clone, and the job's last
    cuda12 phase) it runs what such a user runs, `kit launch --stack cuda12 --no-apex`, on an engine
    without the image: kit launch builds it itself, without Apex (from the fixture's cached layers),
    and the Apex cells are skipped for want of Apex."""
    if not CUDA12_APEX_SRC:
        # the image as on a machine that never built it; its layers stay as the build cache
        docker_client().images.remove(cuda12_image, noprune=True)
    results, data = tmp_path / "results", tmp_path / "data"
    run_args = ["--smoke", "--suite", "all", "--device", "cpu", "-p", "fp32,amp-bf16,apex-o1,apex-o2"]
    proc = run_cmd(KIT + ["launch", "--stack", "cuda12", "--skip-checks", "--results-dir", str(results), "--data-dir", str(data),
                       *_cuda12_apex_options(), *build_options(CUDA12_BASE), "--", *run_args],
                timeout=RUN_TIMEOUT_S + BUILD_TIMEOUT_S, env=kit_env())
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    if CUDA12_APEX_SRC:
        assert "Building" not in proc.stderr, "kit launch rebuilt the image the fixture had just built"
    else:
        assert f"Building {cuda12_image}" in proc.stderr, proc.stderr[-4000:]
        assert docker_client().images.get(cuda12_image).labels["mpkit.apex.built"] == "0"
    bundles = sorted(results.glob("*.tar.gz"))
    assert len(bundles) == 1, sorted(p.name for p in results.iterdir())
    check_bundle(bundles[0], owner=os.getuid())

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
    if not CUDA12_APEX_SRC:
        assert not b.environment["apex"]["found"], b.environment["apex"]


def test_compose_cuda12_service_on_the_cpu_ends_with_a_bundle(cuda12_image, tmp_path):
    """compose.yaml's cuda12 service, built from the same arguments (and layers) as `kit image
    build --stack cuda12`; on this GPU-less machine a throw-away override drops the GPU
    reservation and runs the smoke suite on the CPU. Apex comes from docker/apex-src.tar.gz
    (KIT_APEX_FROM=archive), checked by the build to be 25.01."""
    bundle = compose_smoke_on_cpu(["compose.yaml"], tmp_path, CUDA12_BASE, CUDA12_APEX_SRC, "cuda12")

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
    before = docker_client().images.get(cuda12_image).id
    lock = ROOT / "docker" / "locks" / "cuda12.txt"
    server = _serve_breaking_wheels(lock)
    index = f"http://127.0.0.1:{server.server_address[1]}/simple"
    try:
        opts = ["--base", CUDA12_BASE] + (["--ca-cert", CA_CERT] if CA_CERT else [])
        proc = run_cmd(KIT + ["image", "build", "--stack", "cuda12", *_cuda12_apex_options(), *opts, "--pip-index-url", index],
                    timeout=BUILD_TIMEOUT_S, env=kit_env())
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
    assert docker_client().images.get(cuda12_image).id == before


