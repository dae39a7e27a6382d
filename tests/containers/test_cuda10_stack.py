"""The 2019 stack (cuda10) for real: Python 3.7, torch 1.4, fastai v1 and Apex 241dd6c4, built on a
local Ubuntu 18.04 and run on the CPU.
"""

from __future__ import annotations

import os

import pytest

from container_support import (
    APEX_SRC, CUDA10_BASE, KIT, RUN_TIMEOUT_S, build_options, check_bundle, compose_smoke_on_cpu,
    docker_client, image_list_row, kit_env, run_apex_checks_in, run_cmd, stack_image,
)

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def cuda10_image():
    """The cuda10 image from its pinned lock, with Apex 241dd6c4 built python-only from the local
    snapshot (GitHub is unreachable here), or without Apex where no snapshot is given."""
    if not CUDA10_BASE:
        pytest.skip("KIT_TEST_CUDA10_BASE_IMAGE is not set (scripts/ci_containers.sh makes one)")
    apex = ["--apex-src", APEX_SRC] if APEX_SRC else ["--no-apex"]
    yield from stack_image("cuda10", [*apex, *build_options(CUDA10_BASE)])


def test_cuda10_stack_runs_the_2019_software_and_writes_a_bundle(cuda10_image, tmp_path):
    """`kit launch --stack cuda10` on the CPU: the in-container runner (Python 3.7) measures
    what the old stack can run, skips the rest with reasons, and writes the bundle."""
    labels = docker_client().images.get(cuda10_image).labels
    assert labels["mpkit.stack"] == "cuda10" and labels["mpkit.apex.built"] == ("1" if APEX_SRC else "0")
    results, data = tmp_path / "results", tmp_path / "data"
    run_args = ["--smoke", "--suite", "all", "--device", "cpu", "-p", "fp32,amp-fp16,fp16-master,apex-o1"]
    proc = run_cmd(KIT + ["launch", "--stack", "cuda10", "--skip-checks", "--results-dir", str(results),
                       "--data-dir", str(data), "--", *run_args], timeout=RUN_TIMEOUT_S, env=kit_env())
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "no GPU is given to the container" in proc.stderr
    bundles = sorted(results.glob("*.tar.gz"))
    assert len(bundles) == 1, sorted(p.name for p in results.iterdir())
    check_bundle(bundles[0], owner=os.getuid())

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
    labels = docker_client().images.get(cuda10_image).labels
    assert labels["mpkit.apex.ref"] == "241dd6c4"
    assert labels["mpkit.apex.commit"] == "241dd6c4fce8667b15aaf7196b39d801b084f9ae"
    assert labels["mpkit.apex.source"].startswith("local archive apex-241dd6c4.tar.gz"), labels
    run_apex_checks_in(cuda10_image, "-e", "PYTHONPATH=/opt/kit/src")
    row = image_list_row(cuda10_image)
    assert row["apex_built"] and row["apex_ref"] == "241dd6c4" and row["apex_source"].startswith("local archive"), row


def test_compose_cuda10_variant_ends_with_a_bundle(cuda10_image, tmp_path):
    """compose.cuda10.yaml builds the 2019 stack and its Python 3.7 runner writes the bundle
    (on the CPU here, with Apex from the local archive: compose_smoke_on_cpu)."""
    bundle = compose_smoke_on_cpu(["compose.yaml", "compose.cuda10.yaml"], tmp_path, CUDA10_BASE, APEX_SRC, "cuda10")

    from kit.bundle.safe_open import open_bundle

    env = open_bundle(bundle).environment
    assert env["container"]["stack"] == "cuda10" and env["packages"]["torch"] == "1.4.0"
    if APEX_SRC:
        apex = env["apex"]
        assert apex["commit"] == "241dd6c4fce8667b15aaf7196b39d801b084f9ae", apex
        assert apex["source"].startswith("local archive apex-src.tar.gz"), apex


