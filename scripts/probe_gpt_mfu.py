"""How near the calibrated matmul peak does the GPT suite's step run, and what moves it? (a diagnostic)

    python scripts/probe_gpt_mfu.py --preset gpt-1b --variants base,attn-cudnn,attn-flash,clip-in-adamw \
        [--precisions amp-bf16,fp8-tensorwise] [--steps 20] [--profile] [--out DIR]

Trains the suite's own cell code (kit.bench.gpt.train.run_repeat: the model, torchao's float8 swap, the
per-block compile, fused AdamW, the precision's autocast, gradient clipping) for one repeat per variant
and precision on synthetic WikiText-2-shaped ids, and reports steady tokens/s, the model's achieved
TFLOP/s (6 N + 12 L d T per token, kit.facts.models.gpt_train_flops_per_token, as a cell records it)
and that as a fraction of this GPU's calibrated matmul peak (kit.bench.calibrate: bf16's, and for the
fp8 modes fp8's as well). One variant changes one thing:

    base           the suite's step as it is
    attn-cudnn     attention through cuDNN's fused kernel only (torch.nn.attention.sdpa_kernel)
    attn-flash     attention through FlashAttention-2 only
    attn-efficient attention through the memory-efficient kernel only
    clip-in-adamw  the gradient clipping's multiply folded into fused AdamW: the clip coefficient handed
                   to the optimizer as its grad_scale (the fused kernel divides each gradient by it as it
                   reads it), instead of a pass of its own over every gradient
    compiled-adamw clipping and AdamW (foreach, capturable, the learning rate a device tensor) compiled
                   together by Inductor, instead of the fused kernel and clip_grad_norm_
    A+B            the changes of A and B together (attn-cudnn+clip-in-adamw)

--profile adds, for the first variant and precision, GPU milliseconds per step by kind of kernel
(scripts/profile_gpt_step.py's classes) and the top kernels. Each row is written to
--out/probe_gpt_mfu.json as soon as it is measured, so a command cut short keeps what finished.
Synthetic data: throughput only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VARIANTS = ("base", "attn-cudnn", "attn-flash", "attn-efficient", "clip-in-adamw", "compiled-adamw")
ATTENTION = {"attn-cudnn": "CUDNN_ATTENTION", "attn-flash": "FLASH_ATTENTION", "attn-efficient": "EFFICIENT_ATTENTION"}


@contextlib.contextmanager
def patched(obj, name: str, value):
    saved = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, saved)


def clip_in_adamw(stack: contextlib.ExitStack) -> None:
    """Fold the clip's multiply into fused AdamW: clip_grad_norm_ only measures the norm and leaves the
    coefficient for the optimizer, whose step hands it to the fused kernel as grad_scale (it divides each
    gradient by it: 1 / min(1, max_norm / (norm + 1e-6)), torch's clip rule)."""
    import torch

    from kit.bench.gpt import train

    pending: dict = {}

    def clip(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
        grads = [p.grad for p in parameters if p.grad is not None]
        norm = torch.nn.utils.get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
        pending["grad_scale"] = torch.clamp((norm + 1e-6) / max_norm, min=1.0)
        return norm

    made = train.optimizer_for

    def optimizer_for(model, lr, device):
        opt, name = made(model, lr, device)
        step = opt.step

        def folded_step(*a, **k):
            opt.grad_scale = pending.pop("grad_scale")
            try:
                return step(*a, **k)
            finally:
                del opt.grad_scale
        opt.step = folded_step
        return opt, name + ", the clip's coefficient as its grad_scale"

    stack.enter_context(patched(torch.nn.utils, "clip_grad_norm_", clip))
    stack.enter_context(patched(train, "optimizer_for", optimizer_for))


def compiled_adamw(stack: contextlib.ExitStack) -> None:
    """Clipping and AdamW as one function compiled by Inductor (the clip inside, so its multiply fuses
    into the update); the suite's own clip_grad_norm_ call becomes a no-op."""
    import torch

    from kit.bench.gpt import train
    from kit.bench.gpt.config import BETAS, GRAD_CLIP, WEIGHT_DECAY

    clip = torch.nn.utils.clip_grad_norm_

    class CompiledAdamW:
        def __init__(self, model, lr, device):
            params = [p for p in model.parameters() if p.requires_grad]
            decay = [p for p in params if p.dim() >= 2]
            no_decay = [p for p in params if p.dim() < 2]
            groups = [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}]
            self.opt = torch.optim.AdamW(groups, lr=torch.tensor(lr, device=device), betas=BETAS, foreach=True,
                                         capturable=True)
            # what run_repeat sets each step: the rates, filled into the optimizer's own device tensors at
            # step(), so the compiled step reads a tensor (a new float would recompile it every step)
            self.param_groups = [{"lr": lr} for _ in self.opt.param_groups]
            self.params = params
            self._step = torch.compile(self._clip_and_step)

        def _clip_and_step(self):
            clip(self.params, GRAD_CLIP, foreach=True)
            self.opt.step()

        def step(self):
            for mine, theirs in zip(self.param_groups, self.opt.param_groups):
                theirs["lr"].fill_(mine["lr"])
            self._step()

        def zero_grad(self, set_to_none=True):
            self.opt.zero_grad(set_to_none=set_to_none)

    stack.enter_context(patched(torch.nn.utils, "clip_grad_norm_", lambda *a, **k: None))
    stack.enter_context(patched(train, "optimizer_for",
                                lambda model, lr, device: (CompiledAdamW(model, lr, device), "AdamW (foreach, compiled with the clip)")))


def variant(name: str) -> contextlib.ExitStack:
    """The changes of variant ``name`` (several joined by "+": each of them), entered on one stack."""
    stack = contextlib.ExitStack()
    for part in name.split("+"):
        if part in ATTENTION:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            stack.enter_context(sdpa_kernel([getattr(SDPBackend, ATTENTION[part])]))
        elif part == "clip-in-adamw":
            clip_in_adamw(stack)
        elif part == "compiled-adamw":
            compiled_adamw(stack)
    return stack


def peaks(device: str, fp8: bool) -> dict:
    """This GPU's calibrated peaks (kit.bench.calibrate's sweep): bf16, and fp8 where asked."""
    from kit.bench import calibrate

    out = {"bf16": calibrate.sweep(lambda n: calibrate.matmul_tflops(device, "bf16", n=n))["best"]}
    if fp8:
        out["fp8"] = calibrate.sweep(lambda n: calibrate.scaled_mm_tflops(device, n=n))["best"]
    return out


def measure(preset: str, name: str, precision: str, device: str, steps: int, peak: dict) -> dict:
    import torch

    from kit.bench.compilation import fresh_compilation
    from kit.bench.gpt import config as gpt_config
    from kit.bench.gpt import train
    from kit.data.wikitext import load_wikitext2
    from kit.facts.models import gpt_train_flops_per_token

    fresh_compilation(precision)  # as a cell does
    cfg = gpt_config.resolve({"preset": preset, "steps": steps})
    corpus = load_wikitext2(None, source="synthetic", seed=0, pad_vocab_to=cfg.pad_vocab_to)
    vocab = int(corpus.vocab_size)
    comp = train.compile_state(cfg.compile, device)
    t0 = time.perf_counter()
    with variant(name):
        rec = train.run_repeat(cfg, corpus.train, None, vocab, precision, device, cfg.seed,
                               gpt_train_flops_per_token(cfg.d_model, cfg.n_layers, cfg.seq_len, vocab), comp,
                               cfg.warmup_steps)
    tflops = rec.get("achieved_tflops")
    row = {"preset": preset, "variant": name, "precision": precision, "tokens_per_s": rec.get("throughput_items_per_s"),
           "achieved_tflops": tflops, "of_bf16_peak": tflops / peak["bf16"] if tflops and peak.get("bf16") else None,
           "time_to_first_step_s": rec.get("time_to_first_step_s"), "wall_s": round(time.perf_counter() - t0, 1),
           "peak_memory_gib": (rec.get("peak_memory_bytes") or 0) / 2**30, "timed_steps": steps,
           "optimizer": rec["metrics"].get("optimizer"), "compile": comp.describe(),
           "final_loss": rec.get("final_loss")}
    if precision.startswith("fp8") and tflops and peak.get("fp8"):
        row["of_fp8_peak"] = tflops / peak["fp8"]
    torch.cuda.empty_cache()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="gpt-1b")
    ap.add_argument("--variants", default="base,attn-cudnn,attn-flash,clip-in-adamw")
    ap.add_argument("--precisions", default="amp-bf16")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per repeat")
    ap.add_argument("--profile", action="store_true", help="profile the first variant and precision by kind of kernel")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()
    names = args.variants.split(",")
    bad = [v for v in names if any(part not in VARIANTS for part in v.split("+"))]
    if bad:
        sys.exit(f"error: unknown variant(s) {', '.join(bad)}; choose from {', '.join(VARIANTS)}")
    from kit.bench.api import resolve_device

    device = resolve_device(args.device)
    precisions = args.precisions.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    peak = peaks(device, any(p.startswith("fp8") for p in precisions))
    print(f"calibrated peaks (TFLOP/s): {json.dumps(peak)}", flush=True)
    result: dict = {"peaks_tflops": peak, "rows": []}
    if args.profile:
        import profile_gpt_step  # scripts/, beside this file

        result["profile"] = profile_gpt_step.profile_precision(args.preset, precisions[0], device, 5)
        print(json.dumps(result["profile"]["ms_per_step_by_kind"]), flush=True)
        (args.out / "probe_gpt_mfu.json").write_text(json.dumps(result, indent=1, default=str))
    for name in names:
        for precision in precisions:
            try:
                row = measure(args.preset, name, precision, device, args.steps, peak)
            except Exception as exc:  # one variant's failure is its row, not the end of the probe
                row = {"variant": name, "precision": precision, "error": f"{exc.__class__.__name__}: {exc}"[:500]}
            result["rows"].append(row)
            print(json.dumps(row, default=str), flush=True)
            (args.out / "probe_gpt_mfu.json").write_text(json.dumps(result, indent=1, default=str))
    print(f"\n{args.preset}: steady tokens/s ({args.steps} timed steps, one repeat each); model FLOPs ÷ calibrated peak")
    print("| variant | precision | tokens/s | TFLOP/s | ÷ bf16 peak | ÷ fp8 peak |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in result["rows"]:
        if "error" in r:
            print(f"| {r['variant']} | {r['precision']} | failed: {r['error'][:80]} | | | |")
            continue
        fp8 = f"{r['of_fp8_peak']:.3f}" if r.get("of_fp8_peak") else "—"
        print(f"| {r['variant']} | {r['precision']} | {r['tokens_per_s'] or 0:,.0f} | {r['achieved_tflops'] or 0:.1f} | "
              f"{r['of_bf16_peak'] or 0:.3f} | {fp8} |")


if __name__ == "__main__":
    main()
