"""Which compilation of the GPT step makes fp8 pay most? (a diagnostic, not a test)

    python scripts/probe_gpt_fp8.py --preset gpt-1b --variants block,whole,block-autotune [--out DIR]

Trains the suite's own cell code (kit.bench.gpt.train.run_repeat: the model, torchao's float8 swap,
fused AdamW, the precision's autocast) for one repeat per precision and variant on synthetic
WikiText-2-shaped ids, and prints steady tokens/s and fp8 ÷ bf16 per variant. Only the compilation
differs between variants:

    block            the suite's own: each Block and the head + loss compiled (torch.compile default mode)
    whole            the whole loss (embeddings, every block, head, loss) as one torch.compile graph
    block-nd-tiling  as block, with Inductor's ``triton.prefer_nd_tiling``: 2-D tiles for pointwise
                     kernels that read and write in different layouts, as the fp8 casts that also
                     write a transposed copy for the weight-gradient GEMM do (the H200 profile of
                     2026-12-02 found those casts the cost that eats fp8's GEMM gain)
    block-autotune   as block, with mode="max-autotune-no-cudagraphs" (Inductor benchmarks GEMM
                     templates, Triton's among them, against cuBLAS per shape; on the H200 each bf16
                     GEMM shape took 25-28 s, so the variant needs a command of its own)
    block-cdt        as block, with Inductor's ``coordinate_descent_tuning``: each Triton kernel's
                     block sizes and warps tuned by benchmarking neighbours of its heuristic config
                     (the casts' amax reductions and transposing writes are such kernels)
    block-nd-cdt     both of the above: 2-D tiles, then tuned
    block-tile-red   as block-nd-tiling, with ``triton.tile_reductions`` (2-D tiles for reductions too)
    block-bench-fusion as block, with Inductor's ``benchmark_fusion``: each candidate fusion is
                     timed against the unfused kernels (a cast fused with its transposing write
                     might be slower than the two apart)
    block-fast-accum NOT the suite's recipe: as block, but torchao's tensorwise config with fast
                     (lower-precision) accumulation in the grad-input and grad-weight GEMMs too;
                     torchao's default keeps it for the forward GEMM only. What the accumulation
                     choice costs, measured; the suite does not use it (it changes the numerics)

Each variant's rows are written to ``--out``/probe_gpt_fp8.json as soon as they are measured, so a
command cut short keeps what finished. Synthetic data: throughput only.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Inductor options of the per-block variants (torch.compile(options=...)); block-autotune sets a mode instead.
BLOCK_OPTIONS = {
    "block-nd-tiling": {"triton.prefer_nd_tiling": True},
    "block-cdt": {"coordinate_descent_tuning": True},
    "block-nd-cdt": {"triton.prefer_nd_tiling": True, "coordinate_descent_tuning": True},
    "block-tile-red": {"triton.prefer_nd_tiling": True, "triton.tile_reductions": True},
    "block-bench-fusion": {"benchmark_fusion": True},
}
#: variants that change torchao's float8 config, not the compilation
RECIPE_VARIANTS = ("block-fast-accum",)
VARIANTS = ("block", "whole", "block-autotune", *BLOCK_OPTIONS, *RECIPE_VARIANTS)


def compile_variant(name: str):
    """An apply_compile(model, state) for kit.bench.gpt.train, per variant."""
    import torch

    from kit.bench.gpt import train
    from kit.bench.gpt.model import lm_loss

    if name == "block" or name in RECIPE_VARIANTS:
        return train.apply_compile

    def whole(model, state):
        def loss(x, y):
            return lm_loss(model.logits(model.hidden(x)), y)
        return torch.compile(loss, dynamic=False) if state.enabled else loss

    def per_block(**compile_kwargs):  # the suite's own per-block compile, with torch.compile's mode or options
        return functools.partial(train.apply_compile, **compile_kwargs)

    if name in BLOCK_OPTIONS:
        return per_block(options=dict(BLOCK_OPTIONS[name]))
    return {"whole": whole, "block-autotune": per_block(mode="max-autotune-no-cudagraphs")}[name]


@contextlib.contextmanager
def recipe_variant(name: str):
    """block-fast-accum: torchao's recipe config with fast accumulation in all three GEMMs."""
    if name not in RECIPE_VARIANTS:
        yield
        return
    from torchao.float8 import Float8LinearConfig
    from torchao.float8.config import Float8GemmConfig

    original = Float8LinearConfig.from_recipe_name

    def fast(recipe_name):
        fast_gemm = Float8GemmConfig(use_fast_accum=True)
        return dataclasses.replace(original(recipe_name), gemm_config_output=fast_gemm,
                                   gemm_config_grad_input=fast_gemm, gemm_config_grad_weight=fast_gemm)

    Float8LinearConfig.from_recipe_name = staticmethod(fast)
    try:
        yield
    finally:
        Float8LinearConfig.from_recipe_name = staticmethod(original)


def measure(preset: str, variant: str, precision: str, device: str, steps: int) -> dict:
    import torch

    from kit.bench.gpt import config as gpt_config
    from kit.bench.gpt import train
    from kit.data.wikitext import load_wikitext2
    from kit.facts.models import gpt_train_flops_per_token

    torch._dynamo.reset()
    cfg = gpt_config.resolve({"preset": preset, "steps": steps})
    corpus = load_wikitext2(None, source="synthetic", seed=0, pad_vocab_to=cfg.pad_vocab_to)
    vocab = int(corpus.vocab_size)
    comp = train.compile_state(cfg.compile, device)
    saved = train.apply_compile
    train.apply_compile = compile_variant(variant)
    t0 = time.perf_counter()
    try:
        with recipe_variant(variant):
            rec = train.run_repeat(cfg, corpus.train, None, vocab, precision, device, cfg.seed,
                                   gpt_train_flops_per_token(cfg.d_model, cfg.n_layers, cfg.seq_len, vocab), comp,
                                   cfg.warmup_steps)
    finally:
        train.apply_compile = saved
    return {"preset": preset, "variant": variant, "precision": precision,
            "tokens_per_s": rec.get("throughput_items_per_s"), "achieved_tflops": rec.get("achieved_tflops"),
            "time_to_first_step_s": rec.get("time_to_first_step_s"), "wall_s": round(time.perf_counter() - t0, 1),
            "peak_memory_gib": (rec.get("peak_memory_bytes") or 0) / 2**30, "timed_steps": steps,
            "compile_reason": comp.reason, "recompile_warnings": len(comp.recompile_warnings)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="gpt-1b")
    ap.add_argument("--variants", default="block,whole")
    ap.add_argument("--precisions", default="amp-bf16,fp8-tensorwise")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per repeat")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    variants = args.variants.split(",")
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        sys.exit(f"error: unknown variant(s) {', '.join(bad)}; choose from {', '.join(VARIANTS)}")
    from kit.bench.api import resolve_device

    device = resolve_device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list = []
    for variant in variants:
        for precision in args.precisions.split(","):
            row = measure(args.preset, variant, precision, device, args.steps)
            rows.append(row)
            print(json.dumps(row), flush=True)
            (out / "probe_gpt_fp8.json").write_text(json.dumps(rows, indent=2, default=str))
    print(f"\n{args.preset}: steady tokens/s ({args.steps} timed steps, one repeat each)")
    precisions = args.precisions.split(",")
    print("| variant | " + " | ".join(precisions) + " | fp8-tensorwise ÷ amp-bf16 |")
    print("| --- |" + " --- |" * (len(precisions) + 1))
    for variant in variants:
        got = {r["precision"]: r["tokens_per_s"] for r in rows if r["variant"] == variant}
        ratio = (got.get("fp8-tensorwise") or 0) / got["amp-bf16"] if got.get("amp-bf16") else None
        cells = " | ".join(f"{got.get(p) or 0:,.0f}" for p in precisions)
        print(f"| {variant} | {cells} | " + (f"{ratio:.3f}" if ratio else "—") + " |")


if __name__ == "__main__":
    main()
