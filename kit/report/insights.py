"""Plain-language lines: what each model's run says, and what bound it.

A line is written only where the data supports it: a speedup claim needs the
fp32 cell and the reduced-precision cell; "limited by the data loader" needs
the measured data-wait and compute times; "the GPU was busy N%" needs NVML
utilisation. Nothing is inferred from missing data.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.compare import measures
from kit.compare.stats import ONE_REPEAT
from kit.results.schema import RunResults

#: Below this fp32/reduced time ratio a precision "gave no speedup" (the
#: 2019 article's ResNet-101 gain was 1.13-1.18x; under 1.1 is within what
#: launch overheads and loaders usually eat).
NO_SPEEDUP_BELOW = 1.10
#: A run that waited for data this share of its step time was loader-bound.
DATA_BOUND_FRACTION = 0.30
#: Mean NVML utilisation under this is worth saying out loud.
LOW_UTIL_PCT = 70.0


@dataclass(frozen=True)
class Insight:
    subject: str  # "resnet18 · torch"
    text: str


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def run_insights(results: RunResults, synthetic: bool) -> list[Insight]:
    cells = measures.ok_cells(results)
    ratios = measures.speedup_vs_fp32(results)
    groups: dict[tuple[str, str, str], list[tuple[str, str, str, str]]] = {}
    for key in sorted(cells, key=measures.order_key):
        groups.setdefault((key[0], key[1], key[3]), []).append(key)
    out: list[Insight] = []
    for (workload, model, engine), keys in groups.items():
        parts: list[str] = []
        faster = []
        for key in keys:
            est = ratios.get(key)
            if est is None:
                continue
            precision = key[2]
            cell = cells[key]
            note = "" if est.significant else "1 repeat" if est.verdict == ONE_REPEAT else est.verdict
            qualifier = f", {note}" if note else ""
            if est.ratio >= NO_SPEEDUP_BELOW:
                faster.append(f"{precision} ×{est.ratio:.2f}" + (f" ({note})" if note else ""))
                continue
            what = "was slower than fp32" if est.ratio < 1.0 else "gave no speedup"
            head = f"{precision} {what} (×{est.ratio:.2f}{qualifier})"
            wait = measures.data_wait_fraction(cell)
            util = measures.util_pct(cell)
            if wait is not None and wait >= DATA_BOUND_FRACTION:
                parts.append(f"{head}: the run was limited by the data loader (waiting for data {_pct(wait)} of the step time).")
            elif util is not None and util < LOW_UTIL_PCT:
                parts.append(
                    f"{head}: the GPU was busy {util:.0f}% of the time, so Python, kernel launches or the "
                    "input pipeline bound the run, not GPU math."
                )
            elif wait is not None:
                parts.append(f"{head}; the data loader was not the limit (waiting for data {_pct(wait)} of the step time).")
            else:
                parts.append(f"{head}.")
        if faster:
            parts.insert(0, "faster than fp32: " + ", ".join(faster) + ".")
        base = cells.get((workload, model, measures.BASE_PRECISION, engine))
        if base is not None:
            util = measures.util_pct(base)
            if util is not None and util < LOW_UTIL_PCT:
                parts.append(f"In fp32 the GPU was busy {util:.0f}% of the time.")
        throttled = [k[2] for k in keys if measures.throttled(cells[k])]
        if throttled:
            parts.append(f"The GPU throttled (power or thermal) during {', '.join(throttled)}: those times are pessimistic.")
        noisy = [k[2] for k in keys if measures.high_cv(cells[k]) is not None]
        if noisy:
            parts.append(f"Repeats varied by 10% or more in {', '.join(noisy)}: treat those numbers with care.")
        if synthetic:
            parts.append("Synthetic data: throughput only; loss and accuracy mean nothing here.")
        if not any(ratios.get(k) for k in keys) and base is None:
            parts.insert(0, "no fp32 cell to compare against.")
        if parts:
            out.append(Insight(f"{model} · {engine}" if workload == "cifar" else f"LSTM {model} · {engine}", " ".join(parts)))
    return out
