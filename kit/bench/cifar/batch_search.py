"""Find the largest batch that trains without running out of device memory.

The seed article found fp16 fitting about 1.8x larger batches. We measure it the
same way a person would, but without guessing: double the batch until a try runs
out of memory, then binary-search between the last success and the first
failure. Each try runs a few real training steps (the caller's ``try_batch``), so
activation, gradient, optimizer and workspace memory are all counted.

An out-of-memory error is an answer here, never a crash: it is caught, the
memory is released (``free``), and the search continues.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Callable

from kit.bench.context import stop_point


def is_oom(exc: BaseException) -> bool:
    """True for CUDA out-of-memory errors, including the cuBLAS/cuDNN allocation
    failures that appear instead of them close to the limit."""
    try:
        import torch

        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
    except Exception:  # pragma: no cover - torch always importable in kit.bench
        pass
    if isinstance(exc, (RuntimeError, MemoryError)):
        text = str(exc).lower()
        return "out of memory" in text or "alloc_failed" in text or isinstance(exc, MemoryError)
    return False


def free_device_memory() -> None:
    """Drop garbage and give cached CUDA blocks back so the next try starts clean."""
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # pragma: no cover
        pass


@dataclass
class Try:
    batch_size: int
    fits: bool


def find_max_batch(
    try_batch: Callable[[int], None],
    start: int = 64,
    limit: int = 65_536,
    resolution: int = 1,
    free: Callable[[], None] = free_device_memory,
    log: list[Try] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> int:
    """The largest batch size in [1, limit] for which ``try_batch`` does not run out
    of memory (0 when even batch 1 does not fit).

    ``try_batch(n)`` runs a few training steps at batch ``n`` and returns; an OOM
    it raises means "does not fit", any other error propagates. ``free`` runs
    after every try. ``resolution`` stops the binary search once the bracket is
    that narrow (1 = exact). Every try is appended to ``log`` when given.
    ``should_stop`` is asked before every try: a stop request (the run's Ctrl-C or SIGTERM, even one
    whose KeyboardInterrupt was lost in a weakref callback of PyTorch's compiler) ends the search
    with KeyboardInterrupt instead of after its remaining tries.
    """
    if start < 1 or limit < 1 or resolution < 1:
        raise ValueError("start, limit and resolution must be at least 1")

    def fits(n: int) -> bool:
        stop_point(should_stop)
        ok = True
        try:
            try_batch(n)
        except BaseException as exc:  # noqa: BLE001 - filtered just below
            if not is_oom(exc):
                raise
            ok = False
            # the traceback holds frames that reference the failed try's tensors
            exc.__traceback__ = None
            del exc
        free()
        if log is not None:
            log.append(Try(n, ok))
        return ok

    good, bad = 0, None
    n = min(start, limit)
    # phase 1: double until a try fails or the limit is reached
    while True:
        if fits(n):
            good = n
            if n >= limit:
                return good
            n = min(n * 2, limit)
        else:
            bad = n
            break
    # phase 2: binary search in (good, bad)
    while bad - good > resolution:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good
