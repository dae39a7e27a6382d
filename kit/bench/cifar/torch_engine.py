"""The GPU-bound engine: what the best CIFAR trainers do, with every precision mode.

Per repeat (fresh model, seed = base seed + repeat)::

    data on device (uint8)  --augment (one gather per epoch)-->  uint8 epoch tensor
        --per step: float, normalise, upsample, channels_last-->  model (maybe compiled)
        --> loss --> Precision.backward_step (scaling, skip on overflow) --> OneCycleLR

Nothing per step talks to the host: no ``.item()``, no per-step synchronisation
(except fp16-master, whose 2018 scheme decides on the host whether to skip a
step, as FP16_Optimizer did). Timing synchronises only at the boundaries
(:mod:`kit.bench.timing`).

``torch.compile``: with ``compile`` "on" (or "auto" on CUDA) we first try
``mode="reduce-overhead"`` (Inductor + CUDA graphs), then the default mode,
then eager; each failure is recorded in the cell's notes with its reason.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from kit.bench import caps, timing
from kit.bench.cifar import models
from kit.bench.cifar.batch_search import free_device_memory, is_oom
from kit.bench.cifar.evaluation import evaluate_model
from kit.bench.cifar.gpu_data import DeviceData, augment
from kit.bench.cifar.graphed import GRAPH_MODES, WARMUP_BEFORE_CAPTURE, GraphedTrainer
from kit.bench.distributed import state as data_parallel
from kit.bench.precision import Precision
from kit.errors import KitError

log = logging.getLogger("kit.bench.cifar")

#: warm-up steps excluded from steady-state throughput (eager: cudnn autotuning;
#: compiled: Inductor compilation and CUDA-graph recording take a few calls)
WARMUP_EAGER = 5
WARMUP_COMPILED = 10


@dataclass
class TrainConfig:
    """One cell's training knobs (from CellSpec.params), shared by both engines."""

    model: str
    precision: str
    device: str
    batch_size: int = 256
    image_size: int = 32
    epochs: int = 1
    #: steps per epoch (throughput mode); None = full epochs over the training set
    steps: int | None = None
    compile: str = "auto"  # auto | on | off
    seed: int = 0
    #: evaluate test accuracy after every epoch (convergence mode)
    evaluate: bool = False
    lr: float | None = None
    label_smoothing: float = 0.0
    momentum: float = 0.9
    weight_decay: float = 5e-4
    warmup_steps: int | None = None
    #: untimed steps before a cell's first repeat (None = auto: on CUDA, the repeat's own
    #: warm-up plus one; on the CPU none); see run_repeats
    untimed_warmup_steps: int | None = None
    num_classes: int = 100
    #: fastai engine only: DataLoader worker processes (None = auto)
    num_workers: int | None = None
    #: fastai engines' fp16-master: False (default) = the 2019 article's to_fp16(), fastai
    #: 1.0.38-1.0.42: a static loss scale with no overflow check; True = fastai's later
    #: dynamic scaling (1.0.61's to_fp16(), fastai 2's to_non_native_fp16() default)
    dynamic_loss_scale: bool = False
    #: that static scale (fastai's default, 512)
    static_loss_scale: float = 512.0

    def __post_init__(self) -> None:
        if self.compile not in ("auto", "on", "off"):
            raise ValueError("compile must be auto, on or off")

    def steps_per_epoch(self, n_train: int) -> int:
        return self.steps if self.steps else max(1, n_train // self.batch_size)

    def max_lr(self) -> float:
        # SGD + Nesterov one-cycle peak, scaled linearly from 0.2 at batch 256
        return self.lr if self.lr is not None else min(0.8, 0.2 * self.batch_size / 256)


def _cos(start: float, end: float, pos: float) -> float:
    # fastai's SchedCos: cosine from start (pos 0) to end (pos 1)
    return start + (1 + math.cos(math.pi * (1 - pos))) * (end - start) / 2


def one_cycle_factor(step: int, total: int, pct_start: float = 0.25, div: float = 25.0, div_final: float = 1e5) -> float:
    """LR as a fraction of lr_max at ``step`` of ``total``: fastai's ``fit_one_cycle``
    shape (cosine up from lr_max/div over the first ``pct_start``, cosine down to
    lr_max/div_final). Defined for any ``total`` >= 1, unlike OneCycleLR which
    divides by zero for runs of a few steps."""
    pos = min(1.0, step / max(1, total))
    if pos < pct_start:
        return _cos(1 / div, 1.0, pos / pct_start)
    return _cos(1.0, 1 / div_final, (pos - pct_start) / (1 - pct_start))


def compile_candidates(compile: str, device: str, precision: str | None = None) -> list[str | None]:
    """Step modes to try in order; None = eager. "cuda-graph" captures the whole
    step (kit.bench.cifar.graphed) where the precision mode allows it; the others
    are torch.compile modes."""
    if compile == "off" or (compile == "auto" and not device.startswith("cuda")):
        return [None]
    compiled = ["reduce-overhead", "default"] if caps.HAS_COMPILE else []
    if device.startswith("cuda"):
        # the graphed step captures the optimizer too, which DDP's all-reduce cannot join
        graph = (["cuda-graph"] if precision in GRAPH_MODES and caps.HAS_GRAPHED_STEP
                 and data_parallel.active() is None else [])
        return graph + compiled + [None]
    return compiled[1:] + [None]  # CUDA graphs need CUDA


def epoch_indices(n_total: int, count: int, device: str, generator: torch.Generator) -> torch.Tensor:
    """``count`` training-set indices for one epoch: a random permutation of the full
    set (several, concatenated, if one epoch asks for more than the set holds)."""
    parts, have = [], 0
    while have < count:
        parts.append(torch.randperm(n_total, device=device, generator=generator))
        have += n_total
    return torch.cat(parts)[:count]


def memory_format(device: str) -> torch.memory_format:
    """channels_last on CUDA (Tensor Core convolutions want NHWC); the default
    layout on the CPU, where channels_last training was slower in our runs."""
    return torch.channels_last if device.startswith("cuda") and caps.HAS_CHANNELS_LAST else torch.contiguous_format


def make_generator(device: str, seed: int) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


@dataclass
class Trainer:
    """A fresh model, its precision and optimizer, and the one training step."""

    cfg: TrainConfig
    total_steps: int
    compile_mode: str | None = None
    model: nn.Module = field(init=False)
    step_model: Callable = field(init=False)
    prec: Precision = field(init=False)

    def __post_init__(self) -> None:
        cfg = self.cfg
        torch.manual_seed(cfg.seed)
        model = models.build(cfg.model, cfg.num_classes).to(cfg.device, memory_format=memory_format(cfg.device))
        self.prec = Precision(cfg.precision, cfg.device)
        model = self.prec.prepare_model(model)
        opt = torch.optim.SGD(
            self.prec.optimizer_params(model), lr=cfg.max_lr(), momentum=cfg.momentum,
            nesterov=True, weight_decay=cfg.weight_decay,
        )
        model, opt = self.prec.wrap(model, opt)
        self.model, self.opt = model, opt
        self.sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: one_cycle_factor(step, self.total_steps))
        self.loss_fn = caps.cross_entropy(cfg.label_smoothing)
        if self.compile_mode is not None:
            torch._dynamo.reset()  # a fresh compile per repeat; never hit the recompile limit
            self.step_model = torch.compile(model, mode=None if self.compile_mode == "default" else self.compile_mode)
        else:
            self.step_model = model

    def counters(self) -> dict:
        return self.prec.counters()

    def describe(self) -> dict:
        return self.prec.describe()

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.model.train()
        with self.prec.autocast():
            out = self.step_model(x)
        # the loss in fp32 whatever the logits' dtype (fp16-master returns half logits)
        loss = self.loss_fn(out.float(), y)
        self.prec.backward_step(loss, self.opt)
        with warnings.catch_warnings():
            # a step skipped by GradScaler makes the scheduler warn; the skip is counted elsewhere
            warnings.simplefilter("ignore", UserWarning)
            self.sched.step()
        return loss.detach()

    def evaluate(self, data: DeviceData, image_size: int, batch_size: int) -> tuple[float, float]:
        """(test accuracy, test loss) with the eager model (no recompiles for a ragged last batch)."""
        return evaluate_model(self.model, self.prec, self.cfg.device, data, image_size, batch_size)


def steady_state_warmup(cfg: TrainConfig, total: int, compile_mode: str | None) -> int:
    """Steps of a repeat left out of its steady-state throughput."""
    wanted = cfg.warmup_steps or (WARMUP_COMPILED if compile_mode else WARMUP_EAGER)
    warm = timing.warmup_steps_for(total, wanted)
    if compile_mode == "cuda-graph":
        # the steady state starts after the capture, never before it
        warm = max(warm, min(total, WARMUP_BEFORE_CAPTURE + 1))
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
                 progress: Callable[[int], None] | None = None) -> dict:
    """One repeat: fresh model (seed cfg.seed), train, time. Returns the repeat record."""
    device = cfg.device
    n_train = data.train_x.shape[0]
    spe = cfg.steps_per_epoch(n_train)
    total = spe * cfg.epochs
    warm = steady_state_warmup(cfg, total, compile_mode)
    clock = timing.StepClock(device, warmup_steps=warm)
    gen = make_generator(device, data_parallel.data_seed(cfg.seed))  # each rank its own batches
    free_device_memory()
    timing.reset_peak_memory(device)
    if compile_mode == "cuda-graph":
        lr_max = cfg.max_lr()
        trainer = GraphedTrainer(cfg, total, lambda s: lr_max * one_cycle_factor(s, total))
    else:
        trainer = Trainer(cfg, total, compile_mode)
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
            if ctx.should_stop():
                raise KeyboardInterrupt("stop requested")
            x = data.to_input(xs[s * bs : (s + 1) * bs], cfg.image_size)
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
    del trainer, xs, ys
    free_device_memory()
    return rec


def run_repeats(cfg: TrainConfig, data: DeviceData, ctx: Any, repeats: int,
                progress: Callable[[int, int], None] | None = None,
                metrics: dict | None = None) -> tuple[list[dict], list[str]]:
    """All repeats of one cell, seeds cfg.seed + r. Falls back from a failing
    torch.compile mode to the next (recording why) and keeps that choice.

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
            modes = [m for m in modes if m in ("cuda-graph", None)]
            notes.append(f"torch.compile not tried: this GPU is compute capability {cap[0]}.{cap[1]} and "
                         "Inductor/Triton need 7.0 or newer; ran the CUDA-graph step or eager")
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
                out.append(train_repeat(replace(cfg, seed=cfg.seed + r), data, ctx, r, mode, cb))
                break
            except (KeyboardInterrupt, KitError):
                raise
            except Exception as exc:
                if mode is None or is_oom(exc):
                    raise
                nxt = modes[1] if len(modes) > 1 else None
                msg = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
                note = (f"torch.compile(mode={mode!r}) failed, fell back to "
                        f"{'torch.compile(mode=' + repr(nxt) + ')' if nxt else 'eager'}: {exc.__class__.__name__}: {msg}")
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
        c = replace(cfg, batch_size=n, compile="off")
        trainer = Trainer(c, total_steps=steps)
        gen = make_generator(cfg.device, cfg.seed)
        idx = epoch_indices(data.train_x.shape[0], n, cfg.device, gen)
        x_u8 = augment(data.train_x[idx], gen)
        y = data.train_y[idx]
        for _ in range(steps):
            trainer.step(data.to_input(x_u8, cfg.image_size), y)
        timing.sync(cfg.device)  # an asynchronous OOM must surface inside this try

    return try_batch
