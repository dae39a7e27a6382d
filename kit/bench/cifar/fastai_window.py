"""The profiled window of a fastai cell: one more ``fit`` of the last repeat's Learner, its precision
callbacks and its loader included, ended after a few profiled batches (kit.bench.profile_window's
Window, driven from a fastai callback)."""

from __future__ import annotations

from typing import Any

from kit.bench import profile_window
from kit.bench.cifar.fastai_engine import fastai_imports
from kit.bench.cifar.train_config import TrainConfig
from kit.results import step_profile


def _make_window_cls():
    with fastai_imports():
        from fastai.callback.core import Callback, CancelFitException

    class ProfileWindow(Callback):
        """Runs ``warm`` training batches, then profiles the next ``steps`` whole loop iterations
        (the loader's next batch, the batch transforms, the step with the precision callbacks)
        and ends the fit: the window starts and ends at ``after_batch``, the device synchronised."""

        def __init__(self, window: profile_window.Window, warm: int, steps: int):
            self.window, self.warm, self.steps = window, warm, steps
            self.seen = 0
            self.profile: dict | None = None

        def before_train(self):
            if self.warm == 0:
                self.window.start()

        def after_batch(self):
            if not self.training:
                return
            self.seen += 1
            if self.seen == self.warm:
                self.window.start()
            elif self.seen == self.warm + self.steps:
                self.profile = self.window.stop()
                raise CancelFitException()

    return ProfileWindow


#: batches each loader worker prepares ahead (torch's DataLoader default, which fastai's loader keeps)
PREFETCH_FACTOR = 2


def warmup_batches(learn: Any) -> int:
    """Unprofiled batches before the window: the loader's start (step_profile.DEFAULT_WARMUP) and
    the queue its workers fill ahead while the first batch starts them (workers x prefetch): a
    window taken on that queue would not wait for data as the timed loop did. Where the loop is
    slower than its workers the queue takes longer to drain; the profile's ``timed_step_s`` beside
    its ``step_s`` shows what is left."""
    workers = getattr(getattr(learn.dls.train, "fake_l", None), "num_workers", 0) or 0
    return step_profile.DEFAULT_WARMUP + workers * PREFETCH_FACTOR


def profile_fit(learn: Any, cfg: TrainConfig, steps: int) -> dict:
    """The profiled window of a fastai cell: one more ``learn.fit`` of the same Learner, with its
    precision callbacks and its loader, ended after ``steps`` profiled batches (after the fresh
    loader's first batches, unprofiled: :func:`warmup_batches`). The step profiled is the loop a fastai user runs, data
    loading included: its idle gap holds the wait for data."""
    where = "of one more fit of the same Learner, after the timed repeats"
    why = profile_window.not_profiled_reason(cfg.device)
    if why:
        return step_profile.unavailable(why, profile_window.source(steps, where, cfg.device))
    batches = len(learn.dls.train)
    steps = min(steps, batches)
    warm = min(warmup_batches(learn), batches - steps)
    window = profile_window.Window(cfg.device, steps, where)
    cb = _make_window_cls()(window, warm, steps)
    try:
        learn.fit(1, lr=cfg.lr, cbs=[cb])
    except KeyboardInterrupt:
        window.abandon()
        raise
    except Exception as exc:  # the window is an extra: its failure must not cost the cell's figures
        window.abandon()
        return step_profile.unavailable(f"the profiled window failed: {exc.__class__.__name__}: {exc}",
                                        window.source)
    if cb.profile is None:
        window.abandon()
        return step_profile.unavailable(f"the fit ended after {cb.seen} batches, before the window's {steps}",
                                        window.source)
    return cb.profile
