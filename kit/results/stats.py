"""Summary statistics over repeats (median, spread, coefficient of variation).

Pure Python so the host side (bundles, compare, reports) can use it without numpy.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Iterable

#: pyperf warns when the standard deviation reaches 10% of the mean; we flag the same.
HIGH_CV = 0.10


@dataclass(frozen=True)
class Stats:
    n: int
    median: float
    mean: float
    min: float
    max: float
    stdev: float
    cv: float  # stdev / mean (0 when n == 1)

    @classmethod
    def of(cls, samples: Iterable[float]) -> "Stats | None":
        xs = [float(x) for x in samples if x is not None and not (isinstance(x, float) and math.isnan(x))]
        if not xs:
            return None
        mean = sum(xs) / len(xs)
        sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
        return cls(
            n=len(xs),
            median=statistics.median(xs),
            mean=mean,
            min=min(xs),
            max=max(xs),
            stdev=sd,
            cv=(sd / mean) if mean else 0.0,
        )

    @property
    def noisy(self) -> bool:
        return self.n > 1 and self.cv >= HIGH_CV

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Stats":
        return cls(**{k: d[k] for k in ("n", "median", "mean", "min", "max", "stdev", "cv")})


#: Per-repeat scalar metrics that get a summary. Units are in the names.
SUMMARISED = (
    "epoch_seconds_median",
    "throughput_items_per_s",
    "time_to_first_step_s",
    "data_wait_s",
    "compute_s",
    "peak_memory_bytes",
    "energy_j_per_epoch",
    "final_loss",
    "final_metric",
    "achieved_tflops",
    "gpu_busy_fraction",
)


def summarise_repeats(repeats: list[dict]) -> dict[str, dict]:
    """Stats for each summarised metric present in the repeats."""
    out: dict[str, dict] = {}
    for key in SUMMARISED:
        s = Stats.of(r.get(key) for r in repeats)
        if s is not None:
            out[key] = s.to_dict()
    return out


def repeat_notes(repeats: list) -> list:
    """What a cell's repeats say about themselves, in words: how many diverged, how many optimizer
    steps loss scaling skipped (the LSTM and GPT suites' cells carry these notes)."""
    notes = []
    diverged = sum(bool(rec.get("diverged")) for rec in repeats)
    if diverged:
        notes.append(f"{diverged} repeat(s) diverged (a NaN or infinite loss); their non-finite values are recorded as null")
    overflow = sum(rec.get("overflow_steps") or 0 for rec in repeats)
    if overflow:
        notes.append(f"{overflow} optimizer step(s) skipped for gradient overflow across repeats (loss scaling)")
    return notes
