"""Where does a GPT-suite training step spend its GPU time, per precision? (a diagnostic, not a test)

    python scripts/profile_gpt_step.py --preset gpt-1b --precisions amp-bf16,fp8-tensorwise [--out DIR]

Trains the suite's own cell code (kit.bench.gpt.train.run_repeat: the model, torchao's float8 swap, the
per-block compile, fused AdamW, the precision's autocast and scaler) for one repeat per precision on
synthetic WikiText-2-shaped ids, and records ``--active`` steps after the compiled warm-up with
torch.profiler. Prints, per precision, GPU milliseconds per step by kind of kernel (bf16/fp16/fp32
GEMMs, fp8 GEMMs, attention, Triton kernels (Inductor's fused elementwise work: norms, GELU, fp8 casts
and their amax), the optimizer, other) and the differences between the first precision and the
others, so that an fp8 speedup below the GEMMs' own can be traced to the kernels that eat it (the suite's
fp8 targets). Writes profile_gpt.json to ``--out`` (default: the current folder). On the CPU (``--device
cpu --preset tiny``) it checks its own code path: there are no kernels, only operators.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: kernel-name patterns, first match wins. cuBLAS on Hopper names its GEMMs nvjet_* and sm90_xmma_*; its fp8
#: ones carry e4m3/e5m2/f8 or, in nvjet names, q (e4m3) and r (e5m2) as the two input types
#: (``nvjet_sm90_qqtst_...``, ``nvjet_sm90_qrtst_...``; bf16's are ``..._tst_...``). Inductor names a
#: Triton GEMM template ``triton_tem_*`` and its fused elementwise and reduction kernels ``triton_poi_*``,
#: ``triton_red_*`` and ``triton_per_*``, after the ops they fuse: a cast feeding ``_scaled_mm`` is called
#: ``triton_poi_fused__scaled_mm_...`` and is a cast, not a GEMM.
KINDS = (
    ("Triton (fused elementwise, norms, casts, amax)", ("triton_poi", "triton_red", "triton_per")),
    ("fp8 GEMM", ("e4m3", "e5m2", "f8f8", "_f8_", "fp8", "scaled_mm", re.compile(r"nvjet_sm\d+_[qr]{2}"))),
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("GEMM", ("gemm", "nvjet", "xmma", "cutlass", "cublas", "matmul", "mm_", "triton_tem")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    ("Triton (fused elementwise, norms, casts, amax)", ("triton",)),
)
OTHER = "other"


def is_annotation(event) -> bool:
    """A GPU-side range of a ``record_function`` (the profiler's ``ProfilerStep#N``, the optimizer's
    ``Optimizer.step#AdamW.step``), not a kernel."""
    return bool(getattr(event, "is_user_annotation", False)) or event.name.startswith(("ProfilerStep", "Optimizer."))


def kind_of(name: str) -> str:
    low = name.lower()
    for kind, words in KINDS:
        if any(w.search(low) if isinstance(w, re.Pattern) else w in low for w in words):
            return kind
    return OTHER


def profile_precision(preset: str, precision: str, device: str, active: int) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from kit.bench.gpt import config as gpt_config
    from kit.bench.gpt.train import Hooks, PROGRESS_EVERY, compile_state, run_repeat
    from kit.data.wikitext import load_wikitext2
    from kit.facts.models import gpt_train_flops_per_token

    groups = -(-active // PROGRESS_EVERY)  # the hooks fire every PROGRESS_EVERY steps
    cfg = gpt_config.resolve({"preset": preset, "steps": PROGRESS_EVERY * (groups + 1)})
    corpus = load_wikitext2(None, source="synthetic", seed=0, pad_vocab_to=cfg.pad_vocab_to)  # synthetic ids
    vocab = int(corpus.vocab_size)
    comp = compile_state(cfg.compile, device)
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    # the first group (warm-up, compilation) waits; the next ``groups`` are recorded (no profiler
    # warm-up: the waiting group is the training's own)
    warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
    with profile(activities=activities, schedule=schedule(wait=1, warmup=0, active=groups, repeat=1)) as prof:
        rec = run_repeat(cfg, corpus.train, None, vocab, precision, device, cfg.seed,
                         gpt_train_flops_per_token(cfg.d_model, cfg.n_layers, cfg.seq_len, vocab), comp,
                         cfg.warmup_steps, hooks=Hooks(on_steps=lambda n: prof.step()))
    steps = groups * PROGRESS_EVERY
    by_kind: dict = defaultdict(float)
    top: dict = defaultdict(float)
    for e in prof.events():
        if cuda:
            if getattr(e, "device_type", None) is None or str(e.device_type).endswith("CPU"):
                continue
            if is_annotation(e):  # spans the kernels it encloses: counting it would count them twice
                continue
            us = getattr(e, "device_time", None) or getattr(e, "cuda_time", 0.0)
        else:  # top-level operators only (those right under the profiler's step markers)
            parent = e.cpu_parent
            if e.name.startswith("ProfilerStep") or (parent is not None and not parent.name.startswith("ProfilerStep")):
                continue
            us = e.cpu_time
        by_kind[kind_of(e.name)] += us / 1000.0 / steps
        top[e.name] += us / 1000.0 / steps
    return {"precision": precision, "preset": preset, "device": torch.cuda.get_device_name(device) if cuda else "cpu",
            "tokens_per_s": rec.get("throughput_items_per_s"), "recorded_steps": steps,
            "ms_per_step_by_kind": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
            "top_kernels_ms_per_step": dict(sorted(top.items(), key=lambda kv: -kv[1])[:15]),
            "compile": comp.describe(), "fp8": rec.get("fp8")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="gpt-1b")
    ap.add_argument("--precisions", default="amp-bf16,fp8-tensorwise")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--active", type=int, default=5, help="steps recorded after the warm-up")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    from kit.bench.api import resolve_device

    device = resolve_device(args.device)
    rows = [profile_precision(args.preset, p, device, args.active) for p in args.precisions.split(",")]
    kinds = sorted({k for r in rows for k in r["ms_per_step_by_kind"]}, key=lambda k: -rows[0]["ms_per_step_by_kind"].get(k, 0))
    unit = "GPU ms per step" if device.startswith("cuda") else "CPU ms per step (operators)"
    print(f"{args.preset} on {rows[0]['device']}: {unit}, {rows[0]['recorded_steps']} steps recorded after the warm-up")
    print("| kind | " + " | ".join(r["precision"] for r in rows) + " |")
    print("| --- |" + " --- |" * len(rows))
    for k in kinds + ["total"]:
        vals = [sum(r["ms_per_step_by_kind"].values()) if k == "total" else r["ms_per_step_by_kind"].get(k, 0.0) for r in rows]
        print(f"| {k} | " + " | ".join(f"{v:.2f}" for v in vals) + " |")
    print("| tokens/s (this repeat) | " + " | ".join(f"{r['tokens_per_s'] or 0:,.0f}" for r in rows) + " |")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "profile_gpt.json").write_text(json.dumps(rows, indent=2, default=str))


if __name__ == "__main__":
    main()
