"""How the index stores a run's figures (kit.compare.figures.RunFigures): compact JSON, zlib, checked
when read.

``kit index add`` computes each run's figures once (:func:`kit.compare.figures.run_figures`, the
functions every view uses) and stores them in ``bundles.figures_z``; ``kit compare --index`` reads
them back (:func:`decode`) instead of re-reading and re-deriving 200 results.json files. The form:

    {"format": 1, "run_id": ..., "mode": ..., "data": ..., "params": [the distinct params dicts],
     "cells": [[key, status, reason, data_source]                           (a cell not ok)
               [key, status, reason, data_source, unit, params (an index into "params"), busy,
                throughput, epoch time, final metric (each [n, mean, sd, median, min, max] or null),
                energy, flags, throughput values, epoch values, their two medians,
                speedup over fp32 ([ratio, ci_low, ci_high, p, df, verdict, mean_ratio] or null), parity]]}

Floats are written as ``json`` writes them (``repr``: they read back the same). What is read back is
checked field by field, so a damaged or edited index is named (:class:`kit.errors.SchemaError`),
never a traceback in a view. A change to what a comparison reads of a run changes
:data:`FORMAT` and adds a migration (kit.index.db.MIGRATIONS) that recomputes the stored figures.
"""

from __future__ import annotations

import json
import zlib
from math import fsum, isfinite

from kit.compare.figures import CellFigures, RunFigures
from kit.compare.stats import NOT_SIGNIFICANT, ONE_REPEAT, SIGNIFICANT, RatioEstimate, Sample

FORMAT = 1
_OK_ROW = 18  # the length of an ok cell's row
_VERDICTS = frozenset((SIGNIFICANT, NOT_SIGNIFICANT, ONE_REPEAT))


class Damaged(ValueError):
    """The stored figures are not what :func:`encode` writes."""


def _sample_out(s: Sample | None):
    return None if s is None else [s.n, s.mean, s.sd, s.median, s.min, s.max]


def _ratio_out(e: RatioEstimate | None):
    return None if e is None else [e.ratio, e.ci_low, e.ci_high, e.p_value, e.df, e.verdict, e.mean_ratio]


def encode(fig: RunFigures) -> bytes:
    params: list = []
    seen: dict = {}
    cells = []
    for c in fig.cells:
        head = [list(c.key), c.status, c.reason, c.data_source]
        if not c.ok:
            cells.append(head)
            continue
        text = json.dumps(c.params, sort_keys=True)
        if text not in seen:
            seen[text] = len(params)
            params.append(c.params)
        cells.append(head + [c.unit, seen[text], c.busy, _sample_out(c.throughput), _sample_out(c.epoch_s),
                             _sample_out(c.final_metric), c.energy_j_per_epoch, list(c.flags),
                             list(c.throughput_values), list(c.epoch_values), c.throughput_median, c.epoch_median,
                             _ratio_out(c.vs_fp32), c.parity])
    doc = {"format": FORMAT, "run_id": fig.run_id, "mode": fig.mode, "data": fig.data, "params": params, "cells": cells}
    return zlib.compress(json.dumps(doc, separators=(",", ":"), allow_nan=True).encode("utf-8"), 6)


# ----------------------------------------------------------------------------- reading, checked
# The checks run on every cell of every run a comparison reads (31,200 of them for 200 runs of the
# full CIFAR suite), so they lean on C: math.fsum raises TypeError for anything that is not a number
# (a bool counts as one, harmlessly), and its sum is finite only if every term is.

def _text(v, what: str):
    if v is None or type(v) is str:
        return v
    raise Damaged(f"{what} is not text")


def _numbers(v, what: str, finite: bool = False) -> list:
    if type(v) is not list:
        raise Damaged(f"{what} is not a list")
    try:
        total = fsum(v)
    except (TypeError, OverflowError, ValueError):
        raise Damaged(f"{what} holds something other than numbers") from None
    if finite and not isfinite(total):
        raise Damaged(f"{what} holds something other than finite numbers")
    return v


def _sample(v, what: str) -> Sample | None:
    if v is None:
        return None
    if type(v) is not list or len(v) != 6 or type(v[0]) is not int or v[0] < 1:
        raise Damaged(f"{what} is not a sample")
    _numbers(v, what)
    return Sample(*v)


def _ratio(v, what: str) -> RatioEstimate | None:
    if v is None:
        return None
    if type(v) is not list or len(v) != 7 or v[5] not in _VERDICTS or v[0] is None:
        raise Damaged(f"{what} is not a ratio estimate of the kit's")
    _numbers([x for x in (v[0], v[1], v[2], v[3], v[4], v[6]) if x is not None], what)
    return RatioEstimate(*v)


def _median(v, what: str) -> float | None:
    if v is None or type(v) is float or type(v) is int:
        return v
    raise Damaged(f"{what}: a median is not a number")


def _cell(row, params: list) -> CellFigures:
    if type(row) is not list or len(row) not in (4, _OK_ROW):
        raise Damaged("a cell is not a row of the kit's form")
    key = row[0]
    try:  # str.join: a TypeError unless every part is text
        what = "/".join(key) if type(key) is list and len(key) >= 4 else None
    except TypeError:
        what = None
    if what is None:
        raise Damaged("a cell's key is not 4 or more names")
    key = tuple(key)
    status, reason, data_source = row[1], row[2], row[3]
    if type(status) is not str or (status == "ok") != (len(row) == _OK_ROW):
        raise Damaged(f"{what}: the status does not match the row")
    _text(reason, what), _text(data_source, what)
    if status != "ok":
        return CellFigures(key, status, reason, data_source=data_source)
    (unit, p_index, busy, tp, ep, fm, energy, flags, tp_values, ep_values, tp_median, ep_median, vs_fp32,
     parity) = row[4:]
    if type(p_index) is not int or not 0 <= p_index < len(params):
        raise Damaged(f"{what}: its params are not in the table")
    if parity is not None and type(parity) is not dict:
        raise Damaged(f"{what}: its parity row is not an object")
    try:
        if type(flags) is not list or type("".join(flags)) is not str:
            raise TypeError
    except TypeError:
        raise Damaged(f"{what}: its flags are not text") from None
    if energy is not None and type(energy) is not float and type(energy) is not int:
        raise Damaged(f"{what}: its energy is not a number")
    _text(unit, what), _text(busy, what)
    return CellFigures(
        key, status, reason, unit or "items", params[p_index], data_source, busy,
        _sample(tp, what), _sample(ep, what), _sample(fm, what), energy, flags,
        _numbers(tp_values, what, True), _numbers(ep_values, what, True), _ratio(vs_fp32, what), parity,
        _median(tp_median, what), _median(ep_median, what))


def decode(blob: bytes) -> RunFigures:
    """The figures :func:`encode` stored; :class:`Damaged` (with what is wrong) for anything else."""
    try:
        doc = json.loads(zlib.decompress(blob))
    except (zlib.error, ValueError) as exc:
        raise Damaged(f"not the kit's stored figures ({exc})") from None
    if type(doc) is not dict or doc.get("format") != FORMAT:
        raise Damaged("not the kit's stored figures (format)")
    params, cells = doc.get("params"), doc.get("cells")
    if type(params) is not list or any(type(p) is not dict for p in params) or type(cells) is not list:
        raise Damaged("not the kit's stored figures (params, cells)")
    return RunFigures(_text(doc.get("run_id"), "the run id"), _text(doc.get("mode"), "the mode"),
                      [_cell(row, params) for row in cells], _text(doc.get("data"), "the data source"))
