"""The GPU-bound engine: what the best CIFAR trainers do, with every precision mode.

Per repeat (fresh model, seed = base seed + repeat)::

    data on device (uint8)  --augment (one gather per epoch)-->  uint8 epoch tensor
        --per step: float, normalise, upsample, channels_last-->  model (maybe compiled;
          a captured step does this conversion inside its graph)
        --> loss --> Precision.backward_step (scaling, skip on overflow) --> OneCycleLR

Nothing per step talks to the host: no ``.item()``, no per-step synchronisation
(except fp16-master, whose 2018 scheme decides on the host whether to skip a
step, as FP16_Optimizer did). Timing synchronises only at the boundaries
(:mod:`kit.bench.timing`).

The step, by ``compile`` (see compile_candidates): "on", or "auto" on CUDA, first tries
the whole step captured as one CUDA graph with the model compiled by Inductor inside it
(``cuda-graph-inductor``), then the same captured step with eager kernels
(``cuda-graph``), then ``torch.compile`` modes "reduce-overhead" and "default", then
eager; the captured steps only where the precision allows capture. "off" skips Inductor:
the captured step with eager kernels (or eager where it cannot be captured), to compare
with; "eager" captures and compiles nothing. Each failure is recorded in the cell's
notes with its reason; compilation happens before the steady state (it shows in time to
first step).

This module runs the repeats (warm-up, the epoch loop, timing, compile fallbacks);
the step it repeats is kit.bench.cifar.trainer (or kit.bench.cifar.graphed), the
knobs kit.bench.cifar.train_config, the learning-rate shape kit.bench.cifar.schedule.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import torch

from kit.bench import caps, profile_window, timing
from kit.bench.cifar.batch_search import free_device_memory, is_oom
from kit.bench.cifar.gpu_data import DeviceData, augment
from kit.bench.cifar.graphed import (
    EAGER_GRAPH, GRAPH_MODES, INDUCTOR_GRAPH, STEP_MODES, GraphedTrainer, warmup_before_capture,
)
from kit.bench.cifar.schedule import one_cycle_factor
from kit.bench.cifar.train_config import TrainConfig
from kit.bench.cifar.trainer import Trainer
from kit.bench.compilation import fresh_compilation
from kit.bench.context import stop_point
from kit.bench.distributed import state as data_parallel
from kit.errors import KitError

log = logging.getLogger("kit.bench.cifar")

#: warm-up steps excluded from steady-state throughput, in every step mode (eager: cudnn autotuning;
#: compiled: Inductor compilation and CUDA-graph recording take a few calls; both: a data-parallel
#: cell's fresh DDP syncs at its first 10 iterations, kit.bench.distributed.state.DDP_STATS_WARMUP,
#: and a plain cell leaves out as many steps, so that the two time the same steps)
WARMUP_STEPS = data_parallel.DDP_STATS_WARMUP


def compile_candidates(compile: str, device: str, precision: str | None = None) -> list[str | None]:
    """Step modes to try in order; None = eager. "cuda-graph-inductor" and "cuda-graph"
    capture the whole step (kit.bench.cifar.graphed) where the precision mode allows it,
    with the model compiled by Inductor inside or with its eager kernels; the others are
    torch.compile modes. Each one that fails falls back to the next, with the reason
    recorded in the cell."""
    cuda = device.startswith("cuda")
    # a data-parallel rank captures its DDP step too, where the backend's all-reduce can be captured
    graph = cuda and precision in GRAPH_MODES and caps.HAS_GRAPHED_STEP and data_parallel.capturable()
    if compile == "eager" or (compile in ("auto", "off") and not cuda):
        return [None]
    if compile == "off":  # no Inductor: the captured step with eager kernels, or eager
        return ([EAGER_GRAPH] if graph else []) + [None]
    compiled = ["reduce-overhead", "default"] if caps.HAS_COMPILE else []
    if cuda:
        steps = (([INDUCTOR_GRAPH] if caps.HAS_COMPILE else []) + [EAGER_GRAPH]) if graph else []
        return steps + compiled + [None]
    return compiled[1:] + [None]  # CUDA graphs need CUDA


def step_mode_words(mode: str | None) -> str:
    """A step mode as the fallback notes name it."""
    if mode == INDUCTOR_GRAPH:
        return "the captured step with the model compiled by Inductor (cuda-graph-inductor)"
    if mode == EAGER_GRAPH:
        return "the captured step with eager kernels (cuda-graph)"
    return f"torch.compile(mode={mode!r})" if mode else "eager"


def epoch_indices(n_total: int, count: int, device: str, generator: torch.Generator) -> torch.Tensor:
    """``count`` training-set indices for one epoch: a random permutation of the full
    set (several, concatenated, if one epoch asks for more than the set holds)."""
    parts, have = [], 0
    while have < count:
        parts.append(torch.randperm(n_total, device=device, generator=generator))
        have += n_total
    return torch.cat(parts)[:count]


def make_generator(device: str, seed: int) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def steady_state_warmup(cfg: TrainConfig, total: int, compile_mode: str | None) -> int:
    """Steps of a repeat left out of its steady-state throughput."""
    wanted = cfg.warmup_steps or WARMUP_STEPS
    warm = timing.warmup_steps_for(total, wanted)
    if compile_mode in STEP_MODES:
        # the steady state starts after the capture and its first replay, never before them (a
        # data-parallel rank captures later: kit.bench.cifar.graphed.warmup_before_capture)
        warm = max(warm, min(total, warmup_before_capture() + 1))
    return warm


def untimed_warmup_steps(cfg: TrainConfig, total: int, compile_mode: str | None) -> int:
    """Steps of the untimed warm-up before a cell's first repeat (0: none)."""
    if cfg.untimed_warmup_steps is not None:
        return min(cfg.untimed_warmup_steps, total)
    if not cfg.device.startswith("cuda"):
        return 0
    return min(total, steady_state_warmup(cfg, total, compile_mode) + 1)


class _Untimed:
    """The cell context for the untimed warm-up: stop requests pass, journal events do not
    (the warm-up is no repeat)."""

    def __init__(self, ctx: Any):
        self._ctx = ctx

    def event(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def train_repeat(cfg: TrainConfig, data: DeviceData, ctx: Any, repeat: int, compile_mode: str | None,
                 progress: Callable[[int], None] | None = None,
                 after: Callable[[Callable[[], Any]], None] | None = None) -> dict:
    """One repeat: fresh model (seed cfg.seed), train, time. Returns the repeat record.

    ``after``, when given, is called once the record is complete (every clock read, every
    counter taken) with the repeat's own step on its last batch: the profiled window runs there,
    on the trainer the repeat timed, and cannot change the record."""
    device = cfg.device
    n_train = data.train_x.shape[0]
    spe = cfg.steps_per_epoch(n_train)
    total = spe * cfg.epochs
    warm = steady_state_warmup(cfg, total, compile_mode)
    clock = timing.StepClock(device, warmup_steps=warm)
    gen = make_generator(device, data_parallel.data_seed(cfg.seed))  # each rank its own batches
    free_device_memory()
    timing.reset_peak_memory(device)
    if compile_mode in STEP_MODES:
        lr_max = cfg.max_lr()
        trainer = GraphedTrainer(cfg, total, lambda s: lr_max * one_cycle_factor(s, total),
                                 inductor=compile_mode == INDUCTOR_GRAPH,
                                 prepare=lambda u8: data.to_input(u8, cfg.image_size))
    else:
        trainer = Trainer(cfg, total, compile_mode)
    converts_input = isinstance(trainer, GraphedTrainer)
    bs = cfg.batch_size
    aug_seconds = 0.0
    train_losses: list[float] = []
    test_acc: list[float] = []
    test_loss: list[float] = []
    last_loss = None
    every = max(1, spe // 20)
    clock.start()
    for epoch in range(cfg.epochs):
        clock.epoch_start()
        # data: one gather augments this epoch's images (timed: the engine's only input work)
        t0 = timing.now(device)
        idx = epoch_indices(n_train, spe * bs, device, gen)
        xs = augment(data.train_x[idx], gen)
        ys = data.train_y[idx]
        aug_seconds += timing.now(device) - t0
        loss_sum = torch.zeros((), dtype=torch.float32, device=device)
        for s in range(spe):
            stop_point(ctx.should_stop)
            x = xs[s * bs : (s + 1) * bs]  # uint8: a captured step converts it inside its graph
            if not converts_input:
                x = data.to_input(x, cfg.image_size)
            last_loss = trainer.step(x, ys[s * bs : (s + 1) * bs])
            loss_sum += last_loss.float()
            first = clock.steps == 0
            was_warm = clock.warm
            clock.step_done(bs)
            if first:
                ctx.event("step", repeat=repeat, step=1, time_to_first_step_s=clock.t_first_step - clock.t_start,
                          compile_mode=compile_mode or "eager")
            elif clock.warm and not was_warm:
                ctx.event("step", repeat=repeat, step=clock.steps, warm=True)
            if progress is not None and (clock.steps % every == 0 or s == spe - 1):
                progress(clock.steps)
        dt = clock.epoch_end()
        train_losses.append(loss_sum.item() / spe)
        fields: dict[str, Any] = {"repeat": repeat, "epoch": epoch, "seconds": dt, "images": spe * bs,
                                  "train_loss": train_losses[-1]}
        if cfg.evaluate:
            acc, tl = trainer.evaluate(data, cfg.image_size, bs)
            test_acc.append(acc)
            test_loss.append(tl)
            fields.update(test_accuracy=acc, test_loss=tl)
        ctx.event("epoch", **fields)
    rec = clock.summary()
    counters = trainer.counters()
    epoch_total = sum(clock.epoch_seconds)
    rec.update(
        data_wait_s=aug_seconds,
        compute_s=max(0.0, epoch_total - aug_seconds),
        peak_memory_bytes=timing.peak_memory_bytes(device),
        overflow_steps=counters["overflow_steps"],
        nan_losses=counters["nan_losses"],
        loss_scale_final=counters["loss_scale_final"],
        final_loss=float(last_loss.item()) if last_loss is not None else None,
        final_metric=test_acc[-1] if test_acc else None,
        compile_mode=compile_mode or "eager",
        seed=cfg.seed,
        metrics={"train_loss": train_losses, **({"test_accuracy": test_acc, "test_loss": test_loss} if cfg.evaluate else {})},
    )
    rec["precision"] = trainer.describe()
    data_parallel.repeat_done(trainer.model)  # a data-parallel rank records its weights' digest
    if after is not None:
        x_last, y_last = xs[(spe - 1) * bs : spe * bs], ys[(spe - 1) * bs : spe * bs]
        # as in the loop: the input conversion is part of the step (inside the captured graph, or here)
        after(lambda: trainer.step(x_last if converts_input else data.to_input(x_last, cfg.image_size), y_last))
    del trainer, xs, ys
    free_device_memory()
    return rec


def run_repeats(cfg: TrainConfig, data: DeviceData, ctx: Any, repeats: int,
                progress: Callable[[int, int], None] | None = None,
                metrics: dict | None = None, profile: dict | None = None) -> tuple[list[dict], list[str]]:
    """All repeats of one cell, seeds cfg.seed + r. Falls back from a failing
    torch.compile mode to the next (recording why) and keeps that choice.

    Where ``ctx.profile_steps`` asks for it, the last repeat, once its record is complete,
    profiles that many more steps of its own step function (kit.bench.profile_window) into
    ``profile``: the same step mode the repeats timed, outside every timed figure.

    On CUDA an untimed warm-up (a few steps of a throwaway model) runs first: cuDNN
    autotuning, lazy kernel loading and compilation are paid once per process and
    shape, so without it the first repeat's epoch time depended on which cells had run
    before it in the same process (an H200 run: ResNet-18 tf32's first repeat took
    11.9 s against 0.25 s for the next two, while ResNet-152 after ResNet-101 showed no
    such outlier). Its steps and seconds go into ``metrics`` (untimed_warmup_*)."""
    from dataclasses import replace

    modes = compile_candidates(cfg.compile, cfg.device, cfg.precision)
    notes: list[str] = []
    if cfg.compile == "auto" and cfg.device.startswith("cuda"):
        cap = torch.cuda.get_device_capability(torch.device(cfg.device))
        if cap < (7, 0):
            # Inductor generates Triton kernels, and Triton needs compute capability 7.0+
            modes = [m for m in modes if m in (EAGER_GRAPH, None)]
            notes.append(f"torch.compile not tried: this GPU is compute capability {cap[0]}.{cap[1]} and "
                         "Inductor/Triton need 7.0 or newer; ran the CUDA-graph step or eager")
    if any(m not in (EAGER_GRAPH, None) for m in modes):
        # Dynamo keeps up to 8 compilations per code object, and every torchvision ResNet
        # shares ResNet.forward: the cells of one process (5 models x 4 precisions) would use
        # them up. A cell starts from none; its repeats share one compilation (same shapes).
        cache_note = fresh_compilation(cfg.precision)
        if cache_note:
            notes.append(cache_note)
    out: list[dict] = []
    spe = cfg.steps_per_epoch(data.train_x.shape[0])
    per_repeat = spe * cfg.epochs
    for r in [-1] + list(range(repeats)):  # -1: the untimed warm-up
        while True:
            mode = modes[0]
            try:
                if r < 0:
                    n = untimed_warmup_steps(cfg, per_repeat, mode)
                    if n:
                        t0 = time.perf_counter()
                        train_repeat(replace(cfg, steps=n, epochs=1, evaluate=False), data, _Untimed(ctx), r, mode)
                        if metrics is not None:
                            metrics.update(untimed_warmup_steps=n, untimed_warmup_s=time.perf_counter() - t0)
                    break
                done_before = r * per_repeat
                cb = (lambda n, d=done_before: progress(d + n, repeats * per_repeat)) if progress else None
                window = None
                if r == repeats - 1 and profile is not None and getattr(ctx, "profile_steps", 0):
                    window = profile_window.into(profile, cfg.device, ctx.profile_steps)
                out.append(train_repeat(replace(cfg, seed=cfg.seed + r), data, ctx, r, mode, cb, after=window))
                break
            except (KeyboardInterrupt, KitError):
                raise
            except Exception as exc:
                if mode is None or is_oom(exc):
                    raise
                nxt = modes[1] if len(modes) > 1 else None
                msg = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
                note = f"{step_mode_words(mode)} failed, fell back to {step_mode_words(nxt)}: {exc.__class__.__name__}: {msg}"
                log.warning(note)
                notes.append(note)
                ctx.event("note", message=note)
                modes.pop(0)
                try:
                    torch._dynamo.reset()
                except Exception:
                    pass
                free_device_memory()
    return out, notes


def try_batch_fn(cfg: TrainConfig, data: DeviceData, steps: int = 3) -> Callable[[int], None]:
    """For the batch search: ``steps`` real eager training steps at batch ``n``."""
    from dataclasses import replace

    def try_batch(n: int) -> None:
        c = replace(cfg, batch_size=n, compile="eager")
        trainer = Trainer(c, total_steps=steps)
        gen = make_generator(cfg.device, cfg.seed)
        idx = epoch_indices(data.train_x.shape[0], n, cfg.device, gen)
        x_u8 = augment(data.train_x[idx], gen)
        y = data.train_y[idx]
        for _ in range(steps):
            trainer.step(data.to_input(x_u8, cfg.image_size), y)
        timing.sync(cfg.device)  # an asynchronous OOM must surface inside this try

    return try_batch
