"""The kernel-class rules (kit.results.kernel_classes) on recorded traces.

Two kinds of trace: the H200's own profiler tables committed under references/h200/lstm/probe/prof/
(the LSTM's graphed engine, tensor-core preset, strict fp32 and amp-fp16; names cut to 55 characters
by torch's table), and real CPU traces this test records with torch.profiler on a tiny model (label:
CPU). Rules no recorded trace here reaches are checked on the names their cited sources print, and
say so.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kit.results import kernel_classes as kc

PROF = Path(__file__).resolve().parents[1] / "references" / "h200" / "lstm" / "probe" / "prof"
FP32 = PROF / "profile-tensor-core-fp32.txt"
FP16 = PROF / "profile-tensor-core-amp-fp16.txt"
GPT_H100 = PROF.parents[3] / "h100" / "window-cost" / "gpt"


def _table(path: Path) -> list:
    return kc.parse_table(path.read_text(encoding="utf-8"))


def _gpt_h100() -> dict:
    """{kernel name: precision} of the largest kernels of the recorded H100 GPT cells
    (references/h100/window-cost/gpt/)."""
    from kit.bundle.safe_open import open_bundle

    (bundle,) = GPT_H100.glob("*.tar.gz")
    return {k["name"]: c.precision for c in open_bundle(bundle).results.cells
            for k in (c.profile or {}).get("largest_kernels", [])}


@pytest.fixture(scope="module")
def cpu_trace():
    """A real CPU trace (label: CPU): conv, batch norm, linear under bf16 autocast, a GradScaler, a
    foreach SGD step and a gloo all-reduce in a one-process group; (key, self CPU us) and its table."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    if dist.is_initialized():
        pytest.skip("a process group is already up in this process")
    import tempfile

    store = tempfile.NamedTemporaryFile(prefix="kit-gloo-", delete=False)
    store.close()
    dist.init_process_group("gloo", init_method="file://" + store.name, rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5))
        opt = torch.optim.SGD(m.parameters(), lr=0.1, foreach=True)
        scaler = torch.amp.GradScaler("cpu")
        x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 1])
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(m(x), y)
            scaler.scale(loss).backward()
            for p in m.parameters():
                dist.all_reduce(p.grad)
            scaler.step(opt)
            scaler.update()
        events = [(e.key, e.self_cpu_time_total) for e in prof.key_averages()]
        table = prof.key_averages().table(row_limit=-1)
    finally:
        dist.destroy_process_group()
        Path(store.name).unlink(missing_ok=True)
    return events, table


def test_every_rule_says_why_and_names_a_known_class():
    assert len({r.pattern for r in kc.RULES}) == len(kc.RULES)
    for r in kc.RULES:
        assert r.klass in kc.CLASSES and len(r.why) > 20, r
        re.compile(r.pattern)


def test_h200_tables_parse_to_every_row_with_its_time():
    for path in (FP32, FP16):
        rows = _table(path)
        assert len(rows) == 25 and all(t > 0 for _, t in rows)
    # the first row of the fp32 table, as printed: 206.326ms
    assert _table(FP32)[0] == ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x...", pytest.approx(0.206326))


def test_strict_fp32_lstm_on_the_h200_has_no_tensor_core_time():
    """TF32 off (the kit's fp32): the xmma f32f32 GEMMs and CUTLASS simt sgemms are counted off the
    tensor cores, and they are most of the device time."""
    by = kc.device_time_by_class(_table(FP32))
    total = sum(by.values())
    assert by[kc.TENSOR_CORE_MATMUL] == 0
    assert by[kc.OTHER_MATMUL] / total > 0.8
    assert kc.rule_for("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8...").klass == kc.OTHER_MATMUL
    assert "not established" in kc.rule_for("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x...").why


def test_amp_fp16_lstm_on_the_h200_runs_its_gemms_on_the_tensor_cores():
    rows = _table(FP16)
    by = kc.device_time_by_class(rows)
    nvjet = [n for n, _ in rows if n.startswith("nvjet_sm90_hsh")]
    assert len(nvjet) == 9 and {kc.classify(n) for n in nvjet} == {kc.TENSOR_CORE_MATMUL}
    assert by[kc.TENSOR_CORE_MATMUL] > by[kc.OTHER_MATMUL] > 0  # cuBLASLt's split-K reduce is not an MMA
    assert by[kc.OPTIMIZER] > 0 and by[kc.NORM_ELEMENTWISE] > 0
    # the sums keep every row's time
    assert sum(by.values()) == pytest.approx(sum(t for _, t in rows))


def test_h200_rows_of_each_kind_land_in_their_class():
    seen = {n: kc.classify(n) for n, _ in _table(FP32) + _table(FP16)}
    assert seen["Memset (Unknown)"] == kc.CASTS_COPIES
    assert seen["void at::native::(anonymous namespace)::multi_tensor..."] == kc.OPTIMIZER
    assert seen["void LSTM_elementWise_bp1<float, float, float>(int, ..."] == kc.NORM_ELEMENTWISE
    assert seen["void cudnn::dropout_apply_mask<float, float, 4>(floa..."] == kc.NORM_ELEMENTWISE
    assert seen["void at::native::(anonymous namespace)::fused_dropou..."] == kc.NORM_ELEMENTWISE
    assert seen["void cublasLt::splitKreduce_kernel<32, 16, int, floa..."] == kc.OTHER_MATMUL
    assert kc.OTHER not in seen.values()


def test_a_cpu_trace_classifies_its_ops(cpu_trace):
    """CPU: loss scaling, communication, optimizer, casts, matmul and elementwise ops by their names."""
    events, _ = cpu_trace
    cls = {k: kc.classify(k) for k, _ in events}
    assert cls["aten::_amp_foreach_non_finite_check_and_unscale_"] == kc.LOSS_SCALING
    assert cls["aten::_amp_update_scale_"] == kc.LOSS_SCALING
    assert cls["gloo:all_reduce"] == kc.COMMUNICATION and cls["c10d::allreduce_"] == kc.COMMUNICATION
    assert cls["aten::_foreach_add_"] == kc.OPTIMIZER and cls["Optimizer.step#SGD.step"] == kc.OPTIMIZER
    assert cls["aten::_to_copy"] == kc.CASTS_COPIES and cls["aten::copy_"] == kc.CASTS_COPIES
    assert cls["aten::addmm"] == kc.OTHER_MATMUL and cls["aten::convolution_backward"] == kc.OTHER_MATMUL
    assert cls["aten::native_batch_norm"] == kc.NORM_ELEMENTWISE and cls["aten::relu"] == kc.NORM_ELEMENTWISE
    assert cls["autograd::engine::evaluate_function: AddmmBackward0"] == kc.OTHER
    assert kc.TENSOR_CORE_MATMUL not in cls.values()  # a CPU has none


def test_a_cpu_table_parses_to_the_traces_own_times(cpu_trace):
    events, table = cpu_trace
    rows = kc.parse_table(table, column="Self CPU")
    assert len(rows) == len(events)
    # the table prints each time to 3 decimals of its unit
    assert sum(t for _, t in rows) == pytest.approx(sum(t for _, t in events) / 1e6, rel=1e-3)
    with pytest.raises(ValueError, match="Self CUDA"):
        kc.parse_table(table)


#: cuDNN's fp32 (CUDA-core) convolution kernels as a Volta profile prints them
#: (github.com/pytorch/pytorch/issues/51382): "relu" is a fused epilogue, "splitK" a split reduction
SCUDNN = ["volta_scudnn_128x128_relu_interior_nn_v1", "volta_scudnn_128x128_stridedB_splitK_interior_nn_v1",
          "volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1"]
#: GradScaler's scale update on a GPU (aten/src/ATen/native/cuda/AmpKernels.cu), as the profiler names it
AMP_UPDATE = "void at::native::amp_update_scale_cuda_kernel(float*, int*, float const*, double, double, int)"


def test_cudnns_fp32_convolutions_are_convolutions_and_the_scale_update_kernel_is_loss_scaling():
    """Names no recorded trace here has, as their sources print them: an fp32 cuDNN convolution is a
    convolution off the tensor cores whatever epilogue its name lists (not elementwise for its "relu",
    not "other" for "splitK"); GradScaler's scale-update kernel is loss scaling like its op."""
    assert {kc.classify(n) for n in SCUDNN} == {kc.OTHER_MATMUL}
    assert kc.classify(AMP_UPDATE) == kc.LOSS_SCALING


def inductor_names() -> dict:
    """{category: kernel names} as Inductor names its generated kernels (torch/_inductor/codegen/triton.py,
    define_kernel: "triton_", the category cut to three letters, the fused ops' name, a number), for every
    category the installed PyTorch knows, fused around ops whose names alone would class them otherwise."""
    wb = pytest.importorskip("torch._inductor.wrapper_benchmark")
    categories = getattr(wb, "_kernel_category_choices", None)
    if not categories:
        pytest.skip("this PyTorch's Inductor does not list its kernel categories where 2.11-2.14 do")
    fused = ("fused_convolution_relu", "fused__native_batch_norm_legit_functional_convolution", "fused__to_copy_addmm",
             "fused_copy__mul")
    return {c: [f"triton_{c[:3]}_{f}_{i}" for i, f in enumerate(fused)] for c in categories}


def test_inductors_kernels_are_classed_by_their_kind_not_the_ops_their_names_list():
    """Only a template is a GEMM or convolution; the rest finish a convolution's output, normalise, cast
    or reduce: memory-bound work, though their names say "convolution" or "addmm"."""
    names = inductor_names()
    assert {"pointwise", "reduction", "persistent_reduction", "template"} <= set(names)
    for category, kernels in names.items():
        want = kc.OTHER_MATMUL if category == "template" else kc.NORM_ELEMENTWISE
        assert {kc.classify(n) for n in kernels} == {want}, (category, kernels)
    assert kc.classify("triton_poi_fused__to_copy_7") == kc.CASTS_COPIES  # a kernel that only casts
    assert kc.classify("triton_poi_fused__to_copy_7"[:55]) == kc.CASTS_COPIES


def test_every_rule_is_reached_by_a_recorded_or_cited_name(cpu_trace):
    """Each rule is the first match of at least one name. Recorded: the H200 tables and the CPU
    trace. Cited, as the rules' sources print them (no trace here has them): a CUTLASS tensorop
    kernel (github.com/NVIDIA/cutlass/issues/1025), cuBLAS's bf16 xmma GEMM
    (github.com/NVIDIA/TransformerEngine/issues/1391), a half-input nvjet GEMM
    (github.com/GindaChen/nsys-ai/pull/582). Constructed, no source
    prints one: an nvjet GEMM with fp32 (s) inputs, which the rules must not claim for the tensor cores;
    and Inductor's kernels, named as its code names them (:func:`inductor_names`)."""
    recorded = [n for n, _ in _table(FP32) + _table(FP16)] + [k for k, _ in cpu_trace[0]] + list(_gpt_h100())
    cited = ["cutlass_80_tensorop_f16_s16816gemm_relu_f16_128x128_32x4_tn_align8",
             "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_k",
             "nvjet_sm90_hss_320x128"]
    cited_fp32 = SCUDNN + [AMP_UPDATE]
    constructed = (["nvjet_sm90_sss_128x64", "triton_poi_fused__to_copy_7", "fmha_cutlassF_f32_aligned_64x64_rf_sm75"]
                   + [n for names in inductor_names().values() for n in names])
    reached = {kc.RULES.index(kc.rule_for(n)) for n in recorded + cited + cited_fp32 + constructed if kc.rule_for(n)}
    assert reached == set(range(len(kc.RULES))), [kc.RULES[i].pattern for i in set(range(len(kc.RULES))) - reached]
    assert {kc.classify(n) for n in cited} == {kc.TENSOR_CORE_MATMUL}
    assert kc.classify("nvjet_sm90_sss_128x64") == kc.OTHER_MATMUL  # fp32 inputs: not claimed
    assert kc.classify("unknown_kernel_xyz") == kc.OTHER


def test_hoppers_fp8_and_bf16_nvjet_gemms_run_on_the_tensor_cores():
    """Names from the H200 GPT profile of 2026-12-02 (scripts/profile_gpt_step.py, commit 3167bdb):
    cuBLAS's fp8 GEMMs (q e4m3, r e5m2 inputs) and bf16's (t), as that profile printed them."""
    for name in ("nvjet_sm90_qqtst_192x192_128x4_2x1_v_bz_coopB_TNN",
                 "nvjet_sm90_qrtst_128x160_128x5_1x2_h_bz_coopA_algo2_TNT",
                 "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN"):
        assert kc.classify(name) == kc.TENSOR_CORE_MATMUL, name
        assert kc.classify(name[:55]) == kc.TENSOR_CORE_MATMUL, name  # as torch's table cuts it
    assert kc.classify("nvjet_sm90_sss_128x64") == kc.OTHER_MATMUL


def test_the_h100_gpt_cells_matmuls_and_attention_are_matmuls():
    """The recorded H100 GPT cells: fp32's GEMMs (xmma f32f32, CUTLASS simt) are matmuls off the tensor
    cores, its memory-efficient attention built for sm80 (fmha_cutlassF/B_f32_..._sm80: CUTLASS TensorOp
    as 3xTF32) on them; amp's nvjet GEMMs, half (hsh) and bf16 (tst), and cuDNN's wgmma attention on them
    too. Memory-efficient attention built for an older GPU runs on the CUDA cores (Simt)."""
    kernels = _gpt_h100()
    fmha = [n for n, p in kernels.items() if n.startswith("fmha_cutlass")]
    assert fmha and {kc.classify(n) for n in fmha} == {kc.TENSOR_CORE_MATMUL}
    assert {n.split("(")[0].rsplit("_", 1)[1] for n in fmha} == {"sm80"}
    assert kc.classify("fmha_cutlassF_f32_aligned_64x64_rf_sm75") == kc.OTHER_MATMUL  # f32 before sm80: Simt
    assert kc.classify("fmha_cutlassF_f16_aligned_64x64_rf_sm75") == kc.TENSOR_CORE_MATMUL
    assert kc.classify("fmha_cutlassF_f16_aligned_64x64_rf_sm70") == kc.OTHER_MATMUL
    fp32_gemms = [n for n, p in kernels.items() if p == "fp32" and ("gemm" in n or "sgemm" in n)]
    assert fp32_gemms and {kc.classify(n) for n in fp32_gemms} == {kc.OTHER_MATMUL}
    amp = [n for n, p in kernels.items() if p != "fp32" and (n.startswith("nvjet_sm90_") or "wgmma" in n)]
    assert {n.split("_")[2] for n in amp if n.startswith("nvjet")} >= {"hsh", "tst"}
    assert {kc.classify(n) for n in amp} == {kc.TENSOR_CORE_MATMUL}
