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


def warmup_batches(batches: int, steps: int) -> int:
    """Unprofiled batches before the window: the fresh loader's first ones (its workers starting,
    step_profile.DEFAULT_WARMUP), as many as the epoch leaves beside the ``steps`` profiled.

    The window does not wait out the queue the workers fill ahead (workers x prefetch, 34 batches with
    16 workers): the ladder decomposes the timed repeats' step (``timed_step_s``), not the window's own,
    and the window reads only the device's work, which a batch taken from the queue does not change.
    On an H100 the warm-up took 0.83-1.70 s with the 34 batches, 0.47-0.68 s with 2, and the window's steps
    were no closer to the timed ones with the 34 (references/h100/window-trials/)."""
    return max(0, min(step_profile.DEFAULT_WARMUP, batches - steps))


def profile_fit(learn: Any, cfg: TrainConfig, steps: int) -> dict:
    """The profiled window of a fastai cell: one more ``learn.fit`` of the same Learner, with its
    precision callbacks and its loader, ended after ``steps`` profiled batches (after the fresh
    loader's first batches, unprofiled: :func:`warmup_batches`). The step profiled is the loop a fastai user
    runs, data loading included."""
    where = "of one more fit of the same Learner, after the timed repeats"
    why = profile_window.not_profiled_reason(cfg.device)
    if why:
        return step_profile.unavailable(why, profile_window.source(steps, where, cfg.device))
    batches = len(learn.dls.train)
    steps = min(steps, batches)
    warm = warmup_batches(batches, steps)
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
    return window.ended(cb.profile)  # the fit's end (its loader's workers shut down) is the window's too
