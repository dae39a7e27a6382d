"""What each profiler event of a training step is, by its name: ordered rules, the first match wins.

A rule is a regular expression over the name ``torch.profiler`` gives an event (a GPU kernel's
symbol such as ``sm80_xmma_gemm_...`` or ``void cutlass::Kernel2<cutlass_80_simt_sgemm...>``, a
copy or set such as ``Memcpy DtoD``, or on a CPU an operator such as ``aten::addmm``), the class it
puts the event in, why, and the public source the naming rests on. :func:`device_time_by_class`
sums a trace's device time by class. Names are matched as ``torch.profiler``'s tables print them
too: cut to 55 characters with ``...`` (:func:`parse_table` reads such a table), so every pattern
matches within a name's first 52 characters.

Sources of the naming (checked again where a rule depends on it):

- CUTLASS kernel names: ``tensorop`` runs on tensor cores (MMA), ``simt`` on the CUDA cores; an
  instruction shape such as ``s16816gemm`` or ``s1688gemm`` is a tensor-core MMA shape
  (CUTLASS ``media/docs/functionality.md`` and ``profiler.md``; answered at
  https://github.com/NVIDIA/cutlass/issues/1025 and https://github.com/NVIDIA/cutlass/issues/2117).
- cuBLAS on Hopper names its GEMMs ``nvjet_sm90_...``: warpgroup (wgmma) tensor-core kernels
  (https://github.com/GindaChen/nsys-ai/pull/582, which reports one reaching about 77% of an H100's
  dense fp16 peak). The letters after ``sm90_`` are the types: the kit's own profiles show ``hsh``
  (half in, fp32 compute, half out) in amp-fp16 cells, ``tst`` in amp-bf16 ones (t: bf16) and
  ``qqtst``/``qrtst`` in fp8 ones (q: e4m3, r: e5m2: the H200 GPT profile of 2026-12-02 by
  scripts/profile_gpt_step.py, commit 3167bdb, whose names tests/test_profile_gpt_script.py keeps;
  ``tst`` also in references/h100/window-cost/). cuBLAS's ``xmma`` GEMMs name their
  types as ``[A/B][C/D]`` (https://github.com/NVIDIA/TransformerEngine/issues/1391:
  ``sm90_xmma_gemm_bf16bf16_bf16f32_f32``).
- Volta/Turing cuBLAS and cuDNN tensor-core kernels carry ``884``/``1688``/``hmma`` in their names
  (``volta_h884gemm``, ``turing_fp16_s1688gemm``); the CUDA-core fp32 ones are ``*_sgemm_*``.
- PyTorch: ``GradScaler`` calls ``aten::_amp_foreach_non_finite_check_and_unscale_`` and
  ``aten::_amp_update_scale_`` (``aten/src/ATen/native/cuda/AmpKernels.cu``); foreach optimizers
  run ``multi_tensor_apply_kernel`` (``aten/src/ATen/native/cuda/MultiTensorApply.cuh``); NCCL's
  kernels are ``ncclKernel_*``/``ncclDevKernel_*``; CUPTI names copies and sets ``Memcpy HtoD``,
  ``Memcpy DtoD``, ``Memset``.
- Inductor (``torch.compile``) names its generated kernels ``triton_`` + the first three letters
  of their category (``poi``ntwise, ``red``uction, ``per``sistent reduction, ``for``each, ``spl``it
  scan, ``tem``plate) + ``fused_`` and the ops fused in + a number
  (``torch/_inductor/codegen/triton.py``, ``define_kernel``). Only a template is a GEMM or
  convolution; the rest are fused memory-bound work even where the name lists ``convolution``
  (the op whose output they finish), so they are classed by the prefix before any op name, after
  only the loss-scaling, communication and optimizer rules (a fused ``_foreach_`` update is the
  optimizer's).

Torch-free and Python 3.7 syntax (the cuda10 image reads results).
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

TENSOR_CORE_MATMUL = "tensor-core matmul/convolution"
OTHER_MATMUL = "other matmul/convolution"
NORM_ELEMENTWISE = "normalisation and elementwise"
CASTS_COPIES = "casts and copies"
OPTIMIZER = "optimizer"
LOSS_SCALING = "loss scaling"
COMMUNICATION = "communication"
OTHER = "other"

#: every class, in the order views show them
CLASSES: Tuple[str, ...] = (TENSOR_CORE_MATMUL, OTHER_MATMUL, NORM_ELEMENTWISE, CASTS_COPIES, OPTIMIZER,
                            LOSS_SCALING, COMMUNICATION, OTHER)

CUTLASS = "CUTLASS media/docs/functionality.md; github.com/NVIDIA/cutlass/issues/1025 and /2117"
NVJET = "github.com/GindaChen/nsys-ai/pull/582 (cuBLAS's Hopper nvjet GEMMs are wgmma tensor-core kernels)"
XMMA = "github.com/NVIDIA/TransformerEngine/issues/1391 (cuBLAS xmma names: [A/B types][C/D types])"
AMP = "PyTorch aten/src/ATen/native/cuda/AmpKernels.cu (GradScaler's ops)"
MEM_EFF = ("PyTorch aten/src/ATen/native/transformers/cuda/mem_eff_attention/gemm_kernel_utils.h, DefaultGemmType: "
           "TensorOp for f32 on sm80+ and f16/bf16 on sm75+, else Simt; kernel names from its kernels/ folder "
           "(fmha_cutlassB_f32_aligned_64x64_k64_sm80 in references/h100/window-cost/)")
SCUDNN = "github.com/pytorch/pytorch/issues/51382 (cuDNN's fp32 convolution kernels in a profile: volta_scudnn_*)"
INDUCTOR = ("PyTorch torch/_inductor/codegen/triton.py, define_kernel: \"triton_\" + the kernel's category cut to three "
            "letters (torch/_inductor/wrapper_benchmark.py) + its fused ops' names + a number")


class Rule(NamedTuple):
    pattern: str
    klass: str
    why: str
    source: Optional[str] = None


RULES: Tuple[Rule, ...] = (
    Rule(r"_amp_foreach_non_finite_check_and_unscale|amp_update_scale|_amp_non_finite", LOSS_SCALING,
         "GradScaler's unscale-and-check and its scale update (the op aten::_amp_update_scale_, its CUDA kernel "
         "at::native::amp_update_scale_cuda_kernel)", AMP),
    Rule(r"(?i)nccl|gloo|all_?reduce|all_?gather|reduce_scatter|c10d::", COMMUNICATION,
         "collectives: NCCL's kernels (ncclKernel_*, ncclDevKernel_*), torch.distributed's ops (nccl:all_reduce, "
         "gloo:all_reduce, c10d::allreduce_)",
         "NVIDIA NCCL kernel names"),
    Rule(r"multi_tensor_apply|multi_tensor|_foreach_|(?i:^aten::(sgd|adamw?|_fused_adamw?)_?$)|Optimizer\.step",
         OPTIMIZER, "foreach/fused optimizer kernels and ops; GradScaler's unscale runs a multi_tensor_apply "
         "kernel too, so from a kernel name alone (no op name) it counts here",
         "PyTorch aten/src/ATen/native/cuda/MultiTensorApply.cuh"),
    Rule(r"^triton_poi_fused__to_copy_\d+$", CASTS_COPIES,
         "an Inductor kernel that only casts (its fused name is the one op _to_copy)", INDUCTOR),
    Rule(r"^triton_tem_", OTHER_MATMUL,
         "an Inductor template kernel (a Triton GEMM or convolution, max-autotune): whether it runs on the tensor "
         "cores is not in the name, so it is counted off them (conservative)", INDUCTOR),
    Rule(r"^triton_[a-z]{3}_", NORM_ELEMENTWISE,
         "an Inductor-generated kernel (pointwise, reduction, persistent reduction, foreach, split scan): fused "
         "memory-bound work, whatever ops its fused name lists (\"triton_poi_fused_convolution_relu_0\" applies "
         "a convolution's bias and ReLU; the convolution itself runs in cuDNN)", INDUCTOR),
    Rule(r"nvjet_sm\d+_(?:[ht]|[qr]{2})", TENSOR_CORE_MATMUL,
         "cuBLAS's Hopper GEMMs (nvjet) whose types (A, B, then compute and output) start with half (h), bf16 (t) "
         "or two fp8 inputs (q e4m3, r e5m2): wgmma tensor-core kernels (the kit's own profiles: nvjet_sm90_hsh "
         "in amp-fp16 cells, nvjet_sm90_tst in amp-bf16 ones, nvjet_sm90_qqtst and _qrtst in fp8 ones)",
         NVJET),
    Rule(r"nvjet_", OTHER_MATMUL, "another nvjet GEMM (fp32 inputs, s, or types not listed above): whether it "
         "runs on the tensor cores (as TF32) is not established here, so it is counted off them (conservative)",
         NVJET),
    Rule(r"(?i)tensorop|s16816|s1688|h1688|h884|s884|i8816|hmma|imma|wgmma|"
         r"xmma_(?:gemm|fprop|dgrad|wgrad)\w*?_(?:f16|bf16|e4m3|e5m2|tf32)",
         TENSOR_CORE_MATMUL, "tensor-core MMA in the name (CUTLASS tensorop, an MMA shape, hmma; an xmma GEMM "
         "or convolution with half, bf16, fp8 or tf32 inputs)", CUTLASS + "; " + XMMA),
    Rule(r"(?i)xmma_(gemm|fprop|dgrad|wgrad)_f32f32", OTHER_MATMUL,
         "an xmma GEMM or convolution with fp32 inputs: whether it uses tensor cores (as TF32) is not in the "
         "name and not established here, so it is counted off them (conservative)", XMMA),
    Rule(r"^fmha_cutlass[FB]_(?:b?f16_\w*?_sm(?:7[5-9]|[89]\d|\d{3})|f32_\w*?_sm(?:[89]\d|\d{3}))", TENSOR_CORE_MATMUL,
         "PyTorch's memory-efficient attention (fmha_cutlassF_* forward, fmha_cutlassB_* backward: two matmuls and a "
         "softmax in one kernel), built for sm75+ in half or bf16, or sm80+ in fp32 (as 3xTF32, "
         "OpMultiplyAddFastF32; GPT's fp32 cells run it): its matmuls are CUTLASS TensorOp", MEM_EFF),
    Rule(r"^fmha_cutlass[FB]_", OTHER_MATMUL,
         "PyTorch's memory-efficient attention built for an older GPU: its matmuls are CUTLASS Simt (the CUDA "
         "cores)", MEM_EFF),
    Rule(r"(?i)Memcpy|Memset|copy_|^aten::(to|_to_copy|copy_|clone|contiguous)$|cast|convert|_to_copy|"
         r"nchwToNhwc|nhwcToNchw", CASTS_COPIES,
         "copies, sets and dtype casts (CUPTI's Memcpy/Memset, aten::to/_to_copy/copy_), and cuDNN's layout "
         "transposes around a convolution (cudnn::engines_precompiled::nchwToNhwcKernel, nhwcToNchwKernel)",
         "CUPTI activity names; the H100 profiles in references/h100/explain/"),
    Rule(r"(?i)simt|sgemm|dgemm|gemv|gemmSN|gemmk1|splitKreduce|(?:^|_)(h|s)?gemm|cublas|conv|implicit_gemm|"
         r"scudnn|winograd|fft2d|fprop|dgrad|wgrad|^aten::(mm|addmm|bmm|matmul|linear|_?convolution|conv\w*|"
         r"mkldnn_\w+|_?lstm\w*|_thnn_fused_lstm\w*|_cudnn_rnn\w*)$",
         OTHER_MATMUL, "a matmul or convolution with no tensor-core mark: CUTLASS simt, cuBLAS sgemm/gemv and "
         "split-K reductions, cuDNN convolutions named by algorithm or as its fp32 CUDA-core kernels (scudnn: "
         "volta_scudnn_128x128_relu_interior_nn_v1, whose \"relu\" is a fused epilogue), CPU matmul and convolution "
         "ops", CUTLASS + "; " + SCUDNN),
    Rule(r"^autograd::|Backward\d*$|^ProfilerStep", OTHER,
         "autograd's and the profiler's wrapper events: their own time is bookkeeping, the work is in the "
         "ops and kernels under them", None),
    Rule(r"(?i)elementwise|elementWise|batch_norm|batchnorm|layer_norm|layernorm|bn_fw|bn_bw|norm|softmax|"
         r"SoftMax|reduce|dropou|relu|gelu|sigmoid|tanh|add|mul|div|sub|pool|adaptive(?:max|avg)|embedding|loss|cross_entropy|"
         r"nll|RNNcell|index|cat|fill|where|sum|mean|clamp|exp|log|sqrt",
         NORM_ELEMENTWISE, "pointwise, normalisation, reduction, softmax, dropout, pooling and embedding "
         "kernels and ops (memory-bound work; atomicadaptivemaxgradinput is adaptive max pooling's backward)", None),
)

_COMPILED = tuple((re.compile(r.pattern), r) for r in RULES)


def rule_for(name: str) -> Optional[Rule]:
    """The first rule whose pattern matches ``name`` (searched anywhere in it), or None."""
    for pattern, rule in _COMPILED:
        if pattern.search(name):
            return rule
    return None


def classify(name: str) -> str:
    """The class of an event's name (:data:`OTHER` when no rule matches)."""
    rule = rule_for(name)
    return rule.klass if rule else OTHER


def device_time_by_class(events: Iterable[Tuple[str, float]]) -> Dict[str, float]:
    """{class: summed time} over ``(name, time)`` pairs (any one unit), every class present (0 where
    none). Each name is classed once: a window of an eager step holds tens of thousands of events of a
    few hundred kernels, and classing each event's templated name took 0.7-1.7 s a window on an H100's
    host (references/h100/window-trials/)."""
    per_name: Dict[str, float] = {}
    for name, t in events:
        per_name[name] = per_name.get(name, 0.0) + float(t)
    out = {k: 0.0 for k in CLASSES}
    for name, t in per_name.items():
        out[classify(name)] += t
    return out


_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
_TIME = re.compile(r"^([0-9.]+)(us|ms|s)$")


def parse_table(text: str, column: str = "Self CUDA") -> List[Tuple[str, float]]:
    """``(name, seconds)`` per row of a ``torch.profiler`` key-averages table
    (``prof.key_averages().table()``): the name as printed (cut to 55 characters) and the row's
    ``column`` ("Self CUDA" on a GPU, "Self CPU" on a CPU). Header and rule lines are skipped;
    ValueError if the table has no such column."""
    lines = text.splitlines()
    header = next((ln for ln in lines if ln.strip().startswith("Name") and column in ln), None)
    if header is None:
        raise ValueError(f"not a torch.profiler table with a {column!r} column")
    names = [h.strip() for h in re.split(r"\s{2,}", header.strip())]
    at = names.index(column)
    rows = []
    for ln in lines[lines.index(header) + 1:]:
        cells = [c.strip() for c in re.split(r"\s{2,}", ln.strip())]
        if len(cells) != len(names) or set(ln.strip()) <= {"-", " "}:
            continue
        m = _TIME.match(cells[at])
        if m:
            rows.append((cells[0], float(m.group(1)) * _UNITS[m.group(2)]))
    return rows
