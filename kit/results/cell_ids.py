"""Cell ids: what tells cells apart (workload, model, precision, engine; a CIFAR image size other
than 32 px; a batch-curve point's batch), and a cell's label with its fastai learner."""

from __future__ import annotations

import fnmatch

from typing import Any

from kit.results import suites
from kit.results.schema_names import LEARNER_BEFORE_THE_OPTION


#: params key that marks a cell as one point of a batch curve (``kit run --batch-sizes``): the
#: sorted list of the curve's batch sizes; the point's own batch is ``params["batch_size"]``
CURVE_PARAM = "batch_curve"


def curve_batch(params: Any) -> int | None:
    """The batch size of a batch-curve point (its params carry :data:`CURVE_PARAM`), else None."""
    if not isinstance(params, dict) or not params.get(CURVE_PARAM):
        return None
    b = params.get("batch_size")
    return b if isinstance(b, int) and not isinstance(b, bool) else None


#: CIFAR's own image size: the cells measured at it keep the ids they always had
NATIVE_IMAGE_SIZE = 32


def image_size_part(workload: str, params: Any) -> tuple[str, ...]:
    """``("224px",)`` for a cell of a suite with image sizes (its descriptor's ``sized``: CIFAR's)
    measured at another size than the data set's own 32 px (upsampled on the device: another
    measurement, which must not line up with, or be merged over, the 32 px cell), else ``()``."""
    size = params.get("image_size") if isinstance(params, dict) else None
    found = suites.find(workload)
    if not (found and found.sized) or not isinstance(size, int) or isinstance(size, bool) or size == NATIVE_IMAGE_SIZE:
        return ()
    return (f"{size}px",)


def cell_key(workload: str, model: str, precision: str, engine: str, params: Any = None) -> tuple[str, ...]:
    """What tells cells apart: (workload, model, precision, engine); a CIFAR cell at another image
    size than 32 px adds it (``"224px"``), and a point of a batch curve its batch (``"bs512"``).
    ``"/".join(key)`` is the cell's id: ``cifar/resnet50/amp-fp16/torch/224px/bs512``."""
    b = curve_batch(params)
    return (workload, model, precision, engine) + image_size_part(workload, params) + (() if b is None else (f"bs{b}",))


def key_of(cell: Any) -> tuple[str, ...]:
    """:func:`cell_key` of a CellSpec or CellResult."""
    return cell_key(cell.workload, cell.model, cell.precision, cell.engine, getattr(cell, "params", None))


def cell_id(workload: str, model: str, precision: str, engine: str, params: Any = None) -> str:
    """``cifar/resnet18/fp32/torch``; at another image size ``.../torch/224px``; a batch-curve point
    adds its batch: ``.../torch/bs512`` (cells at 32 px without a curve keep the ids they always
    had, so old bundles line up; every id is computed from the cell's params, so an old bundle's
    224 px cells read with today's ids too)."""
    return "/".join(cell_key(workload, model, precision, engine, params))


def cell_learner(engine: str, params: dict | None) -> str | None:
    """The fastai learner a cell trained with (its ``params["learner"]``); None for the other
    engines, which have none. A fastai cell recorded before the option existed trained the
    plain Learner: ``scratch``."""
    if engine != "fastai":
        return None
    return str((params or {}).get("learner") or LEARNER_BEFORE_THE_OPTION)


def cell_label(cell_id_: str, learners: Any) -> str:
    """A cell's id as the reports and ``kit compare`` show it: with its learner for fastai cells,
    ``cifar/resnet18/fp32/fastai (create_cnn)``; ``learners`` is one name, None, or the names of
    several machines' cells (shown joined, in the machines' order, when they differ). The id itself
    never changes."""
    names = [learners] if learners is None or isinstance(learners, str) else list(learners)
    names = list(dict.fromkeys(n for n in names if n))
    if not names:
        return cell_id_
    return f"{cell_id_} ({' / '.join(names)})" if len(names) == 1 else f"{cell_id_} (learners differ: {' / '.join(names)})"


def matches(name: str, patterns: Any) -> bool:
    """Whether a cell id (or a batch curve's name) matches any of the shell ``patterns`` (``--cell``
    of `kit bundle show` and `kit explain`; every name where there are none)."""
    return not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)
