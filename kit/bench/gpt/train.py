"""One repeat of the GPT suite: build, (compile), train, time; every precision mode through
the same code (kit.bench.precision.Precision decides autocast and loss scaling; fp8 modes
also swap the Linear layers for torchao's Float8Linear, kit.bench.gpt.fp8).

    clock.start()                                      time to first step starts here
    model = GPT(...) on the device, seeded
    fp8 modes: fp8.convert(model)                      LM head kept in bf16
    compile each Block (and the head + loss)           torchtitan's per-block compile: the
                                                       blocks are identical, so one compiled
                                                       graph serves every layer and compile
                                                       time does not grow with depth
    AdamW(fused=True), weight decay on matrices only
    for step in warm-up + timed steps:                 steady state = the timed steps only
        x, y = batches.next()                          on the device (kit.bench.gpt.data)
        with prec.autocast(): loss = loss_fn(x, y)
        prec.backward_step(loss, opt, clip=1.0)        GradScaler for amp-fp16
    convergence mode: held-out loss on the valid split after the last step

Timing (kit.bench.timing): the "epoch" is the repeat's training steps; steady-state tokens/s
counts only the steps after the warm-up (compilation, autotuning, allocator growth);
``time_to_first_step_s`` runs from before the model is built to the end of the first step.
The first repeat of a cell warms up for the preset's ``warmup_steps``; later repeats reuse
its compiled code and warm up for one step.
"""

from __future__ import annotations

import gc
import logging
import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from kit.bench import caps, timing
from kit.bench.context import StepTally
from kit.bench.distributed import state as data_parallel
from kit.bench.gpt import fp8 as fp8_mod
from kit.bench.gpt.config import BETAS, GRAD_CLIP, WEIGHT_DECAY, GPTConfig
from kit.bench.gpt.data import TokenBatches
from kit.bench.gpt.model import GPT, count_params, lm_loss
from kit.bench.precision import FP8_RECIPES, Precision
from kit.bench.timing import StepClock

#: How often (in steps) the loop reports progress and polls for a stop request.
PROGRESS_EVERY = 5


@dataclass
class Hooks:
    on_steps: Callable[[int], None] = lambda n: None
    should_stop: Callable[[], bool] = lambda: False


@dataclass
class CompileState:
    """Whether this cell compiles, and why (the fallback's reason once one was needed)."""

    requested: str
    enabled: bool
    reason: str
    fell_back: bool = False
    recompile_warnings: list = field(default_factory=list)

    def describe(self) -> dict:
        d = {"requested": self.requested, "used": self.enabled, "reason": self.reason,
             "scope": "each Block and the head + loss, torch.compile(dynamic=False)" if self.enabled else None}
        if self.recompile_warnings:
            d["recompile_warnings"] = list(dict.fromkeys(self.recompile_warnings))
        return d


def compile_state(requested: str, device: str) -> CompileState:
    if requested in ("off", "eager"):
        return CompileState(requested, False, f"--compile {requested}")
    if not caps.HAS_COMPILE:
        return CompileState(requested, False, f"torch {torch.__version__} has no torch.compile (2.0+)")
    if requested == "auto" and not device.startswith("cuda"):
        return CompileState(requested, False, "auto: off on the CPU (the CPU cells check the code path; "
                                              "compiling C++ kernels there would take longer than the cell)")
    return CompileState(requested, True, "--compile on" if requested == "on" else "auto: on for CUDA devices")


class _RecompileWatch(logging.Handler):
    """Collects torch._dynamo's warnings about recompilation (e.g. its recompile limit)."""

    def __init__(self, sink: list):
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:
            return
        if "recompil" in msg.lower() or "cache_size_limit" in msg or "recompile_limit" in msg:
            self.sink.append(msg.strip().splitlines()[0][:300])


def optimizer_for(model: torch.nn.Module, lr: float, device: str) -> tuple[torch.optim.Optimizer, str]:
    """AdamW, weight decay on matrices (2-D weights) only, fused where torch has it."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=BETAS, fused=True), "AdamW (fused)"
    except (TypeError, RuntimeError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        return torch.optim.AdamW(groups, lr=lr, betas=BETAS), f"AdamW (not fused: {why})"


#: Throughput mode's learning-rate warm-up length: nanoGPT's ``warmup_iters`` (2000). A
#: throughput repeat (tens of steps) stays in its first part, as the first steps of a real
#: run would: a 2B-parameter model given the full rate in its first steps diverges, and an
#: fp16 run then skips steps for overflow, which is not the cost being measured.
THROUGHPUT_LR_WARMUP = 2000


def lr_at(step: int, total: int, lr: float, mode: str = "convergence") -> float:
    """Convergence: linear warm-up over the first 10% of the steps, then cosine decay to 10%
    of ``lr`` at the last. Throughput: linear warm-up over THROUGHPUT_LR_WARMUP steps."""
    if mode != "convergence":
        return lr * (step + 1) / THROUGHPUT_LR_WARMUP
    warm = max(1, total // 10)
    if step < warm:
        return lr * (step + 1) / warm
    progress = (step - warm) / max(1, total - warm)
    return lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress))))


def build_model(cfg: GPTConfig, vocab: int, device: str) -> GPT:
    if device.startswith("cuda"):
        with torch.device(device):  # parameters made (and initialised) on the GPU directly
            return GPT(vocab, cfg.seq_len, cfg.d_model, cfg.n_layers, cfg.n_heads)
    return GPT(vocab, cfg.seq_len, cfg.d_model, cfg.n_layers, cfg.n_heads).to(device)


def apply_compile(model: GPT, state: CompileState, **compile_kwargs) -> Callable:
    """loss_fn(x, y): the model's loss, with each Block and the head + loss compiled when enabled
    (``compile_kwargs``: torch.compile's mode or options, for scripts/probe_gpt_fp8.py; the suite passes none)."""

    def head_loss(h, y):
        return lm_loss(model.logits(h), y)

    if not state.enabled:
        return lambda x, y: head_loss(model.hidden(x), y)
    for block in model.blocks:
        block.compile(dynamic=False, **compile_kwargs)
    compiled_head = torch.compile(head_loss, dynamic=False, **compile_kwargs)
    return lambda x, y: compiled_head(model.hidden(x), y)


class TrainLoss(torch.nn.Module):
    """The model's loss as one module, for DistributedDataParallel: DDP prepares its all-reduce in
    ``forward``, and the step calls the model through ``hidden`` and ``logits`` (and the compiled
    blocks and head), so a data-parallel rank wraps this module, whose forward is the whole loss."""

    def __init__(self, model: GPT, loss_fn: Callable):
        super().__init__()
        self.model = model  # registered: DDP all-reduces its parameters' gradients
        self._loss_fn = loss_fn

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._loss_fn(x, y)


def data_parallel_loss(model: GPT, loss_fn: Callable) -> Callable:
    """``loss_fn``, or in a rank of a data-parallel cell the same loss through DDP (kit.bench.distributed)."""
    if data_parallel.active() is None:
        return loss_fn
    return data_parallel.wrap_model(TrainLoss(model, loss_fn))


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def heldout_loss(loss_fn: Callable, batches: list, prec: Precision, model: GPT) -> float:
    model.eval()
    total = torch.zeros((), dtype=torch.float64, device=batches[0][0].device)
    with torch.no_grad():
        for x, y in batches:
            with prec.autocast():
                total += loss_fn(x, y).double()
    model.train()
    return float(total.item()) / len(batches)


def train_step(loss_fn: Callable, x: torch.Tensor, y: torch.Tensor, prec: Precision, optimizer, params: list) -> torch.Tensor:
    """One training step: the loss under the mode's autocast, the mode's backward, clipping and update."""
    with prec.autocast():
        loss = loss_fn(x, y)
    prec.backward_step(loss, optimizer, clip=GRAD_CLIP, params=params)
    return loss


def run_repeat(cfg: GPTConfig, train_ids, heldout: list | None, vocab: int, mode: str, device: str, seed: int,
               flops_per_token: int, comp: CompileState, warmup_steps: int, hooks: Hooks | None = None,
               after: Callable[[Callable[[], object]], None] | None = None) -> dict:
    """Train a fresh model; return the repeat's record (kit.results.schema's repeat metrics).
    ``after``, when given, is called once the record is complete with the loop's own step on the
    next batches (:func:`train_step`): the profiled window runs there and cannot change the record."""
    hooks = hooks or Hooks()
    if cfg.mode == "convergence":
        total = cfg.steps
        warm = timing.warmup_steps_for(total, warmup_steps)
    else:
        warm = max(1, warmup_steps)  # the first step always holds compilation and set-up
        if data_parallel.active() is not None:
            # a fresh DDP syncs the host at its first 10 iterations (its runtime statistics): a rank's
            # every repeat leaves them out of its timed steps (kit.bench.distributed.state.DDP_STATS_WARMUP)
            warm = max(warm, data_parallel.DDP_STATS_WARMUP)
        total = warm + cfg.steps
    tokens_per_step = cfg.batch_size * cfg.seq_len

    timing.reset_peak_memory(device)
    clock = StepClock(device, warmup_steps=warm)
    clock.start()
    torch.manual_seed(seed)
    model = build_model(cfg, vocab, device)
    n_params = count_params(model)
    prec = Precision(mode, device)
    fp8_info = fp8_mod.convert(model, mode) if mode in FP8_RECIPES else None
    loss_fn = data_parallel_loss(model, apply_compile(model, comp))
    optimizer, opt_name = optimizer_for(model, cfg.lr, device)
    params = [p for p in model.parameters() if p.requires_grad]
    # each rank of a data-parallel cell draws its own windows (rank 0 those of a plain cell)
    batches = TokenBatches(train_ids, cfg.seq_len, cfg.batch_size, device, data_parallel.data_seed(seed))

    watch = _RecompileWatch(comp.recompile_warnings)
    dynamo_log = logging.getLogger("torch._dynamo")
    dynamo_log.addHandler(watch)
    losses: list[torch.Tensor] = []
    tally = StepTally(hooks.on_steps, hooks.should_stop, PROGRESS_EVERY)
    try:
        clock.epoch_start()
        for step in range(total):
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, total, cfg.lr, cfg.mode)
            x, y = batches.next()
            loss = train_step(loss_fn, x, y, prec, optimizer, params)
            losses.append(loss.detach())
            clock.step_done(tokens_per_step)
            tally.step()
        clock.epoch_end()
        tally.flush()
        held = heldout_loss(loss_fn, heldout, prec, model) if heldout else None
    finally:
        dynamo_log.removeHandler(watch)
    data_parallel.repeat_done(model)  # a data-parallel rank records its weights' digest
    counters = prec.counters()
    peak = timing.peak_memory_bytes(device)
    curve = [float(v) for v in torch.stack(losses).float().cpu().tolist()]
    times = clock.summary()
    last = [v for v in curve[-min(10, len(curve)):] if math.isfinite(v)]
    final_train = sum(last) / len(last) if last else None
    diverged = not all(math.isfinite(v) for v in curve) or (held is not None and not math.isfinite(held))
    tput = times["throughput_items_per_s"]
    record = {
        "seed": seed,
        "epoch_seconds": times["epoch_seconds"],
        "epoch_seconds_median": times["epoch_seconds_median"],
        "throughput_items_per_s": tput,  # tokens/s, steady state
        "steady_tokens": times["steady_items"],
        "steady_seconds": times["steady_seconds"],
        "steady_windows": times["steady_windows"],  # for the runner's steady-state energy
        "warmup_steps": times["warmup_steps"],
        "steps": counters["steps"],
        "time_to_first_step_s": times["time_to_first_step_s"],
        "peak_memory_bytes": peak,
        "achieved_tflops": (flops_per_token * tput / 1e12) if tput else None,
        "overflow_steps": counters["overflow_steps"],
        "nan_losses": counters["nan_losses"],
        "loss_scale_final": counters["loss_scale_final"],
        "final_loss": _finite(final_train),
        "final_metric": _finite(held) if cfg.mode == "convergence" else _finite(final_train),
        "diverged": diverged,
        "metrics": {
            "train_loss": [_finite(v) for v in curve],
            "heldout_loss": _finite(held) if held is not None else None,
            "params": n_params,
            "optimizer": opt_name,
        },
        "precision": prec.describe(),
    }
    if fp8_info is not None:
        record["fp8"] = fp8_info
    if after is not None:
        after(lambda: train_step(loss_fn, *batches.next(), prec, optimizer, params))
    del model, optimizer, params, batches, loss_fn, losses
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return record
