"""The learning-rate schedule of the torch engine and its graphed step: fastai's one cycle."""

from __future__ import annotations

import math


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
