"""The faithful engine: what a fastai user runs, measured from the outside.

    uint8 arrays --(CPU workers: PadCropFlip per image)--> batches --(to device)-->
    IntToFloatTensor, Normalize (and upsampling) on the device --> Learner.fit_one_cycle

The Learner, by ``--learner`` (``TrainConfig.learner``), always with fastai's defaults
(Adam, one-cycle with momentum 0.95-0.85-0.95), ``loss_func=CrossEntropyLossFlat()``,
``metrics=accuracy`` and random weights (pretrained weights change accuracy, not the time
per step; the kit downloads none):

    create_cnn   vision_learner(dls, torchvision.models.resnetNN, n_out=100, pretrained=False)
                 (fastai 2's name for v1's create_cnn / cnn_learner): fastai's head on the
                 torchvision body, then learn.freeze(), which create_cnn does itself only when
                 pretrained (its default): the body's weights get no gradients, its BatchNorm
                 layers and the head train. The default.
    scratch      Learner(dls, the torchvision ResNet as the torch engine builds it): every layer trains

and fastai's own precision switches:

    fp32 / tf32   no callback; TF32 set by kit.bench.precision.configure_backends
    amp-fp16      learn.to_fp16()             (MixedPrecision: autocast + GradScaler)
    amp-bf16      learn.to_bf16()             (MixedPrecision, bf16, no scaler)
    fp16-master   learn.to_non_native_fp16()  (the 2018 scheme: half model, fp32 masters)
    apex-o1/o2    skipped: fastai has no Apex hook (the torch engine measures Apex)

One light callback (:class:`KitTimer`) does the measuring: it synchronises only
at the start and end of each epoch's training phase, after the first step and
at the end of warm-up; per batch it reads the host clock twice and adds one
device-side counter (NaN losses). :func:`bare_fit` runs the same Learner
without it, timed only around ``fit_one_cycle``, to show what the
instrumentation costs.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from typing import Any, Callable, Iterator

import numpy as np
import torch

from kit.bench import timing
from kit.bench.cifar import models
from kit.bench.cifar.batch_search import free_device_memory
from kit.bench.cifar.gpu_data import channel_stats
from kit.bench.cifar.train_config import TrainConfig
from kit.bench.context import stop_point
from kit.bench.precision import configure_backends, unavailable_reason
from kit.results import precisions as precision_modes

WARMUP = 5

FASTAI_PRECISION = {
    "fp32": "no callback (TF32 off)",
    "tf32": "no callback (TF32 on)",
    "amp-fp16": "learn.to_fp16(): MixedPrecision (torch.autocast fp16 + GradScaler)",
    "amp-bf16": "learn.to_bf16(): MixedPrecision (torch.autocast bf16)",
    "fp16-master": "learn.to_non_native_fp16(): half model, fp32 master weights; by default a static loss scale "
                   "with no overflow check (to_fp16() in the 2019 article's fastai 1.0.38-1.0.42)",
}


LEARNERS = {
    "create_cnn": "fastai's create_cnn learner: vision_learner(dls, torchvision.models.{model}, n_out={classes}, "
                  "pretrained=False), fastai's head (AdaptiveConcatPool2d, Flatten, BatchNorm1d, Dropout, Linear, ReLU, "
                  "BatchNorm1d, Dropout, Linear) on the torchvision body cut before its pooling, then learn.freeze() "
                  "as create_cnn leaves it (it freezes when pretrained, its default): only the head and the body's "
                  "BatchNorm layers train",
    "scratch": "a plain Learner(dls, torchvision.models.{model}(num_classes={classes})): every layer trains",
}


def describe_learner(cfg: TrainConfig) -> str:
    """``cfg.learner`` in words, for the cell's notes."""
    return LEARNERS[cfg.learner].format(model=cfg.model, classes=cfg.num_classes)


#: The warning torch 2.x gives for every torch.jit.script call. fastai's modules call
#: it while they are imported (fastai.layers' Swish/Mish helpers, fastai.torch_core's
#: script decorators), so every fastai run printed it to users, who can do nothing
#: about it; the kit never uses those layers.
JIT_SCRIPT_DEPRECATED = r"`torch\.jit\.script` is deprecated"


@contextlib.contextmanager
def fastai_imports() -> Iterator[None]:
    """Import fastai inside this block: it hides torch's `torch.jit.script is deprecated`
    FutureWarning (that message, that category) and nothing else, and only here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=JIT_SCRIPT_DEPRECATED, category=FutureWarning)
        yield


def fastai_missing_reason() -> str | None:
    try:
        with fastai_imports():
            import fastai  # noqa: F401
            from fastai.learner import Learner  # noqa: F401
    except Exception as exc:
        return f"fastai cannot be imported ({exc.__class__.__name__}: {exc}); install fastai 2.8 to run this engine"
    return None


def skip_reason(precision: str, device: str) -> str | None:
    """Why the fastai engine cannot run ``precision`` on ``device`` here (None = it can)."""
    if precision_modes.scheme(precision) == precision_modes.APEX:
        return "fastai has no Apex hook; Apex amp is measured in the torch engine"
    why = fastai_missing_reason() or unavailable_reason(precision, device)
    if why:
        return why
    if precision_modes.scheme(precision) == precision_modes.AUTOCAST and not device.startswith("cuda"):
        # fastai 2.8's MixedPrecision hard-codes autocast('cuda'): on the CPU it
        # would train in fp32 while calling itself bf16
        return "fastai's to_bf16() autocasts only on CUDA (MixedPrecision uses autocast('cuda')); on the CPU it would silently train in fp32"
    return None


def default_num_workers(device: str) -> int:
    """fastai's own default on a GPU machine (all cores up to 16); 0 on the CPU,
    where worker processes would take the cores the training itself uses."""
    if not device.startswith("cuda"):
        return 0
    return min(16, os.cpu_count() or 1)


# --------------------------------------------------------------------------- data
def _fastai_types():
    with fastai_imports():
        from fastai.torch_core import TensorCategory, TensorImage

    return TensorImage, TensorCategory


class ArrayDataset:
    """(TensorImage uint8 CHW, TensorCategory) items over N x H x W x C uint8 arrays."""

    def __init__(self, x: np.ndarray, y: np.ndarray):
        self.x, self.y = x, y
        self.TensorImage, self.TensorCategory = _fastai_types()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        img = torch.from_numpy(np.ascontiguousarray(self.x[i])).permute(2, 0, 1)
        return self.TensorImage(img), self.TensorCategory(int(self.y[i]))


def _make_transforms():
    with fastai_imports():
        from kit.bench.cifar.fastai_tfms import PadCropFlip, Upsample

    return PadCropFlip, Upsample


def make_dls(cfg: TrainConfig, arrays: Any, num_workers: int | None = None):
    """fastai DataLoaders over the arrays: train (augmented, shuffled, ``steps`` batches
    per epoch drawn from the whole set when ``cfg.steps`` is set) and valid (the test
    set; one batch in throughput mode, where accuracy is not the point)."""
    with fastai_imports():
        from fastai.data.core import DataLoaders, TfmdDL
        from fastai.data.transforms import IntToFloatTensor, Normalize

    PadCropFlip, Upsample = _make_transforms()
    device = torch.device(cfg.device)
    nw = default_num_workers(cfg.device) if num_workers is None else num_workers
    mean, std = channel_stats(arrays.train_x)
    norm = Normalize(torch.tensor(mean, device=device).view(1, -1, 1, 1), torch.tensor(std, device=device).view(1, -1, 1, 1))
    after_batch = [IntToFloatTensor(), norm]
    if cfg.image_size != arrays.train_x.shape[1]:
        after_batch.append(Upsample(cfg.image_size))
    bs = cfg.batch_size
    train_kw: dict[str, Any] = {}
    n_train = len(arrays.train_x)
    if cfg.steps:
        rng = np.random.default_rng(cfg.seed)
        count = cfg.steps * bs

        def get_idxs() -> list[int]:
            # this epoch's images: a random draw over the whole training set
            reps = -(-count // n_train)
            return np.concatenate([rng.permutation(n_train) for _ in range(reps)])[:count].tolist()

        train_kw = {"n": count, "get_idxs": get_idxs}
    train = TfmdDL(ArrayDataset(arrays.train_x, arrays.train_y), bs=bs, shuffle=True, drop_last=True,
                   num_workers=nw, after_item=[PadCropFlip()], after_batch=after_batch, device=device, **train_kw)
    valid_kw = {} if cfg.evaluate else {"n": min(bs, len(arrays.test_x))}
    valid = TfmdDL(ArrayDataset(arrays.test_x, arrays.test_y), bs=bs, shuffle=False, drop_last=False,
                   num_workers=nw, after_batch=list(after_batch), device=device, **valid_kw)
    return DataLoaders(train, valid, device=device)


# --------------------------------------------------------------------------- learner
def build_learner(cfg: TrainConfig, arrays: Any, num_workers: int | None = None):
    """The Learner a fastai user would build, with its precision switch applied.
    Progress bars and the logger are off (they cost time and print)."""
    with fastai_imports():
        import fastai.callback.fp16  # noqa: F401 - patches Learner.to_fp16/to_bf16/to_non_native_fp16
        import fastai.callback.schedule  # noqa: F401 - patches Learner.fit_one_cycle
        from fastai.callback.progress import ProgressCallback
        from fastai.learner import Learner
        from fastai.losses import CrossEntropyLossFlat
        from fastai.metrics import accuracy
        from fastai.torch_core import set_seed

    set_seed(cfg.seed)
    # fastai 2.8 never calls its setup_cuda(), so a fastai user's process keeps
    # PyTorch's default (no cuDNN autotuning); set it explicitly so an earlier
    # torch-engine cell in this process cannot leak its setting into this one
    torch.backends.cudnn.benchmark = False
    dls = make_dls(cfg, arrays, num_workers)
    if cfg.learner == "create_cnn":
        learn = create_cnn(dls, cfg)
        learn.model.to(cfg.device)
    else:
        model = models.build(cfg.model, cfg.num_classes).to(cfg.device)
        learn = Learner(dls, model, loss_func=CrossEntropyLossFlat(), metrics=accuracy)
    if any(isinstance(cb, ProgressCallback) for cb in learn.cbs):
        learn.remove_cb(ProgressCallback)
    learn.logger = lambda *_a, **_k: None
    backends = configure_backends(cfg.precision)
    how = precision_modes.scheme(cfg.precision)  # kit.results.precisions
    if how == precision_modes.SCALED_AUTOCAST:
        learn.to_fp16()
    elif how == precision_modes.AUTOCAST:
        learn.to_bf16()
    elif how == precision_modes.TWO_COPIES:
        # the article's window by default: a static scale, which NonNativeMixedPrecision never checks
        learn.to_non_native_fp16(loss_scale=cfg.static_loss_scale, dynamic=cfg.dynamic_loss_scale)
    learn._kit_backends = backends
    return learn


def create_cnn(dls: Any, cfg: TrainConfig):
    """fastai's create_cnn learner, built by fastai (2.x: ``vision_learner``) with random weights,
    frozen as create_cnn leaves a learner: ``vision_learner`` (like v1's ``create_cnn``) calls
    ``learn.freeze()`` only when ``pretrained``, its default, so the kit, which downloads no
    weights, calls it. Frozen: the first two layer groups (the body) get ``requires_grad=False``
    except their BatchNorm layers (``train_bn=True``); the head trains. ``dls`` None builds the
    same learner without data (the FLOP count, on the meta device)."""
    with fastai_imports():
        from fastai.losses import CrossEntropyLossFlat
        from fastai.metrics import accuracy
        from fastai.vision.learner import vision_learner

    learn = vision_learner(dls, models.torchvision_arch(cfg.model), n_out=cfg.num_classes, pretrained=False,
                           loss_func=CrossEntropyLossFlat(), metrics=accuracy)
    learn.freeze()
    return learn


def create_cnn_flops_per_image(cfg: TrainConfig) -> int:
    """Forward + backward FLOPs per image of the create_cnn learner's model as it trains (frozen: the
    body's convolutions compute no weight gradients), counted on the meta device."""
    from kit.bench.flops import train_step_flops_per_item

    return train_step_flops_per_item(lambda: create_cnn(None, cfg).model, (3, cfg.image_size, cfg.image_size),
                                     cfg.num_classes)


def _fit(learn, cfg: TrainConfig) -> None:
    learn.fit_one_cycle(cfg.epochs, lr_max=cfg.lr)


def bare_fit(cfg: TrainConfig, arrays: Any, num_workers: int | None = None) -> float:
    """Seconds for ``fit_one_cycle`` on the same Learner with no kit callback: the
    reference for what :class:`KitTimer` costs (compare with a repeat's ``fit_seconds``)."""
    learn = build_learner(cfg, arrays, num_workers)
    t0 = timing.now(cfg.device)
    _fit(learn, cfg)
    seconds = timing.now(cfg.device) - t0
    del learn
    free_device_memory()
    return seconds


def _make_timer_cls():
    # long because: it defines the KitTimer callback class, whose base (fastai's Callback) is imported only
    # when a cell runs; each of its methods is one short fastai event
    with fastai_imports():
        from fastai.callback.core import Callback

    class KitTimer(Callback):
        """Epoch times, steady-state throughput, data wait, overflow and NaN counts.

        Runs first at every event (order -100), so ``before_batch`` reads the
        clock as soon as a batch has arrived on the device; the gap since the
        previous ``after_batch`` is the wait for data (loader, transfer, batch
        transforms). Host clocks only: no device synchronisation per batch.
        """

        order = -100

        def __init__(self, clock: timing.StepClock, bs: int, ctx: Any, repeat: int,
                     progress: Callable[[int], None] | None, every: int, full_test: bool):
            self.clock, self.bs, self.ctx, self.repeat = clock, bs, ctx, repeat
            self.full_test = full_test
            self._progress, self.every = progress, every
            self.data_wait = 0.0
            self.overflows = 0
            self.loss_scale: float | None = None
            self.train_losses: list[float] = []
            self.valid: list[dict] = []
            self._t_prev: float | None = None
            self._nan = None
            self._loss_sum = None
            self._epoch_steps = 0
            self.last_loss = None

        def before_fit(self):
            dev = self.clock.device
            self._nan = torch.zeros((), dtype=torch.int64, device=dev)

        def before_train(self):
            self.clock.epoch_start()
            self._t_prev = time.perf_counter()
            self._loss_sum = torch.zeros((), dtype=torch.float32, device=self.clock.device)
            self._epoch_steps = 0

        def before_batch(self):
            if self.training and self._t_prev is not None:
                self.data_wait += time.perf_counter() - self._t_prev

        def after_loss(self):
            if self.training:
                loss = self.learn.loss.detach().float()
                self._nan += (~torch.isfinite(loss)).to(torch.int64)
                self._loss_sum += loss
                self.last_loss = loss

        def after_cancel_step(self):
            # MixedPrecision (to_fp16) cancels the optimizer step when GradScaler found inf/NaN
            self.overflows += 1

        def after_cancel_batch(self):
            # NonNativeMixedPrecision (to_non_native_fp16) cancels the batch on overflow
            if self.training:
                self.overflows += 1

        def after_batch(self):
            if not self.training:
                return
            stop_point(self.ctx.should_stop)
            first = self.clock.steps == 0
            was_warm = self.clock.warm
            self.clock.step_done(self.bs)
            self._epoch_steps += 1
            if first:
                self.ctx.event("step", repeat=self.repeat, step=1,
                               time_to_first_step_s=self.clock.t_first_step - self.clock.t_start)
            elif self.clock.warm and not was_warm:
                self.ctx.event("step", repeat=self.repeat, step=self.clock.steps, warm=True)
            if self._progress is not None and self.clock.steps % self.every == 0:
                self._progress(self.clock.steps)
            self._t_prev = time.perf_counter()

        def after_train(self):
            dt = self.clock.epoch_end()
            self._t_prev = None
            self.train_losses.append(self._loss_sum.item() / max(1, self._epoch_steps))
            scaler = getattr(self.learn, "scaler", None)
            if scaler is not None and scaler.is_enabled():
                self.loss_scale = float(scaler.get_scale())
            for cb in self.learn.cbs:
                if type(cb).__name__ == "NonNativeMixedPrecision":
                    self.loss_scale = float(cb.loss_scale)
            self._epoch_event = {"repeat": self.repeat, "epoch": self.epoch, "seconds": dt,
                                 "images": self._epoch_steps * self.bs, "train_loss": self.train_losses[-1]}
            if self._progress is not None:
                self._progress(self.clock.steps)

        def after_validate(self):
            rec = self.learn.recorder
            vals = {m.name: m.value for m in rec._valid_mets}
            self.valid.append({k: (float(v) if v is not None else None) for k, v in vals.items()})

        def after_epoch(self):
            ev = dict(getattr(self, "_epoch_event", {}) or {})
            if self.valid and self.full_test:
                ev.update(test_accuracy=self.valid[-1].get("accuracy"), test_loss=self.valid[-1].get("valid_loss"))
            self.ctx.event("epoch", **ev)

        def nan_losses(self) -> int:
            return int(self._nan.item()) if self._nan is not None else 0

    return KitTimer


def train_repeat(cfg: TrainConfig, arrays: Any, ctx: Any, repeat: int,
                 progress: Callable[[int], None] | None = None, num_workers: int | None = None,
                 after: Callable[[Any], None] | None = None) -> dict:
    """One instrumented repeat (seed cfg.seed). Returns the repeat record. ``after``, when given,
    is called with the Learner once the record is complete and the timer removed (the profiled
    window runs there, on the Learner the repeat timed)."""
    device = cfg.device
    spe, clock = repeat_clock(cfg, len(arrays.train_x))
    learn = build_learner(cfg, arrays, num_workers)
    KitTimer = _make_timer_cls()
    timer = KitTimer(clock, cfg.batch_size, ctx, repeat, progress, max(1, spe // 20), cfg.evaluate)
    learn.add_cb(timer)
    clock.start()
    _fit(learn, cfg)
    rec = timed_record(clock, device, timer.data_wait)
    full_test = cfg.evaluate
    accs = [v.get("accuracy") for v in timer.valid] if full_test else []
    rec.update(
        overflow_steps=timer.overflows,
        nan_losses=timer.nan_losses(),
        loss_scale_final=timer.loss_scale,
        final_loss=float(timer.last_loss.item()) if timer.last_loss is not None else None,
        final_metric=accs[-1] if accs else None,
        seed=cfg.seed,
        num_workers=learn.dls.train.fake_l.num_workers,
        metrics={"train_loss": timer.train_losses,
                 **({"test_accuracy": accs, "test_loss": [v.get("valid_loss") for v in timer.valid]} if full_test else {})},
        precision={"mode": cfg.precision, "fastai": FASTAI_PRECISION.get(cfg.precision), **learn._kit_backends,
                   "cudnn_benchmark": bool(torch.backends.cudnn.benchmark)},
        **parameter_counts(learn.model),
    )
    learn.remove_cb(timer)
    if after is not None:
        after(learn)
    del learn
    free_device_memory()
    return rec


def parameter_counts(model: Any) -> dict:
    """How many of the model's weights the learner trains (``requires_grad``) and how many it has,
    read after training (create_cnn: the head and the body's BatchNorm layers; scratch: all)."""
    params = list(model.parameters())
    return {"parameters": sum(p.numel() for p in params),
            "trainable_parameters": sum(p.numel() for p in params if p.requires_grad)}


def _steps_per_epoch(cfg: TrainConfig, n_train: int) -> int:
    # fastai drops the last partial batch, so no max(1, ...) as in TrainConfig.steps_per_epoch
    return cfg.steps if cfg.steps else n_train // cfg.batch_size


def repeat_clock(cfg: TrainConfig, n_train: int) -> tuple[int, timing.StepClock]:
    """Steps per epoch and a fresh clock for one repeat, after freeing device memory
    and resetting its peak (shared by the fastai v2 and v1 engines)."""
    spe = _steps_per_epoch(cfg, n_train)
    free_device_memory()
    timing.reset_peak_memory(cfg.device)
    warm = timing.warmup_steps_for(spe * cfg.epochs, cfg.warmup_steps or WARMUP)
    return spe, timing.StepClock(cfg.device, warmup_steps=warm)


def timed_record(clock: timing.StepClock, device: str, data_wait: float) -> dict:
    """The clock's summary plus fit time, data wait vs compute, and peak memory, read
    right after fit (shared by the fastai v2 and v1 engines)."""
    fit_seconds = timing.now(device) - clock.t_start
    rec = clock.summary()
    rec.update(
        fit_seconds=fit_seconds,
        data_wait_s=data_wait,
        compute_s=max(0.0, sum(clock.epoch_seconds) - data_wait),
        peak_memory_bytes=timing.peak_memory_bytes(device),
    )
    return rec


def run_repeats(cfg: TrainConfig, arrays: Any, ctx: Any, repeats: int,
                progress: Callable[[int, int], None] | None = None, num_workers: int | None = None,
                train: Callable[..., dict] | None = None, after_last: Callable[[Any], None] | None = None) -> list[dict]:
    """All repeats of one cell, seeds cfg.seed + r; ``train`` is the engine's
    train_repeat (this module's by default; the fastai v1 engine passes its own). ``after_last``,
    when given, gets the last repeat's Learner once its record is complete (the profiled window:
    kit.bench.cifar.fastai_window)."""
    from dataclasses import replace

    train = train or train_repeat
    per = _steps_per_epoch(cfg, len(arrays.train_x)) * cfg.epochs
    out = []
    for r in range(repeats):
        cb = (lambda n, d=r * per: progress(d + n, repeats * per)) if progress else None
        kw = {"after": after_last} if after_last is not None and r == repeats - 1 else {}
        out.append(train(replace(cfg, seed=cfg.seed + r), arrays, ctx, r, cb, num_workers, **kw))
    return out

