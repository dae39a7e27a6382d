"""The faithful engine on the 2019 stack: fastai v1 (1.0.x), as the article ran it.

Used instead of :mod:`kit.bench.cifar.fastai_engine` when the installed fastai
is v1 (the cuda10 image). fastai v1's API differs from v2's, so this module has
its own data and callback code; it keeps the v2 engine's recipe and measurements:

    uint8 arrays --(CPU workers: reflect-pad 4, crop, flip per image)--> batches
      --(to device)--> float, normalise (and upsample) --> Learner.fit_one_cycle

The Learner, by ``--learner``, with fastai v1's defaults (Adam, one-cycle),
``loss_func=CrossEntropyLoss()``, ``metrics=accuracy`` and random weights (pretrained
weights change accuracy, not the time per step; the kit downloads none):

    create_cnn    cnn_learner(data, torchvision.models.resnetNN, pretrained=False) (create_cnn
                  before 1.0.47, the article's call): fastai's head on the torchvision body, then
                  learn.freeze(), which create_cnn does itself only when pretrained (its default):
                  the body's weights get no gradients, its BatchNorm layers and the head train
    scratch       Learner(data, the torchvision ResNet): every layer trains

and v1's precision switch:

    fp32          no callback
    fp16-master   learn.to_fp16(): v1's MixedPrecision callback, which *is* the 2018
                  scheme (half model with BatchNorm in fp32, fp32 master weights),
                  with the article's static scale of 512 and no overflow check by
                  default (fastai 1.0.38-1.0.42); --dynamic-loss-scale for 1.0.61's
    others        skipped with the reason (no autocast in torch 1.4, no TF32/bf16,
                  no Apex hook in fastai)

Python 3.7 syntax: the cuda10 image runs this.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from kit.bench import timing
from kit.bench.cifar import models
from kit.bench.cifar.batch_search import free_device_memory
from kit.bench.cifar import fastai_engine
from kit.bench.cifar.fastai_engine import default_num_workers, repeat_clock
from kit.bench.cifar.gpu_data import PAD, channel_stats, crop_flip_indices
from kit.bench.cifar.train_config import TrainConfig
from kit.bench.context import stop_point
from kit.bench.precision import unavailable_reason
from kit.results import precisions as precision_modes

FASTAI_PRECISION = {
    "fp32": "no callback",
    "fp16-master": "learn.to_fp16(): fastai v1 MixedPrecision (half model, BatchNorm fp32, fp32 master weights; "
                   "by default a static loss scale of 512 with no overflow check, as in the 2019 article's fastai)",
}


LEARNERS = {
    "create_cnn": "fastai v1's create_cnn learner: {call}(data, torchvision.models.{model}, pretrained=False), "
                  "fastai's head (AdaptiveConcatPool2d, Flatten, BatchNorm1d, Dropout, Linear, ReLU, BatchNorm1d, "
                  "Dropout, Linear) on the torchvision body cut before its pooling, then learn.freeze() as create_cnn "
                  "leaves it (it freezes when pretrained, its default): only the head and the body's BatchNorm "
                  "layers train",
    "scratch": "a plain Learner(data, torchvision.models.{model}(num_classes={classes})): every layer trains",
}


def describe_learner(cfg: TrainConfig) -> str:
    """``cfg.learner`` in words, for the cell's notes."""
    return LEARNERS[cfg.learner].format(model=cfg.model, classes=cfg.num_classes, call=create_cnn_call())


def create_cnn_call() -> str:
    """The name of v1's create_cnn learner in the installed fastai: ``cnn_learner`` from 1.0.47
    (fastai's CHANGES.md: "`create_cnn` becomes `cnn_learner`"; ``create_cnn`` then only warns
    that it is deprecated and calls it), ``create_cnn`` before."""
    with fastai_engine.fastai_imports():
        import fastai.vision.learner as vl

    return "cnn_learner" if hasattr(vl, "cnn_learner") else "create_cnn"


def is_fastai_v1() -> bool:
    try:
        with fastai_engine.fastai_imports():
            import fastai
    except Exception:  # noqa: BLE001 - no fastai: the v2 engine reports that
        return False
    return str(getattr(fastai, "__version__", "")).startswith("1.")


def skip_reason(precision: str, device: str) -> str | None:
    if precision_modes.scheme(precision) == precision_modes.APEX:
        return "fastai has no Apex hook; Apex amp is measured in the torch engine"
    why = unavailable_reason(precision, device)
    if why or precision in FASTAI_PRECISION:
        return why
    with fastai_engine.fastai_imports():
        import fastai

    return (f"fastai {fastai.__version__} has no switch for {precision} (its only mixed precision is to_fp16(), "
            "the fp16-master scheme)")


# --------------------------------------------------------------------------- data
class PadCropFlipDataset(torch.utils.data.Dataset):
    """(uint8 CHW tensor, label) items; training items reflect-padded by 4, randomly
    cropped back and flipped (fastai v1's ``[*rand_pad(4, 32), flip_lr(p=0.5)]``,
    with the torch engine's index rule), per image in the DataLoader's workers."""

    def __init__(self, x: np.ndarray, y: np.ndarray, idx: np.ndarray, augment: bool, num_classes: int = 100):
        self.x, self.y, self.idx, self.augment = x, y, idx, augment
        self.c = num_classes  # fastai v1 reads .c (number of classes; cnn_learner sizes its head by it)

    def __len__(self) -> int:
        return len(self.idx)

    def __getitem__(self, i: int):
        j = int(self.idx[i])
        img = torch.from_numpy(np.ascontiguousarray(self.x[j])).permute(2, 0, 1)
        if self.augment:
            # torch's generator, which the DataLoader seeds per worker (numpy's would
            # repeat the same draws in every forked worker)
            dy, dx = torch.randint(0, 2 * PAD + 1, (2, 1))
            flip = torch.rand(1) < 0.5
            _, h, w = img.shape
            rows, cols = crop_flip_indices(dy, dx, flip, h, w, PAD)
            img = img[:, rows[0][:, None], cols[0][None, :]]
        return img, int(self.y[j])


def _batch_tfm(mean: list, std: list, size: int, src: int, device: torch.device) -> Callable:
    m = torch.tensor(mean, device=device).view(1, -1, 1, 1)
    s = torch.tensor(std, device=device).view(1, -1, 1, 1)

    def tfm(b):
        x, y = b
        x = (x.float() / 255.0 - m) / s
        if size != src:
            x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
        return x, y

    return tfm


def make_data(cfg: TrainConfig, arrays: Any, num_workers: int):
    with fastai_engine.fastai_imports():
        from fastai.basic_data import DataBunch

    device = torch.device(cfg.device)
    rng = np.random.RandomState(cfg.seed)
    n_train = len(arrays.train_x)
    if cfg.steps:
        count = cfg.steps * cfg.batch_size
        reps = -(-count // n_train)
        train_idx = np.concatenate([rng.permutation(n_train) for _ in range(reps)])[:count]
    else:
        train_idx = np.arange(n_train)
    n_valid = len(arrays.test_x) if cfg.evaluate else min(cfg.batch_size, len(arrays.test_x))
    mean, std = channel_stats(arrays.train_x)
    train = PadCropFlipDataset(arrays.train_x, arrays.train_y, train_idx, True, cfg.num_classes)
    valid = PadCropFlipDataset(arrays.test_x, arrays.test_y, np.arange(n_valid), False, cfg.num_classes)
    tfm = _batch_tfm(mean, std, cfg.image_size, arrays.train_x.shape[1], device)
    return DataBunch.create(train, valid, bs=cfg.batch_size, num_workers=num_workers, device=device,
                            dl_tfms=[tfm], no_check=True)


# --------------------------------------------------------------------------- learner
def _quiet_progress_bars() -> None:
    """fastai v1 draws fastprogress bars in fit(); NO_BAR stops their updates (fastprogress
    0.2 still prints each bar's empty outline once). The kit reports progress itself."""
    try:
        with fastai_engine.fastai_imports():
            import fastai.basic_train as bt
            from fastprogress import fastprogress as fp

        fp.NO_BAR = True
        bt.master_bar, bt.progress_bar = fp.force_console_behavior()
    except Exception:  # noqa: BLE001 - cosmetic only
        pass


def build_learner(cfg: TrainConfig, arrays: Any, num_workers: int):
    with fastai_engine.fastai_imports():
        import fastai.train  # noqa: F401 - patches Learner.to_fp16 and fit_one_cycle
        from fastai.basic_train import Learner
        from fastai.metrics import accuracy

    _quiet_progress_bars()
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    # fastai v1's create_cnn (the article's call) and its examples/train_cifar.py set it
    torch.backends.cudnn.benchmark = True
    data = make_data(cfg, arrays, num_workers)
    if cfg.learner == "create_cnn":
        learn = create_cnn(data, cfg)
    else:
        model = models.build(cfg.model, cfg.num_classes).to(cfg.device)
        learn = Learner(data, model, loss_func=nn.CrossEntropyLoss(), metrics=[accuracy], silent=True)
    if precision_modes.scheme(cfg.precision) == precision_modes.TWO_COPIES:
        # the article's window (fastai 1.0.38-1.0.42): to_fp16() was a static scale of 512 with no
        # overflow check; 1.0.61's dynamic check reads every gradient back (--dynamic-loss-scale)
        learn = (learn.to_fp16(dynamic=True) if cfg.dynamic_loss_scale
                 else learn.to_fp16(loss_scale=cfg.static_loss_scale, dynamic=False))
    return learn


def create_cnn(data: Any, cfg: TrainConfig):
    """fastai v1's create_cnn learner, built by fastai (``cnn_learner``, or ``create_cnn`` before
    1.0.47) with random weights, frozen as create_cnn leaves a learner: create_cnn calls
    ``learn.freeze()`` only when ``pretrained``, its default, so the kit, which downloads no
    weights, calls it. Frozen: every layer group but the head gets ``requires_grad=False``
    except its BatchNorm layers (``train_bn=True``)."""
    with fastai_engine.fastai_imports():
        import fastai.vision.learner as vl
        from fastai.metrics import accuracy

    build = getattr(vl, create_cnn_call())
    learn = build(data, models.torchvision_arch(cfg.model), pretrained=False, loss_func=nn.CrossEntropyLoss(),
                  metrics=[accuracy], silent=True)
    learn.freeze()
    return learn


class _NoData:
    """What v1's cnn_learner and Learner read from a DataBunch, for building the learner without
    data (the FLOP count, on the meta device)."""

    def __init__(self, num_classes: int):
        self.c, self.device, self.path, self.loss_func = num_classes, torch.device("meta"), Path("."), None


def create_cnn_flops_per_image(cfg: TrainConfig) -> int:
    """Forward + backward FLOPs per image of the create_cnn learner's model as it trains (frozen:
    the body's convolutions compute no weight gradients), counted on the meta device (needs
    torch's FlopCounterMode: torch 2.1 or later, so not in the cuda10 image's torch 1.4)."""
    from kit.bench.flops import train_step_flops_per_item

    return train_step_flops_per_item(lambda: create_cnn(_NoData(cfg.num_classes), cfg).model,
                                     (3, cfg.image_size, cfg.image_size), cfg.num_classes)


def _timer(learn: Any, clock: "timing.StepClock", bs: int, ctx: Any, repeat: int, progress: Callable | None, every: int):
    with fastai_engine.fastai_imports():
        from fastai.callback import Callback

    class KitTimerV1(Callback):
        """fastai v1 callback: epoch times, steady-state throughput, data wait, overflows, NaNs.
        Synchronises only at epoch edges, after the first step and at the end of warm-up."""

        _order = -100

        def __init__(self):
            self.data_wait = 0.0
            self.overflows = 0
            self.nan = 0
            self.losses: list = []
            self.valid: list = []
            self._t_prev = None
            self._scale = None
            self.last_loss = None
            self.mp = getattr(learn, "mp_cb", None)  # set by v1's to_fp16()

        def on_epoch_begin(self, **kwargs):
            clock.epoch_start()
            self._t_prev = time.perf_counter()
            self._sum, self._n = 0.0, 0

        def on_batch_begin(self, train, **kwargs):
            if train and self._t_prev is not None:
                self.data_wait += time.perf_counter() - self._t_prev

        def on_batch_end(self, train, last_loss, **kwargs):
            if not train:
                return
            stop_point(ctx.should_stop)
            loss = float(last_loss)  # fastai v1 reads the loss on the host every batch anyway
            if not np.isfinite(loss):
                self.nan += 1
            self.last_loss = loss
            self._sum += loss
            self._n += 1
            if self.mp is not None and getattr(self.mp, "dynamic", False):
                scale = float(self.mp.loss_scale)
                if self._scale is not None and scale < self._scale:
                    self.overflows += 1  # v1's dynamic scaler halves the scale and skips the step on overflow
                self._scale = scale
            first = clock.steps == 0
            was_warm = clock.warm
            clock.step_done(bs)
            if first:
                ctx.event("step", repeat=repeat, step=1, time_to_first_step_s=clock.t_first_step - clock.t_start)
            elif clock.warm and not was_warm:
                ctx.event("step", repeat=repeat, step=clock.steps, warm=True)
            if progress is not None and clock.steps % every == 0:
                progress(clock.steps)
            self._t_prev = time.perf_counter()

    return KitTimerV1()


def train_repeat(cfg: TrainConfig, arrays: Any, ctx: Any, repeat: int,
                 progress: Callable[[int], None] | None = None, num_workers: int | None = None) -> dict:
    device = cfg.device
    nw = default_num_workers(device) if num_workers is None else num_workers
    spe, clock = repeat_clock(cfg, len(arrays.train_x))
    learn = build_learner(cfg, arrays, nw)
    timer = _timer(learn, clock, cfg.batch_size, ctx, repeat, progress, max(1, spe // 20))
    epoch_marks = _epoch_marks(clock, timer, ctx, repeat, cfg)
    clock.start()
    kwargs = {} if cfg.lr is None else {"max_lr": cfg.lr}
    learn.fit_one_cycle(cfg.epochs, callbacks=[timer, epoch_marks], **kwargs)
    rec = fastai_engine.timed_record(clock, device, timer.data_wait)
    accs = list(epoch_marks.accuracy) if cfg.evaluate else []
    mp = timer.mp
    rec.update(
        overflow_steps=timer.overflows,
        nan_losses=timer.nan,
        loss_scale_final=float(mp.loss_scale) if mp is not None else None,
        final_loss=timer.last_loss,
        final_metric=accs[-1] if accs else None,
        seed=cfg.seed,
        num_workers=nw,
        metrics={"train_loss": epoch_marks.train_losses,
                 **({"test_accuracy": accs, "test_loss": epoch_marks.valid_loss} if cfg.evaluate else {})},
        precision={"mode": cfg.precision, "fastai": FASTAI_PRECISION.get(cfg.precision),
                   "cudnn_benchmark": bool(torch.backends.cudnn.benchmark)},
        **fastai_engine.parameter_counts(learn.model),
    )
    del learn
    free_device_memory()
    return rec


def _epoch_marks(clock: "timing.StepClock", timer: Any, ctx: Any, repeat: int, cfg: TrainConfig):
    """Stops the epoch clock when training ends and validation starts (v1 has no
    after_train event: the first validation batch's on_batch_begin marks it)."""
    with fastai_engine.fastai_imports():
        from fastai.callback import Callback

    class EpochMarks(Callback):
        _order = -99

        def __init__(self):
            self.train_losses: list = []
            self.accuracy: list = []
            self.valid_loss: list = []
            self._open = False

        def on_epoch_begin(self, **kwargs):
            self._open = True

        def _close(self, epoch):
            if not self._open:
                return
            self._open = False
            dt = clock.epoch_end()
            timer._t_prev = None
            self.train_losses.append(timer._sum / max(1, timer._n))
            self._event = {"repeat": repeat, "epoch": epoch, "seconds": dt,
                           "images": timer._n * cfg.batch_size, "train_loss": self.train_losses[-1]}

        def on_batch_begin(self, train, epoch, **kwargs):
            if not train:
                self._close(epoch)

        def on_epoch_end(self, epoch, last_metrics, **kwargs):
            self._close(epoch)  # no validation batches at all
            ev = dict(self._event)
            if last_metrics and len(last_metrics) >= 2:
                self.valid_loss.append(float(last_metrics[0]))
                self.accuracy.append(float(last_metrics[1]))
                if cfg.evaluate:
                    ev.update(test_loss=self.valid_loss[-1], test_accuracy=self.accuracy[-1])
            ctx.event("epoch", **ev)

    return EpochMarks()


def run_repeats(cfg: TrainConfig, arrays: Any, ctx: Any, repeats: int,
                progress: Callable[[int, int], None] | None = None, num_workers: int | None = None,
                after_last: Any = None) -> list:
    """All repeats, by the v2 engine's loop with this engine's repeat; ``after_last`` is not
    called: this engine runs no profiled window."""
    return fastai_engine.run_repeats(cfg, arrays, ctx, repeats, progress, num_workers, train=train_repeat)
