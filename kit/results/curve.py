"""The batch curve (``kit run --batch-sizes``): throughput against batch size, and its knee.

Each point of a curve is a cell of its own (``cifar/resnet18/fp32/torch/bs512``; its params
carry the curve, kit.results.cell_ids.CURVE_PARAM), so each has its own repeats, telemetry and
status. A curve is the points of one workload x model x engine x precision::

    cells --curves()--> Curve(workload, model, engine, precision,
                              points=[Point(batch_size, throughput, speedup, images_per_j, ...)])
          --knee(points)--> the smallest batch past which doubling gains under 10%

Throughput is the median over repeats of the point's steady-state throughput; the speedup over
fp32 at a batch size is :func:`kit.results.ratios.speedup_over_fp32` of the point and fp32's
point at the same size (the project's one ratio). Images per joule is the point's telemetry
(kit.env.telemetry_summary.attach_energy: its steady throughput ÷ the GPU's mean board power
over the timed steps, or over the whole cell where those were too short to measure), where the
GPU reported energy or power; else None, never a guess. The two bases are not one quantity: over
the whole cell the warm-up's and setup's lower power is in the mean (on an H200 the timed steps drew
1.3-2.2x the whole-cell mean of the same cells), so such a figure reads high. The views mark it
(WHOLE_CELL) and the per-joule chart leaves it out.

Pure Python, Python 3.7 syntax (the report runs in the cuda10 image).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from kit.results import ratios
from kit.results.cell_ids import curve_batch, image_size_part
from kit.results.precisions import PRECISIONS

#: the knee: the first batch size past which doubling the batch gains less than this
KNEE_GAIN = 0.10
KNEE_DEFINITION = ("knee = the smallest batch size from which every step to the next measured size gains "
                   f"under {KNEE_GAIN:.0%} throughput per doubling of the batch")


#: how the views mark images per joule taken over the whole cell (warm-up included)
WHOLE_CELL = "whole cell, reads high"


@dataclass
class Point:
    """One batch size of a curve (a cell)."""

    batch_size: int
    status: str                       # the cell's: ok, skipped (e.g. out of memory), failed, interrupted
    reason: Optional[str] = None      # why not ok ("out of memory at batch 1024")
    throughput: Optional[float] = None  # median over repeats, items/s
    speedup_over_fp32: Optional[float] = None
    images_per_j: Optional[float] = None
    cell: Any = None
    #: over what images_per_j was measured: "steady" (the timed steps) or "cell" (the whole cell;
    #: also every cell from before the field); None where there is no figure
    energy_basis: Optional[str] = None

    @property
    def steady_images_per_j(self) -> Optional[float]:
        """images_per_j where it was measured over the timed steps; else None."""
        return self.images_per_j if self.energy_basis == "steady" else None

    @property
    def out_of_memory(self) -> bool:
        metrics = getattr(self.cell, "metrics", None)
        return isinstance(metrics, dict) and metrics.get("out_of_memory") is True

    @property
    def joules_per_image(self) -> Optional[float]:
        return 1.0 / self.images_per_j if self.images_per_j else None

    def to_dict(self) -> dict:
        return {"batch_size": self.batch_size, "status": self.status, "reason": self.reason,
                "throughput_items_per_s": self.throughput, "speedup_over_fp32": self.speedup_over_fp32,
                "items_per_j": self.images_per_j, "j_per_item": self.joules_per_image, "energy_basis": self.energy_basis,
                "out_of_memory": self.out_of_memory}


@dataclass
class Curve:
    workload: str
    model: str
    engine: str
    precision: str
    unit: str = "items"
    points: List[Point] = field(default_factory=list)
    #: the cells' image size (a CIFAR curve at 224 px is another curve than at 32 px)
    image_size: Optional[int] = None

    @property
    def shown(self) -> bool:
        """Worth a line in the views: some point ran, or ran out of memory (a curve whose every
        point was skipped, e.g. tf32 on a CPU, is in the cells' table with its reason)."""
        return any(p.status == "ok" or p.out_of_memory for p in self.points)

    @property
    def knee(self) -> Optional[int]:
        return knee([(p.batch_size, p.throughput) for p in self.points])

    @property
    def size_suffix(self) -> str:
        """``"/224px"`` for a CIFAR curve at another size than 32 px (as the cell ids say), else ``""``."""
        return "".join("/" + part for part in image_size_part(self.workload, {"image_size": self.image_size}))

    @property
    def name(self) -> str:
        return f"{self.workload}/{self.model}/{self.precision}/{self.engine}{self.size_suffix}"

    def to_dict(self) -> dict:
        return {"workload": self.workload, "model": self.model, "engine": self.engine, "precision": self.precision,
                "image_size": self.image_size,
                "throughput_unit": self.unit, "knee_batch_size": self.knee, "knee_rule": KNEE_DEFINITION,
                "points": [p.to_dict() for p in self.points]}


def gain_per_doubling(b1: int, t1: float, b2: int, t2: float) -> float:
    """The throughput gained from batch ``b1`` to ``b2`` (> b1), per doubling of the batch:
    (t2 / t1) ** (1 / log2(b2 / b1)) - 1 (a straight doubling: t2 / t1 - 1)."""
    return (t2 / t1) ** (1.0 / math.log2(b2 / b1)) - 1.0


def knee(points: List[Tuple[int, Optional[float]]], gain: float = KNEE_GAIN) -> Optional[int]:
    """The knee of a batch curve: the smallest batch size past which doubling the batch gains
    under ``gain`` (10%) throughput.

    ``points`` are (batch size, throughput) in any order; those without a throughput (out of
    memory, failed) are left out, so the curve ends at the largest batch that ran. Between two
    neighbouring measured sizes the gain is counted per doubling (:func:`gain_per_doubling`),
    so 256 -> 1024 gaining 21% is 10% per doubling. The knee is the smallest measured size b
    such that every step from b on gains under ``gain``; None when the largest step still
    gains ``gain`` or more (the knee lies past the measured sizes), or fewer than two sizes
    were measured (no step to judge).
    """
    measured = sorted((b, t) for b, t in points if t is not None and math.isfinite(t) and t > 0)
    if len(measured) < 2:
        return None
    found: Optional[int] = None
    for (b1, t1), (b2, t2) in zip(reversed(measured[:-1]), reversed(measured[1:])):
        if gain_per_doubling(b1, t1, b2, t2) >= gain:
            break
        found = b1
    return found


def fmt_knee(curve: Curve) -> str:
    """The knee as the views print it: ``512``, or why there is none."""
    k = curve.knee
    if k is not None:
        return f"{k:,}"
    measured = [p for p in curve.points if p.throughput is not None]
    if len(measured) < 2:
        return "— (fewer than 2 sizes measured)"
    return f"not reached (> {measured[-1].batch_size:,})"


def fmt_rate(value: Optional[float]) -> str:
    """A throughput or images per joule as the curve tables print it (``134,486``, ``8.21``)."""
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def point_parts(point: Point, unit: str) -> List[str]:
    """What the curve tables say of one point: its throughput, its speedup over fp32 (the one
    formatter, kit.results.ratios.fmt_speedup) and its images per joule; or why it has none."""
    if point.status != "ok":
        return [point.reason or point.status]
    parts = [fmt_rate(point.throughput) + f" {unit}/s"]
    if point.speedup_over_fp32 is not None:
        parts.append(ratios.fmt_speedup(point.speedup_over_fp32))
    if point.images_per_j is not None:
        mark = "" if point.energy_basis == "steady" else f" ({WHOLE_CELL})"
        parts.append(f"{fmt_rate(point.images_per_j)} {unit}/J{mark}")
    return parts


def _throughput(cell: Any) -> Optional[float]:
    xs = ratios.metric_values(cell, ratios.THROUGHPUT)
    return statistics.median(xs) if xs else None


def _energy(cell: Any) -> Tuple[Optional[float], Optional[str]]:
    """The cell's images per joule and its basis ("steady" or "cell"), or (None, None)."""
    tele = getattr(cell, "telemetry", None)
    if getattr(cell, "status", None) != "ok" or not isinstance(tele, dict) or not tele.get("available"):
        return None, None
    v = tele.get("items_per_j")
    if not (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0):
        return None, None
    return float(v), "steady" if tele.get("energy_basis") == "steady" else "cell"


def curves(cells: List[Any]) -> List[Curve]:
    """The batch curves among ``cells`` (points of ``--batch-sizes`` runs), one per workload x
    model x engine x precision x image size, points smallest batch first; [] for a run without a curve.
    Ordered by workload, image size, model (resnet18 before resnet50 before resnet101), engine and the
    schema's precision order (fp32 first), whatever order the cells came in (a merged bundle's parts)."""
    by: Dict[Tuple[Any, ...], Curve] = {}
    fp32: Dict[Tuple[Any, ...], Any] = {}
    for c in cells:
        b = curve_batch(c.params)
        if b is None:
            continue
        size = c.params.get("image_size") if isinstance(c.params, dict) else None
        key = (c.workload, c.model, c.engine, c.precision, size)
        curve = by.setdefault(key, Curve(c.workload, c.model, c.engine, c.precision, image_size=size))
        if c.status == "ok" and c.throughput_unit:
            curve.unit = c.throughput_unit
        per_j, basis = _energy(c)
        curve.points.append(Point(b, c.status, c.reason, _throughput(c) if c.status == "ok" else None,
                                  images_per_j=per_j, cell=c, energy_basis=basis))
        if c.precision == ratios.BASE_PRECISION and c.status == "ok":
            fp32[(c.workload, c.model, c.engine, size, b)] = c
    for curve in by.values():
        curve.points.sort(key=lambda p: p.batch_size)
        if curve.precision == ratios.BASE_PRECISION:
            continue
        for p in curve.points:
            base = fp32.get((curve.workload, curve.model, curve.engine, curve.image_size, p.batch_size))
            if p.status == "ok" and base is not None:
                p.speedup_over_fp32 = ratios.speedup_over_fp32(p.cell, base)

    def order(key: Tuple[Any, ...]) -> Tuple[Any, ...]:
        workload, model, engine, precision, size = key
        rank = PRECISIONS.index(precision) if precision in PRECISIONS else len(PRECISIONS)
        return str(workload), size or 0, _natural(str(model)), str(engine), rank

    return [by[k] for k in sorted(by, key=order)]


def _natural(name: str) -> Tuple[Any, ...]:
    """``name`` as a sort key with its runs of digits compared as numbers."""
    import re

    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def batch_curves(cells: List[Any]) -> List[dict]:
    """The curves as results.json's ``derived["batch_curves"]``."""
    return [c.to_dict() for c in curves(cells)]
