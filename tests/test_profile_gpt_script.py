"""scripts/profile_gpt_step.py: its kernel kinds, and its code path on the CPU (the tiny preset)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.modules import load_script

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load_script("profile_gpt_step")


@pytest.mark.parametrize("name, kind", [
    ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_cluster1x2x1", "fp8 GEMM"),
    ("nvjet_hsh_192x192_64x4_2x1_v_bz_coopA_TNT", "GEMM"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128>>", "attention"),
    ("triton_poi_fused__to_copy_abs_amax_clamp_0", "Triton (fused elementwise, norms, casts, amax)"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>", "optimizer"),
    ("void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>", "other"),
    # from the H200 profile of 2026-12-02 (commit 3167bdb, docs/measurements.md): cuBLAS's fp8 GEMMs, bf16's, and the
    # Triton cast that feeds _scaled_mm (named after it)
    ("nvjet_sm90_qqtst_192x192_128x4_2x1_v_bz_coopB_TNN", "fp8 GEMM"),
    ("nvjet_sm90_qrtst_128x160_128x5_1x2_h_bz_coopA_algo2_TNT", "fp8 GEMM"),
    ("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN", "GEMM"),
    ("triton_poi_fused__scaled_mm__to_copy_add_clamp_clone_gelu_gelu_backward_mul_native_layer_norm_reciprocal_t_view_7",
     "Triton (fused elementwise, norms, casts, amax)"),
    ("triton_red_fused_abs_gelu_gelu_backward_max_view_4", "Triton (fused elementwise, norms, casts, amax)"),
    ("triton_tem_fused__scaled_mm_3", "fp8 GEMM"),
    ("triton_tem_fused_mm_0", "GEMM"),
])
def test_kernels_are_grouped_by_kind(name, kind):
    assert _script().kind_of(name) == kind


@pytest.mark.parametrize("name, user_annotation, skipped", [
    ("ProfilerStep*", False, True), ("Optimizer.step#AdamW.step", False, True), ("my_range", True, True),
    ("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN", False, False),
])
def test_annotations_are_not_counted_beside_the_kernels_they_enclose(name, user_annotation, skipped):
    class Event:
        pass

    e = Event()
    e.name, e.is_user_annotation = name, user_annotation
    assert _script().is_annotation(e) is skipped



def test_it_profiles_the_suites_own_step_on_the_cpu(tmp_path):
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "profile_gpt_step.py"), "--preset", "tiny",
                          "--precisions", "fp32", "--device", "cpu", "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "| kind | fp32 |" in out.stdout and "| total |" in out.stdout
    (row,) = json.loads((tmp_path / "profile_gpt.json").read_text())
    assert row["recorded_steps"] == 5 and row["tokens_per_s"] > 0
    assert sum(row["ms_per_step_by_kind"].values()) > 0


def test_the_fp8_compile_probe_runs_each_variant_on_the_cpu_and_names_a_wrong_one(tmp_path):
    pytest.importorskip("torch")
    probe = ROOT / "scripts" / "probe_gpt_fp8.py"
    bad = subprocess.run([sys.executable, str(probe), "--variants", "block,fast"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode != 0 and "unknown variant(s) fast" in bad.stderr
    out = subprocess.run([sys.executable, str(probe), "--preset", "tiny", "--variants", "block,whole",
                          "--precisions", "fp32,amp-bf16", "--steps", "2", "--device", "cpu", "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = json.loads((tmp_path / "probe_gpt_fp8.json").read_text())
    assert [(r["variant"], r["precision"]) for r in rows] == [("block", "fp32"), ("block", "amp-bf16"),
                                                             ("whole", "fp32"), ("whole", "amp-bf16")]
    assert all(r["tokens_per_s"] > 0 and r["timed_steps"] == 2 for r in rows)
    assert "| whole |" in out.stdout


def test_the_fast_accum_variant_changes_only_torchaos_gemm_accumulation_and_only_inside_it():
    pytest.importorskip("torchao")
    from torchao.float8 import Float8LinearConfig

    probe = load_script("probe_gpt_fp8")
    plain = Float8LinearConfig.from_recipe_name("tensorwise")
    with probe.recipe_variant("block-fast-accum"):
        fast = Float8LinearConfig.from_recipe_name("tensorwise")
    after = Float8LinearConfig.from_recipe_name("tensorwise")
    gemms = ("gemm_config_output", "gemm_config_grad_input", "gemm_config_grad_weight")
    assert [getattr(plain, g).use_fast_accum for g in gemms] == [True, False, False]  # torchao's default
    assert [getattr(fast, g).use_fast_accum for g in gemms] == [True, True, True]
    assert after == plain
    assert (fast.cast_config_input, fast.cast_config_grad_output) == (plain.cast_config_input, plain.cast_config_grad_output)
    with probe.recipe_variant("block"):
        assert Float8LinearConfig.from_recipe_name("tensorwise") == plain
