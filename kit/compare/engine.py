"""Build a comparison: rows per cell, per-machine numbers, ratios, warnings.

A *row* is one workload x model x precision x engine that at least two inputs
measured successfully. For each machine (input) it holds:

- median epoch time and median throughput over repeats;
- ``vs_fp32``: the speedup over fp32 on the same machine (the 2019 article's
  "performance ratio", :mod:`kit.results.ratios`: median throughput ÷ fp32's
  median throughput; > 1 = faster than fp32);
- ``vs_baseline``: this machine's median throughput / the baseline machine's
  (> 1 = faster than the baseline);
- energy per epoch where recorded, and flags (high CV, throttled, synthetic).

Ratios come with the 95% CI of the ratio of means and a verdict from
:mod:`kit.compare.stats`.

Cells missing, skipped, failed or measured by another method (:mod:`kit.results.method`) on some
inputs are listed in
``not_compared`` (and counted by reason); differences that make numbers hard to compare (stack,
library versions, data source, batch size, throttling) are listed in
``warnings``, most severe first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.bundle.inert import inert
from kit.compare import measures
from kit.compare.comparability import CompareWarning, warnings_for
from kit.compare.figures import CellFigures
from kit.compare.groups import check_group_by, group_of
from kit.compare.load import Refused, Source, load_sources_keep_going
from kit.compare.stats import METHOD, RatioEstimate, Sample, ratio_estimates
from kit.compare.once import count_once
from kit.errors import UsageError
from kit.results import ratios
from kit.results.cell_ids import cell_label
from kit.results.derive import quality_gap
from kit.results.method import describe, identity, method_change

Key = tuple[str, ...]  # workload, model, precision, engine (+ "bs512" for a batch curve's point: cell_key)

#: a machine's cell measured by another method than the baseline's (kit.results.method): its status
#: where it is left out of the ratios, its flag where --allow-method-change keeps it
OTHER_METHOD = "measured otherwise"
METHOD_FLAG = "method differs"

@dataclass
class MachineCell:
    status: str  # ok / skipped / failed / missing / interrupted
    reason: str | None = None
    epoch_s: Sample | None = None
    throughput: Sample | None = None
    energy_j_per_epoch: float | None = None
    vs_fp32: RatioEstimate | None = None
    vs_baseline: RatioEstimate | None = None
    flags: list[str] = field(default_factory=list)
    params: dict = field(default_factory=dict)
    data_source: str = "unknown"  # real / synthetic, from the cell or the run
    #: how the cell was measured (kit.results.method; None: method unknown)
    method: dict | None = None
    #: convergence runs only: the final metric over repeats (measures.parity_metric names it), this
    #: machine's parity row for the cell (kit.results.derive.parity; None for the base precision),
    #: and the gap to the baseline machine's same cell (derive.quality_gap: > 0 = worse)
    final_metric: Sample | None = None
    parity: dict | None = None
    quality_vs_baseline: float | None = None
    #: what bound the cell (kit explain's verdict, kit.results.explain.bound): its kind and short form
    explain_kind: str | None = None
    explain_verdict: str | None = None
    #: why the host was busy while the cell ran (kit.env.hostload.busy_reason), else None
    busy: str | None = None
    #: compared within its group (``--group-by``) but measured by another method than the baseline's
    #: cell: no ratio to the baseline (it would compare methods, not machines)
    baseline_method_differs: bool = False

    def to_dict(self) -> dict:
        def s(x: Sample | None) -> dict | None:
            return None if x is None else {"n": x.n, "median": x.median, "mean": x.mean, "stdev": x.sd, "cv": x.cv, "min": x.min, "max": x.max}

        return {
            "status": self.status,
            "reason": self.reason,
            "epoch_seconds": s(self.epoch_s),
            "throughput_items_per_s": s(self.throughput),
            # each CV under its own name (also inside the two summaries above, as "cv")
            "epoch_time_cv": self.epoch_s.cv if self.epoch_s and self.epoch_s.n > 1 else None,
            "throughput_cv": self.throughput.cv if self.throughput and self.throughput.n > 1 else None,
            "energy_j_per_epoch": self.energy_j_per_epoch,
            "speedup_vs_fp32": self.vs_fp32.to_dict() if self.vs_fp32 else None,
            "throughput_vs_baseline": self.vs_baseline.to_dict() if self.vs_baseline else None,
            "flags": list(self.flags),
            "data_source": self.data_source,
            "final_metric": s(self.final_metric),
            "parity": dict(self.parity) if self.parity else None,
            "final_metric_gap_vs_baseline": self.quality_vs_baseline,
            "method": self.method,
            "explain_verdict": self.explain_verdict,
            "explain_verdict_kind": self.explain_kind,
            "method_differs_from_baseline": self.baseline_method_differs,
            "host_busy": self.busy,
        }


@dataclass
class Row:
    key: Key
    unit: str
    machines: list[MachineCell | None]  # aligned with Comparison.sources
    #: where the machines' cells were measured by different methods and --allow-method-change kept
    #: them: what differs (kit.results.method.method_change); their ratios are marked
    method_change: str | None = None

    def __repr__(self) -> str:
        return f"Row({self.cell_id}, {len(self.machines)} machines)"

    workload = property(lambda self: self.key[0])
    model = property(lambda self: self.key[1])
    precision = property(lambda self: self.key[2])
    engine = property(lambda self: self.key[3])

    @property
    def cell_id(self) -> str:
        return inert("/".join(self.key))  # the parts are a bundle's text

    @property
    def label(self) -> str:
        """The cell id as the tables show it: with the fastai cells' learner (several when the
        machines' cells differ), ``cifar/resnet18/fp32/fastai (create_cnn)``."""
        return inert(cell_label(self.cell_id, [mc.params.get("learner") for mc in self.machines if mc and mc.params]))


@dataclass(frozen=True)
class NotCompared:
    """A cell that fewer than all inputs measured successfully, and why."""

    cell_id: str
    reason: str  # "missing in B", "skipped in A (...); missing in B"

    @property
    def line(self) -> str:
        return f"cannot compare {self.cell_id}: {self.reason}"


@dataclass
class Comparison:
    sources: list[Source]
    rows: list[Row]
    not_compared: list[NotCompared]
    warnings: list[CompareWarning]
    method: str = METHOD
    #: inputs that could not be read, each with its reason (the rest were compared)
    refused: list[Refused] = field(default_factory=list)
    #: (cell id, what differs) for every cell whose machines' methods differ, kept or left out
    method_changes: list[tuple[str, str]] = field(default_factory=list)
    #: one line per input left out because another stands for the same run (kit.compare.once)
    counted_once: list[str] = field(default_factory=list)
    #: the grouping methods were judged within (``--group-by``: kit.compare.groups), None: against the baseline
    group_by: str | None = None
    #: (cell id, each group's method) for every cell whose groups measured it by different methods
    #: (each group compared within itself; no ratio to the baseline across them)
    group_methods: list[tuple[str, str]] = field(default_factory=list)

    def __repr__(self) -> str:
        """Short: a fleet's comparison is a million objects (pytest prints a failing operand with repr)."""
        return (f"Comparison({len(self.sources)} sources, {len(self.rows)} rows, {len(self.not_compared)} not "
                f"compared, {len(self.warnings)} warnings)")

    @property
    def baseline_source(self) -> Source:
        return self.sources[0]

    @property
    def not_comparable(self) -> list[str]:
        """One line per cell not compared (what ``--verbose`` prints)."""
        return [n.line for n in self.not_compared]

    def not_compared_by_reason(self) -> list[tuple[str, int]]:
        """(reason, number of cells), most cells first: the summary the views print."""
        counts: dict[str, int] = {}
        for n in self.not_compared:
            counts[n.reason] = counts.get(n.reason, 0) + 1
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def to_dict(self, rows: Any = None) -> dict:
        """Everything, as JSON values; ``rows``: put this under "rows" instead of the rows' dicts
        (kit.compare.render.to_json passes them already written, kit.compare.json_text.Written)."""
        return {
            "method": self.method,
            "baseline": self.baseline_source.label,
            "sources": [s.describe() for s in self.sources],
            **({"refused": [{"path": inert(str(r.path)), "reason": inert(r.error.message), "exit_code": r.exit_code}
                            for r in self.refused]} if self.refused else {}),
            "counted_once": list(self.counted_once),
            "warnings": [w.to_dict() for w in self.warnings],
            "not_comparable": list(self.not_comparable),
            "not_compared_by_reason": [{"reason": r, "cells": n} for r, n in self.not_compared_by_reason()],
            "rows": [self.row_dict(r) for r in self.rows] if rows is None else rows,
        }

    def row_dict(self, r: Row) -> dict:
        """One row as ``to_dict`` lists it."""
        return {
            "cell_id": r.cell_id,
            "workload": r.workload,
            "model": r.model,
            "precision": r.precision,
            "engine": r.engine,
            "throughput_unit": r.unit,
            "method_change": r.method_change,
            "machines": {s.label: (mc.to_dict() if mc else None) for s, mc in zip(self.sources, r.machines)},
        }


def _speed_pair(cell: CellFigures, base: CellFigures) -> tuple | None:
    """What this machine's speed / the baseline's is estimated from (kit.compare.stats.ratio_estimates:
    numerator, denominator, the ratio of medians): throughput when both have it, else the inverse
    ratio of epoch times."""
    a, b = cell.throughput, base.throughput
    if a and b:  # the ratio of medians (kit.results.ratios), each cell's median taken once
        return a, b, ratios.ratio_of(cell.throughput_median, base.throughput_median)
    ta, tb = cell.epoch_s, base.epoch_s
    if ta and tb:
        return tb, ta, ratios.ratio_of(base.epoch_median, cell.epoch_median)
    return None


def converged(src: Source) -> bool:
    """A convergence run: its cells' final metric is the quality parity compares (a throughput
    run's is only the last training loss, or none)."""
    return src.figures.converged


def _machine_cell(cell: CellFigures, src: Source, base_cell: CellFigures | None, is_base: bool,
                  base_converged: bool) -> MachineCell:
    """The machine's cell; its ``vs_baseline`` is set by :func:`build_comparison`, every row's at once."""
    mc = MachineCell(
        status="ok",
        epoch_s=cell.epoch_s,
        throughput=cell.throughput,
        energy_j_per_epoch=cell.energy_j_per_epoch,
        vs_fp32=cell.vs_fp32,
        params=cell.params,  # the run's figures' own (no view changes them)
        flags=list(cell.flags),
        data_source=str(cell.data_source or src.env.data_source),
        method=cell.method,
        explain_kind=cell.explain_kind,
        explain_verdict=cell.explain_verdict,
        busy=cell.busy,
    )
    if cell.busy:  # marked beside the cell's figures in the tables, as the HIGH warning says
        mc.flags.append(measures.busy_note(cell.busy))
    if src.figures.converged:
        mc.final_metric = cell.final_metric
        mc.parity = cell.parity
        ref = base_cell.final_metric if base_cell is not None and base_converged else None
        if mc.final_metric and ref and not is_base:
            mc.quality_vs_baseline = quality_gap(cell.key[0], mc.final_metric.median, ref.median)
    return mc


class _Identities(dict):
    """kit.results.method.identity of each method record, computed once per record: the cells of a run
    from the index share their records, and a fleet's comparison asks for 31,200 of them."""

    def of(self, method: dict | None):
        if method is None:
            return None
        key = id(method)
        if key not in self:
            self[key] = (method, identity(method))  # the record kept alive: its id stays its own
        return self[key][1]


@dataclass
class _Methods:
    """How the measured cells of one key were measured, against what each is judged by."""

    change: str | None  # method_change's words where cells judged together differ, else None
    other: list[bool]  # measured otherwise than its reference: left out (kept, marked, when allowed)
    off_base: list[bool]  # measured otherwise than the baseline's cell: no ratio to the baseline
    across: str | None = None  # each group's method, where the groups' methods differ


def _reference(members: list[int], idents: list) -> object:
    """The method a group judges its cells by: the one most of its measured cells share (ties: the
    earliest input's, so the baseline's where it is among them)."""
    counts: dict = {}
    for i in members:
        counts.setdefault(idents[i], [0, i])[0] += 1
    return max(counts.items(), key=lambda kv: (kv[1][0], -kv[1][1]))[0]


def _other_methods(sources: list[Source], present: list, ok: list[bool], ids: _Identities,
                   groups: list[str] | None = None) -> _Methods:
    """Whether the cells of one key were measured the same way (kit.results.method: the identity, and
    method_change's words where they differ). Without ``groups``, every cell is judged against the
    baseline's (else the first measured) cell. With ``groups`` (each source's group), each group's
    cells are judged within the group, against the method most of them share: a group of today's runs
    beside a group of runs that recorded no method keeps its own cells."""
    idents = [ids.of(cell.method) if k else None for cell, k in zip(present, ok)]
    measured = [i for i, k in enumerate(ok) if k]
    none = [False] * len(present)
    if len(measured) < 2 or all(idents[i] == idents[measured[0]] for i in measured):
        return _Methods(None, none, none)
    off_base = [k and ok[0] and ident != idents[0] for ident, k in zip(idents, ok)]
    if groups is None:
        change = method_change([(sources[i].label, present[i].method) for i in measured])
        ref = idents[measured[0]]
        return _Methods(change, [k and ident != ref for ident, k in zip(idents, ok)], off_base)
    by_group: dict[str, list[int]] = {}
    for i in measured:
        by_group.setdefault(groups[i], []).append(i)
    refs = {g: _reference(members, idents) for g, members in by_group.items()}
    other = [k and idents[i] != refs[groups[i]] for i, k in enumerate(ok)]
    changes = []
    for g, members in by_group.items():
        text = method_change([(sources[i].label, present[i].method) for i in members])
        if text is not None:
            changes.append(text if len(by_group) == 1 else f"{g}: {text}")
    across = None
    if len(set(refs.values())) > 1:
        first = {g: next(i for i in members if idents[i] == refs[g]) for g, members in by_group.items()}
        across = "; ".join(f"{g}: {describe(present[i].method)}" for g, i in first.items())
    return _Methods("; ".join(changes) or None, other, off_base, across)


def build_comparison(sources: list[Source], allow_method_change: bool = False,
                     group_by: str | None = None) -> Comparison:
    """The comparison of ``sources`` (the first is the baseline). Cells whose machines measured them by
    different methods (kit.results.method) are left out of the ratios, each machine that differs
    from the baseline's method "measured otherwise", unless ``allow_method_change`` keeps them,
    marked. With ``group_by`` (kit.compare.groups) methods are judged within each group: a machine
    is "measured otherwise" where it differs from the method most of its group measured the cell
    with, and a machine kept in its group but measured otherwise than the baseline gets no ratio to
    the baseline (``baseline_method_differs``). Each run is counted once (kit.compare.once): a copy
    of an input, or an interrupted run that its completed resume supersedes, is left out, with a
    line saying so."""
    sources, once = count_once(sources)
    groups = [group_of(s, check_group_by(group_by)) for s in sources] if group_by else None
    if len(sources) < 2:
        raise UsageError(" ".join(once) + " Fewer than two different runs remain: nothing to compare.")
    per_source = [s.figures.by_key() for s in sources]
    all_keys = sorted({k for cells in per_source for k in cells}, key=measures.order_key)
    base_converged = sources[0].figures.converged
    rows: list[Row] = []
    not_compared: list[NotCompared] = []
    method_changes: list[tuple[str, str]] = []
    group_methods: list[tuple[str, str]] = []
    ids = _Identities()
    speed: list = []  # (machine cell, what its ratio to the baseline is estimated from)
    for key in all_keys:
        cid = "/".join(key)
        present = [cells.get(key) for cells in per_source]
        ok = [c is not None and c.status == "ok" for c in present]
        judged = _other_methods(sources, present, ok, ids, groups)
        change, other = judged.change, judged.other
        if judged.across is not None:
            group_methods.append((inert(cid), inert(judged.across)))
        if change is not None:
            method_changes.append((inert(cid), inert(change)))
        if any(other) and not allow_method_change:
            ok = [k and not o for k, o in zip(ok, other)]
        if not all(ok):
            problems = []
            for src, cell, o in zip(sources, present, other):
                if cell is None:
                    problems.append(f"missing in {src.label}")
                elif cell.status != "ok":
                    problems.append(f"{cell.status} in {src.label}" + (f" ({cell.reason})" if cell.reason else ""))
                elif o and not allow_method_change:
                    problems.append(f"{OTHER_METHOD} in {src.label}")
            not_compared.append(NotCompared(inert(cid), inert(_summarise_problems(problems))))
        if sum(ok) < 2:
            continue
        base_cell = present[0] if ok[0] else None
        machines: list[MachineCell | None] = []
        for i, (src, cell) in enumerate(zip(sources, present)):
            if cell is None:
                machines.append(MachineCell(status="missing", reason="not measured"))
            elif cell.status != "ok":
                machines.append(MachineCell(status=inert(cell.status), reason=None if cell.reason is None else inert(cell.reason)))
            elif not ok[i]:  # measured, by another method than the baseline's: no ratio
                machines.append(MachineCell(status=OTHER_METHOD, reason=inert(describe(cell.method, ())),
                                            method=cell.method))
            else:
                mc = _machine_cell(cell, src, base_cell, i == 0, base_converged)
                if other[i] or (judged.off_base[i] and base_cell is not None and allow_method_change):  # marked
                    mc.flags.append(METHOD_FLAG)
                mc.baseline_method_differs = bool(judged.off_base[i] and base_cell is not None and not allow_method_change)
                to_base = base_cell is not None and i and not mc.baseline_method_differs
                pair = _speed_pair(cell, base_cell) if to_base else None
                if pair is not None:
                    speed.append((mc, pair))
                machines.append(mc)
        unit = next(c.unit for c in present if c is not None and c.status == "ok")
        rows.append(Row(key, unit, machines, inert(change) if change and allow_method_change else None))
    for (mc, _), est in zip(speed, ratio_estimates([pair for _, pair in speed])):
        mc.vs_baseline = est
    warnings = warnings_for(sources, rows, method_changes, allow_method_change, group_by, group_methods)
    return Comparison(sources, rows, not_compared, warnings, method_changes=method_changes, counted_once=once,
                      group_by=group_by, group_methods=group_methods)


def _summarise_problems(problems: list[str]) -> str:
    """``missing in B; missing in C``: all of them for a few inputs; for a fleet the first few and
    how many more (one line, however many machines lack the cell)."""
    if len(problems) <= 6:
        return "; ".join(problems)
    return "; ".join(problems[:3]) + f"; and {len(problems) - 3} more inputs"


def compare_paths(paths: list[str | Path], baseline: str | None = None,
                  allow_method_change: bool = False, group_by: str | None = None) -> Comparison:
    """Load every input and compare them (the first, or ``baseline``, is the baseline). An input
    that cannot be read is refused with its reason (``Comparison.refused``) and the rest are
    compared, as long as the baseline and one more remain (else the refused input's error)."""
    sources, refused = load_sources_keep_going(paths, baseline)
    cmp = build_comparison(sources, allow_method_change, group_by)
    cmp.refused = refused
    return cmp
