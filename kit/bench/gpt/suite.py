"""``kit run --suite gpt``: one cell = one preset x one precision mode, N repeats.

    run_cell(spec, ctx)
      config.resolve(spec.params)             preset + overrides, validated
      unavailable_reason(mode, device)        -> CellResult.skipped(reason): fp8 off Ada/Hopper/
                                                 Blackwell or without torchao, fp16 on the CPU, ...
      the corpus (real or synthetic)          vocabulary padded to a multiple of 64
      compilation.fresh_compilation           each cell compiles afresh: no cached graph of
                                                 another precision or shape, no recompile limit
      for each repeat: train.run_repeat       fresh model, seed = 1337 + --seed + repeat
      -> CellResult(status="ok", throughput_unit="tokens", ...)

In convergence mode ``final_metric`` is the held-out loss (mean cross-entropy on the valid
split's first windows; on test with ``--train-split valid``) after the preset's ``convergence_steps``; kit.results.derive compares
every precision's with amp-bf16's (fp8 and fp16 within 1%).
"""

from __future__ import annotations

from typing import Any

import torch

from kit.bench import methods, profile_window
from kit.bench.gpt import config as gpt_config
from kit.bench.gpt.data import heldout_batches
from kit.bench.gpt.train import CompileState, Hooks, compile_state, run_repeat
from kit.bench.compilation import fresh_compilation, reset_compiler
from kit.bench.precision import FP8_RECIPES, unavailable_reason
from kit.data.wikitext import corpus_provenance
from kit.errors import KitError
from kit.facts.models import gpt_matmul_params, gpt_train_flops_per_token
from kit.results import precisions as precision_modes
from kit.results import step_profile
from kit.results.schema import CellResult, CellSpec
from kit.results.stats import repeat_notes, summarise_repeats
from kit.bench.context import CellContext
from kit.bench.gpt import SUITE


_corpus_cache: dict[tuple, Any] = {}


def load_corpus(ctx: CellContext, pad_vocab_to: int, splits: tuple | None = None):
    """The corpus for this run, loaded once per (folder, source, seed, padding, splits read)."""
    from kit.data.wikitext import SPLITS, load_wikitext2

    key = (str(ctx.data_dir), ctx.data_source, ctx.seed, pad_vocab_to, splits)
    if key not in _corpus_cache:
        _corpus_cache.clear()
        _corpus_cache[key] = load_wikitext2(ctx.data_dir, source=ctx.data_source, seed=ctx.seed, pad_vocab_to=pad_vocab_to,
                                            splits=splits or SPLITS)
    return _corpus_cache[key]


def _sdpa_reason() -> str | None:
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        return f"torch {torch.__version__} has no scaled_dot_product_attention (torch 2.0+); the GPT suite needs it"
    return None


def run_cell(spec: CellSpec, ctx: CellContext) -> CellResult:
    cfg = gpt_config.resolve(spec.params, ctx.mode)
    reason = _sdpa_reason() or unavailable_reason(spec.precision, ctx.device)
    if reason:
        return CellResult.skipped(spec, reason, throughput_unit="tokens")

    corpus = load_corpus(ctx, cfg.pad_vocab_to, gpt_config.splits_read(cfg.train_split))
    vocab = int(corpus.vocab_size)
    train_ids = getattr(corpus, cfg.train_split)
    split_tokens = {s: int(len(getattr(corpus, s))) for s in ("train", "valid", "test")}
    gpt_config.check_seq_len(cfg.seq_len, split_tokens, ctx.mode, cfg.train_split)  # the corpus actually read
    heldout = (heldout_batches(getattr(corpus, cfg.heldout_split), cfg.seq_len, cfg.batch_size, gpt_config.EVAL_BATCHES, ctx.device)
               if ctx.mode == "convergence" else None)
    flops_per_token = gpt_train_flops_per_token(cfg.d_model, cfg.n_layers, cfg.seq_len, vocab)

    cache_note = fresh_compilation(spec.precision)
    comp = compile_state(cfg.compile, ctx.device)
    # The first optimizer built in a process imports torch._dynamo (seconds on a small CPU);
    # pay that here, not in the first repeat's time to first step (as the LSTM suite does).
    torch.optim.AdamW([torch.zeros(1, requires_grad=True)], lr=1.0)
    per_repeat = cfg.steps + (0 if ctx.mode == "convergence" else max(1, cfg.warmup_steps))
    total = ctx.repeats * per_repeat
    done = 0
    repeats: list[dict] = []
    profile: dict = {}  # the profiled window's, after the last repeat's record (where ctx asks for one)
    r = 0
    while r < ctx.repeats:
        seed = cfg.seed + ctx.seed + r

        def on_steps(n: int, _r: int = r) -> None:
            nonlocal done
            done += n
            ctx.progress(min(done, total), total, f"repeat {_r + 1}/{ctx.repeats}")

        warm = cfg.warmup_steps if r == 0 else 1
        after = profile_window.into(profile, ctx.device, ctx.profile_steps) \
            if r == ctx.repeats - 1 and ctx.profile_steps else None
        try:
            record = run_repeat(cfg, train_ids, heldout, vocab, spec.precision, ctx.device, seed,
                                flops_per_token, comp, warm, Hooks(on_steps=on_steps, should_stop=ctx.should_stop),
                                after=after)
        except (KeyboardInterrupt, KitError):
            raise
        except Exception as exc:
            if not comp.enabled or r > 0:
                raise
            # torch.compile failed (no Triton, an unsupported op, ...): the cell runs eager and says why
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            comp.enabled, comp.fell_back = False, True
            comp.reason = f"torch.compile failed, ran eager instead ({exc.__class__.__name__}: {first})"
            reset_compiler()
            done = 0
            continue
        record["repeat"] = r
        repeats.append(record)
        ctx.event("note", message=f"repeat {r + 1}/{ctx.repeats} done", repeat=r,
                  tokens_per_s=record["throughput_items_per_s"], final_metric=record["final_metric"])
        r += 1

    first = repeats[0]
    notes = _notes(cfg, ctx, repeats, comp, spec.precision) + ([cache_note] if cache_note and comp.enabled else [])
    metrics = {
        "settings": cfg.to_dict(),
        "precision": first.get("precision"),
        "compile": comp.describe(),
        "optimizer": first["metrics"].get("optimizer"),
        "params": first["metrics"].get("params"),
        "matmul_params": gpt_matmul_params(cfg.d_model, cfg.n_layers, vocab),
        "flops_per_token": flops_per_token,
        "flops_formula": "6 N + 12 L d T (N = matmul weights incl. the LM head; attention without the causal halving; PaLM appendix B)",
        "tokens_per_step": cfg.batch_size * cfg.seq_len,
        # the cell's compilation shows in its first repeat (later ones reuse the compiled code)
        "first_repeat_time_to_first_step_s": first.get("time_to_first_step_s"),
        "final_metric_name": "heldout_loss" if ctx.mode == "convergence" else "train_loss",
        "lower_is_better": True,
        # the suite's question (its descriptor's parity rule, applied by kit.results.derive): is fp8
        # within 1% of bf16's held-out loss after the same steps?
        "parity_base": SUITE.parity.base,
        "parity_tolerance_rel": spec.params.get("tolerance") or SUITE.parity.tolerance,
        "seeds": [rec["seed"] for rec in repeats],
        "layers_high_precision": _high_precision_layers(spec.precision, first),
    }
    if ctx.mode == "convergence":
        metrics["convergence_steps_reason"] = gpt_config.CONVERGENCE_STEPS_REASON
    if "fp8" in first:
        metrics["fp8"] = first["fp8"]
    return CellResult(
        spec.workload, spec.model, spec.precision, spec.engine, "ok",
        params=spec.params,
        throughput_unit="tokens",
        repeats=repeats,
        summary=summarise_repeats(repeats),
        metrics=metrics,
        data=_provenance(corpus, vocab, cfg),
        notes=notes,
        method=methods.record(f"gpt/{spec.engine}", {
            "preset": spec.model,
            "step": "torch.compile per block" if comp.enabled else "eager",
            "optimizer": "fused" if "(fused)" in str(metrics["optimizer"]) else "AdamW",
            "loss_scale": methods.loss_scale(spec.precision),
            "data": "device-resident token windows",
            "excluded_steps": methods.warmup_excluded(repeats),
            "timed_steps": cfg.steps,
            "batch_size": cfg.batch_size,
            "seq_len": cfg.seq_len,
        }, {"compile": comp.reason} if comp.reason else None),
        profile=step_profile.with_timed_step(profile, repeats),
    )


def _high_precision_layers(mode: str, record: dict) -> dict:
    """Per cell: which layers run in which precision (the fp8 recipes' exceptions named)."""
    if mode in FP8_RECIPES:
        fp8 = record.get("fp8") or {}
        return {"fp8": fp8.get("fp8_linear_patterns"), **(fp8.get("kept_high_precision") or {}),
                "other": fp8.get("not_linear")}
    dtype = precision_modes.mode(mode).peak_dtype if precision_modes.mode(mode).autocast else None
    if dtype:
        return {"all Linear layers": f"{dtype} (autocast)", "other": "autocast's fp32 list (LayerNorm, softmax, the loss) in fp32"}
    return {"all": "fp32 (TF32 GEMMs)" if precision_modes.mode(mode).peak_dtype == "tf32" else "fp32"}


def _provenance(corpus, vocab: int, cfg) -> dict:
    info = corpus_provenance(corpus, vocab, cfg.pad_vocab_to)
    info.update({
        "sampling": f"random windows of seq_len + 1 tokens from the {cfg.train_split} split (nanoGPT's get_batch), on the device",
        "train_split": cfg.train_split,
    })
    if cfg.mode == "convergence":
        info["heldout_split"] = cfg.heldout_split
        info["heldout"] = (f"the {cfg.heldout_split} split's first {gpt_config.EVAL_BATCHES} batches of "
                           f"{cfg.batch_size} consecutive windows of {cfg.seq_len} tokens")
    return info


def _notes(cfg, ctx: CellContext, repeats: list[dict], comp: CompileState, mode: str) -> list[str]:
    notes = []
    if ctx.data_source == "synthetic":
        notes.append("synthetic data with WikiText-2's shapes: throughput is meaningful, losses are not")
    if cfg.train_split != "train":
        notes.append(f"trained on WikiText-2's {cfg.train_split} split (--train-split {cfg.train_split})"
                     + (f", held-out loss on its {cfg.heldout_split} split" if ctx.mode == "convergence" else "")
                     + ": not the benchmark's train split")
    if not comp.enabled:
        notes.append(f"eager (not compiled): {comp.reason}")
    if comp.recompile_warnings:
        notes.append(f"torch.compile warned about recompilation ({len(set(comp.recompile_warnings))} distinct warning(s), "
                     "see metrics.compile.recompile_warnings): frames past the limit ran eager, so tokens/s may be low")
    if any(rec["throughput_items_per_s"] is None for rec in repeats):
        notes.append("too few steps for a steady state after warm-up: no tokens/s recorded")
    if len(repeats) > 1:
        notes.append("repeat 1 warms up (compiles) for the preset's warm-up steps; later repeats reuse its compiled code and warm up for one step")
    return notes + repeat_notes(repeats)
