"""How the index stores a run's figures (kit.compare.figures.RunFigures): its numbers packed as
float64, the rest as compact JSON, zlib, checked when read.

``kit index add`` computes each run's figures once (:func:`kit.compare.figures.run_figures`, the
functions every view uses) and stores them in ``bundles.figures_z``; ``kit compare --index`` reads
them back (:func:`decode`) instead of re-reading and re-deriving 200 results.json files. The form,
inside zlib: the length of the JSON part (4 bytes, little-endian), the JSON part, then every number
of every cell as a little-endian float64 (read back with one ``array.frombytes``: parsing 800,000
numbers written as text was most of reading 200 runs). The JSON part:

    {"format": 3, "run_id": ..., "mode": ..., "data": ..., "params": [the distinct params dicts],
     "methods": [the distinct method records (kit.results.method)],
     "cells": [[key, status, reason, data_source]                                  (a cell not ok)
               [key, status, reason, data_source, unit, params (an index into "params"), busy,
                flags, the verdict of the speedup over fp32 (null: none), parity, shape,
                method (an index into "methods", or -1: method unknown),
                [what bound the cell: its kind and short form (kit.results.explain.bound)]]]}

where ``shape`` is ``[n of the throughput, of the epoch time, of the final metric (0: no such
sample), the number of throughput values, of epoch values, presence bits]`` and says which numbers
the cell has, in this order: each sample's mean, sd, median, min, max; the energy per epoch; the
throughput values; the epoch values; their two medians; the speedup's ratio, CI low, CI high, p,
df and ratio of means (:data:`_BITS` names the numbers that may be absent). A float64 holds a
Python float exactly, so the figures read back equal. What is read back is checked, so a damaged
or edited index is named (:class:`kit.errors.SchemaError`), never a traceback in a view. A change to
what a comparison reads of a run changes :data:`FORMAT` and adds a migration
(kit.index.db.MIGRATIONS) that recomputes the stored figures.
"""

from __future__ import annotations

import json
import struct
import sys
import zlib
from array import array
from math import fsum, isfinite

from kit.bundle import safe_json
from kit.bundle.safe_open import DEFAULT_LIMITS
from kit.compare.figures import CellFigures, RunFigures
from kit.results.method import method_of
from kit.compare.stats import NOT_SIGNIFICANT, ONE_REPEAT, SIGNIFICANT, RatioEstimate, Sample
from kit.facts import plausible
from kit.results.explain import KINDS

FORMAT = 5
_OK_ROW = 13  # the length of an ok cell's row
_VERDICTS = frozenset((SIGNIFICANT, NOT_SIGNIFICANT, ONE_REPEAT))
#: the presence bits of ``shape``: the numbers a cell may lack, in the order they are stored
_ENERGY, _TP_MEDIAN, _EP_MEDIAN, _CI_LOW, _CI_HIGH, _P, _DF, _MEAN_RATIO = (1 << i for i in range(8))
_BITS = 255
_SWAP = sys.byteorder != "little"  # the numbers are stored little-endian on every machine


class Damaged(ValueError):
    """The stored figures are not what :func:`encode` writes."""


#: the most bytes a stored blob may decompress to: what the bundle's own limits allow one file (a
#: results.json or env.json is at most that; a run's figures are a small part of its results.json)
MAX_INFLATED = DEFAULT_LIMITS.max_file_bytes


def inflate(blob: bytes, cap: int = MAX_INFLATED) -> bytes:
    """A stored blob (zlib) decompressed, never to more than ``cap`` bytes: an index is as untrusted
    as a bundle, and a few KB of zlib can claim gigabytes. :class:`Damaged` for more, or for a stream
    that is not zlib, is cut short or has bytes after its end."""
    d = zlib.decompressobj()
    try:
        out = d.decompress(blob, cap + 1)
    except (zlib.error, TypeError) as exc:
        raise Damaged(f"not zlib data ({exc})") from None
    if len(out) > cap or d.unconsumed_tail:
        raise Damaged(f"decompresses to more than {cap // (1 << 20)} MiB, the most a bundle's file may hold; "
                      "refused as a possible decompression bomb")
    if not d.eof or d.unused_data:
        raise Damaged("the compressed data is cut short or has bytes after its end")
    return out


def encode(fig: RunFigures) -> bytes:
    params: list = []
    seen: dict = {}
    methods: list = []
    seen_methods: dict = {}
    cells = []
    nums = array("d")
    put, extend = nums.append, nums.extend
    for c in fig.cells:
        head = [list(c.key), c.status, c.reason, c.data_source]
        if not c.ok:
            cells.append(head)
            continue
        text = json.dumps(c.params, sort_keys=True)
        if text not in seen:
            seen[text] = len(params)
            params.append(c.params)
        bits = 0
        for s in (c.throughput, c.epoch_s, c.final_metric):
            if s is not None:
                extend((s.mean, s.sd, s.median, s.min, s.max))
        if c.energy_j_per_epoch is not None:
            put(c.energy_j_per_epoch)
            bits |= _ENERGY
        extend(c.throughput_values)
        extend(c.epoch_values)
        for value, bit in ((c.throughput_median, _TP_MEDIAN), (c.epoch_median, _EP_MEDIAN)):
            if value is not None:
                put(value)
                bits |= bit
        e = c.vs_fp32
        if e is not None:
            put(e.ratio)
            for value, bit in ((e.ci_low, _CI_LOW), (e.ci_high, _CI_HIGH), (e.p_value, _P), (e.df, _DF),
                               (e.mean_ratio, _MEAN_RATIO)):
                if value is not None:
                    put(value)
                    bits |= bit
        shape = [s.n if s is not None else 0 for s in (c.throughput, c.epoch_s, c.final_metric)]
        shape += [len(c.throughput_values), len(c.epoch_values), bits]
        m = -1
        if c.method is not None:
            m_text = json.dumps(c.method, sort_keys=True)
            if m_text not in seen_methods:
                seen_methods[m_text] = len(methods)
                methods.append(c.method)
            m = seen_methods[m_text]
        cells.append(head + [c.unit, seen[text], c.busy, list(c.flags), None if e is None else e.verdict, c.parity,
                             shape, m, [c.explain_kind, c.explain_verdict]])
    doc = {"format": FORMAT, "run_id": fig.run_id, "mode": fig.mode, "data": fig.data, "params": params,
           "methods": methods, "cells": cells}
    text = json.dumps(doc, separators=(",", ":"), allow_nan=True).encode("utf-8")
    if _SWAP:
        nums.byteswap()
    return zlib.compress(struct.pack("<I", len(text)) + text + nums.tobytes(), 6)


# ----------------------------------------------------------------------------- reading, checked
# The checks run on every cell of every run a comparison reads (31,200 of them for 200 runs of the
# full CIFAR suite), so they lean on C: a float64 is always a number; math.fsum's sum of a cell's
# values is finite only if every value is; a shape that is not six counts fails the unpacking or the
# slicing (caught as the cell's damage); the numbers the shapes claim must be the numbers stored.

def _text(v, what: str):
    if v is None or type(v) is str:
        return v
    raise Damaged(f"{what} is not text")


#: the range of each kind of number a cell holds (kit.facts.plausible: what a bundle may hold); a
#: ratio of two throughputs lies between the smallest over the largest and the largest over the smallest
_TP = (plausible.MIN_THROUGHPUT, plausible.MAX_THROUGHPUT)
_EP = (plausible.MIN_SECONDS, plausible.MAX_SECONDS)
_RATIO = (_TP[0] / _TP[1], _TP[1] / _TP[0])


def _inside(values, bounds: tuple) -> bool:
    return not values or (bounds[0] <= min(values) and max(values) <= bounds[1])


def _impossible(tp_values: list, ep_values: list, samples: list, energy, medians: list, vs_fp32) -> str:
    """What no run can produce, by the bounds a bundle's figures keep (kit.results.plausible: finite,
    above zero and inside kit.facts.plausible's range; a spread finite, not negative and below the
    range's top), or "". The values are finite already (the caller's sum)."""
    if not _inside(tp_values, _TP) or not _inside(ep_values, _EP):
        return "a throughput or epoch time outside what any device can measure"
    for s, rng in zip(samples, (_TP, _EP, None)):
        if s is None:
            continue
        centre = (s.mean, s.median, s.min, s.max)
        if not isfinite(fsum(centre) + s.sd) or s.sd < 0 or (rng is not None and not (
                _inside(centre, rng) and s.sd <= rng[1])):
            return "a sample over the repeats that no run can produce"
    for m, rng in zip(medians, (_TP, _EP)):
        if m is not None and not _inside([m], rng):  # NaN is inside no range
            return "a median outside what any device can measure"
    if energy is not None and not (isfinite(energy) and plausible.MIN_ENERGY_J <= energy <= plausible.MAX_ENERGY_J):
        return "an energy per epoch outside what any device can measure"
    if vs_fp32 is not None:
        e = vs_fp32
        if not (isfinite(e.ratio) and _RATIO[0] <= e.ratio <= _RATIO[1]) or (
                e.p_value is not None and not 0 <= e.p_value <= 1) or any(
                v is not None and not isfinite(v) for v in (e.ci_low, e.ci_high, e.mean_ratio)) or (
                e.df is not None and e.df != e.df):
            return "a speedup over fp32 that no run can produce"
    return ""


def _cell_numbers(shape, verdict: str | None, nums: list, at: int) -> tuple:
    """A cell's numbers, read from ``nums`` at ``at`` as its ``shape`` says: (its three samples, its
    energy, its throughput and epoch-time values, the two optional medians, its speedup over fp32 with
    ``verdict``, where the next cell's numbers start). TypeError, ValueError or IndexError where
    they are not of the kit's form."""
    tp_n, ep_n, fm_n, n_tp, n_ep, bits = shape
    if type(shape) is not list or min(shape) < 0 or bits > _BITS:
        raise ValueError
    samples = []
    for n in (tp_n, ep_n, fm_n):
        if n:
            samples.append(Sample(n, *nums[at:at + 5]))
            at += 5
        else:
            samples.append(None)
    energy = None
    if bits & _ENERGY:
        energy = nums[at]
        at += 1
    tp_values = nums[at:at + n_tp]
    at += n_tp
    ep_values = nums[at:at + n_ep]
    at += n_ep
    opt = []
    for bit in (_TP_MEDIAN, _EP_MEDIAN):
        if bits & bit:
            opt.append(nums[at])
            at += 1
        else:
            opt.append(None)
    vs_fp32 = None
    if verdict is not None:
        ratio = nums[at]
        at += 1
        fields = []
        for bit in (_CI_LOW, _CI_HIGH, _P, _DF, _MEAN_RATIO):
            if bits & bit:
                fields.append(nums[at])
                at += 1
            else:
                fields.append(None)
        vs_fp32 = RatioEstimate(ratio, fields[0], fields[1], fields[2], fields[3], verdict, fields[4])
    if at > len(nums) or type(tp_n) is not int or type(ep_n) is not int or type(fm_n) is not int:
        raise ValueError
    return samples, energy, tp_values, ep_values, opt, vs_fp32, at


def _cell(row, params: list, methods: list, nums: list, at: int) -> tuple[CellFigures, int]:
    """The cell of ``row`` and where the next cell's numbers start."""
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
        return CellFigures(key, status, reason, data_source=data_source), at
    unit, p_index, busy, flags, verdict, parity, shape, m_index, bound = row[4:]
    if type(bound) is not list or len(bound) != 2 or bound[0] not in KINDS or type(bound[1]) is not str:
        raise Damaged(f"{what}: its verdict is not one of the kit's")
    if type(p_index) is not int or not 0 <= p_index < len(params):
        raise Damaged(f"{what}: its params are not in the table")
    if type(m_index) is not int or not -1 <= m_index < len(methods):
        raise Damaged(f"{what}: its method is not in the table")
    if parity is not None and type(parity) is not dict:
        raise Damaged(f"{what}: its parity row is not an object")
    try:
        if type(flags) is not list or type("".join(flags)) is not str:
            raise TypeError
    except TypeError:
        raise Damaged(f"{what}: its flags are not text") from None
    if verdict is not None and verdict not in _VERDICTS:
        raise Damaged(f"{what}: its speedup is not a ratio estimate of the kit's")
    _text(unit, what), _text(busy, what)
    try:
        samples, energy, tp_values, ep_values, opt, vs_fp32, at = _cell_numbers(shape, verdict, nums, at)
        finite = isfinite(fsum(tp_values) + fsum(ep_values))
    except (TypeError, ValueError, IndexError, OverflowError):
        raise Damaged(f"{what}: its numbers are not of the kit's form") from None
    if not finite:
        raise Damaged(f"{what}: its values are not finite numbers")
    impossible = _impossible(tp_values, ep_values, samples, energy, opt, vs_fp32)
    if impossible:
        raise Damaged(f"{what}: {impossible}")
    return CellFigures(
        key, status, reason, unit or "items", params[p_index], data_source, busy, samples[0], samples[1],
        samples[2], energy, flags, tp_values, ep_values, vs_fp32, parity, opt[0], opt[1],
        methods[m_index] if m_index >= 0 else None, bound[0], bound[1]), at


def decode(blob: bytes) -> RunFigures:
    """The figures :func:`encode` stored; :class:`Damaged` (with what is wrong) for anything else."""
    try:
        raw = inflate(blob)
        (size,) = struct.unpack_from("<I", raw)
        doc = safe_json.loads(raw[4:4 + size])
        packed = array("d")
        packed.frombytes(raw[4 + size:])
    except Damaged as exc:
        raise Damaged(f"not the kit's stored figures: {exc}") from None
    except (struct.error, ValueError) as exc:
        raise Damaged(f"not the kit's stored figures ({exc})") from None
    if type(doc) is not dict or doc.get("format") != FORMAT:
        raise Damaged("not the kit's stored figures (format)")
    params, methods, rows = doc.get("params"), doc.get("methods"), doc.get("cells")
    if type(params) is not list or any(type(p) is not dict for p in params) or type(rows) is not list:
        raise Damaged("not the kit's stored figures (params, cells)")
    if type(methods) is not list or any(method_of({"method": m}) is None for m in methods):
        raise Damaged("not the kit's stored figures (methods)")
    if _SWAP:
        packed.byteswap()
    nums = packed.tolist()
    cells, at = [], 0
    for row in rows:
        cell, at = _cell(row, params, methods, nums, at)
        cells.append(cell)
    if at != len(nums):
        raise Damaged("not the kit's stored figures (the numbers do not match the cells)")
    return RunFigures(_text(doc.get("run_id"), "the run id"), _text(doc.get("mode"), "the mode"), cells,
                      _text(doc.get("data"), "the data source"))
