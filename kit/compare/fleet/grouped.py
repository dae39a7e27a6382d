"""A fleet: many machines compared at once, grouped (by GPU model, driver, stack or host), with the
machines that are slower than the rest of their group named.

For each group and cell (the cells ``kit compare`` lines up, :class:`kit.compare.engine.Row`):

- the machines in it, and the median, min-max and interquartile range (``statistics.quantiles``,
  inclusive) of their medians;
- each machine's speed against **the rest of its group**: this machine's repeats against the pooled
  repeats of the group's other machines, with the same estimate that compares two machines
  (:func:`kit.compare.stats.ratio_estimate`: ratio of medians, the 95% CI of the ratio of means by
  Fieller, Welch's test; the point from :func:`kit.results.ratios.ratio_of_medians`). Speed is
  throughput where the cells record it, else the inverse of the epoch time, as against the baseline.

Which machines are slow or unstable, and where, is :mod:`kit.compare.fleet.findings`' rule (a
slowdown that holds after controlling the false-discovery rate over the machine's cells, in a stated
share of them); :func:`summarise_fleet` gives the groups' cells and those findings.
"""

from __future__ import annotations

import fnmatch
import statistics
from dataclasses import dataclass, field, replace

from kit.compare.engine import Comparison, Row
from kit.compare.fleet.findings import find, rule_sentence
from kit.compare.fleet.left_out import left_out
from kit.compare.groups import check_group_by, group_of
from kit.compare.load import Source
from kit.compare.stats import RatioEstimate, Sample, ratio_estimates, rest_samples
from kit.errors import UsageError
from kit.results.ratios import EPOCH_S, THROUGHPUT

METRICS = ("throughput", "speedup", "epoch-time", "energy")
#: the columns of a fleet's summary table: each machine's ratio to its group per precision or per suite
SUMMARY_BY = ("precision", "suite")
DEFAULT_OUTLIER_PCT = 5.0


@dataclass(frozen=True)
class View:
    """How a comparison is shown: the metric of the machines-as-rows tables, the cells (an fnmatch
    pattern on the cell id), the grouping and the outlier threshold, whether the rows layout is asked
    for (else it is chosen when machines do not fit as columns), the summary table's columns
    (``by``: per precision or per suite) and whether every per-cell table is asked for (``verbose``:
    a grouped fleet shows its summary alone unless ``cells`` or ``verbose`` asks for them)."""

    metric: str = "throughput"
    cells: str | None = None
    group_by: str | None = None
    outlier_pct: float = DEFAULT_OUTLIER_PCT
    rows: bool = False
    by: str = "precision"
    verbose: bool = False

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise UsageError(f"--metric {self.metric!r}: choose one of {', '.join(METRICS)}.")
        if self.group_by is not None:
            check_group_by(self.group_by)
        if not 0 <= self.outlier_pct < 100:
            raise UsageError("--outlier-pct must be between 0 and 100 (percent).")
        if self.by not in SUMMARY_BY:
            raise UsageError(f"--by {self.by!r}: choose one of {', '.join(SUMMARY_BY)}.")


def narrow_cells(cmp: Comparison, pattern: str | None) -> Comparison:
    """The comparison of the cells whose id matches ``pattern`` (fnmatch: ``*resnet50*``,
    ``cifar/*/amp-*``); UsageError when it matches none."""
    if not pattern:
        return cmp
    rows = [r for r in cmp.rows if fnmatch.fnmatchcase(r.cell_id, pattern)]
    if not rows:
        some = ", ".join(r.cell_id for r in cmp.rows[:3]) or "none"
        raise UsageError(f"--cells {pattern!r} matches none of the {len(cmp.rows)} cells compared (e.g. {some}).",
                         remedy="Give a shell-style pattern on the cell id, e.g. --cells 'cifar/resnet50/*'.")
    not_compared = [n for n in cmp.not_compared if fnmatch.fnmatchcase(n.cell_id, pattern)]
    return replace(cmp, rows=rows, not_compared=not_compared)


@dataclass(frozen=True)
class Member:
    """One machine in one group's cell: its median speed and its speed ÷ the rest of the group's."""

    source: Source
    median: float  # the cell's median throughput (or epoch time, when it records no throughput)
    vs_rest: RatioEstimate | None  # None: the only machine of its group here
    cv: float | None = None  # the coefficient of variation of its repeats (None: one repeat)


@dataclass
class GroupCell:
    group: str
    row: Row
    metric: str  # THROUGHPUT or EPOCH_S (what ``median``, ``low``... are of)
    members: list[Member]  # fastest first
    median: float
    low: float
    high: float
    q1: float
    q3: float

    def __repr__(self) -> str:
        return f"GroupCell({self.group}, {self.row.cell_id}, {len(self.members)} machines)"

    def to_dict(self) -> dict:
        return {
            "group": self.group, "cell_id": self.row.cell_id, "metric": self.metric, "machines": len(self.members),
            "median": self.median, "min": self.low, "max": self.high, "q1": self.q1, "q3": self.q3,
            "members": [{"label": m.source.label, "machine": m.source.env.machine, "median": m.median,
                         "vs_rest_of_group": m.vs_rest.to_dict() if m.vs_rest else None} for m in self.members],
        }


@dataclass
class FleetSummary:
    by: str
    outlier_pct: float
    groups: dict[str, list[Source]]
    cells: list[GroupCell] = field(default_factory=list)
    #: kit.compare.fleet.findings.Finding: the slow machines, then the unstable ones
    findings: list = field(default_factory=list)
    #: kit.compare.fleet.left_out.LeftOut: each group that leaves cells (or itself) out, and why
    left_out: list = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"FleetSummary(by {self.by}, {len(self.groups)} groups, {len(self.cells)} group cells, "
                f"{len(self.findings)} findings)")

    def cells_of(self, group: str) -> list[GroupCell]:
        return [c for c in self.cells if c.group == group]

    @property
    def slow(self) -> list:
        return [f for f in self.findings if f.kind == "slow"]

    def outliers(self) -> set[int]:
        """The indices (Source.index) of the machines named slow."""
        return {f.source.index for f in self.slow}

    def outlier_cells(self) -> set[tuple]:
        """(Source.index, Row.key) of each cell where a machine named slow is slow: its outliers (a
        cell it did not measure is never one)."""
        return {(f.source.index, key) for f in self.slow for key in f.cell_keys}

    def to_dict(self) -> dict:
        return {
            "group_by": self.by, "outlier_pct": self.outlier_pct,
            "method": "each machine's repeats against the pooled repeats of the other machines of its group "
                      "(ratio of medians; 95% CI of the ratio of means by Fieller; Welch's test)",
            "rule": rule_sentence(self.outlier_pct),
            "groups": {g: [s.label for s in members] for g, members in self.groups.items()},
            "cells": [c.to_dict() for c in self.cells],
            "findings": [f.to_dict() for f in self.findings],
            "left_out": [x.to_dict() for x in self.left_out],
        }


def _speed_metric(cells: list) -> str:
    """Throughput when every machine's cell records it, else epoch time (cells: CellFigures)."""
    if all(c.throughput for c in cells):
        return THROUGHPUT
    return EPOCH_S


def _vs_rest_all(pairs: list[tuple[Sample, Sample | None]], metrics: list[str]) -> list[RatioEstimate | None]:
    """Each machine's speed ÷ the rest's, for ``(mine, rest)`` pairs: the same estimate as a machine
    against the baseline (kit.compare.engine._speed_pair), with the rest's pooled repeats as the
    baseline, all at once (kit.compare.stats.ratio_estimates); speed is throughput, or 1 / time
    where ``metrics`` says EPOCH_S. The point is the ratio of the two samples' medians
    (kit.results.ratios.ratio_of_medians, in ratio_estimates); None where there is no rest."""
    todo = [i for i, (_, rest) in enumerate(pairs) if rest is not None]
    asked = [(pairs[i][0], pairs[i][1], None) if metrics[i] == THROUGHPUT else (pairs[i][1], pairs[i][0], None)
             for i in todo]
    out: list[RatioEstimate | None] = [None] * len(pairs)
    for i, est in zip(todo, ratio_estimates(asked)):
        out[i] = est
    return out


def _spread(values: list[float]) -> tuple[float, float, float, float, float]:
    """median, min, max, first and third quartile (statistics.quantiles, inclusive)."""
    if len(values) == 1:
        v = values[0]
        return v, v, v, v, v
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return statistics.median(values), min(values), max(values), q1, q3


def summarise_fleet(cmp: Comparison, by: str = "gpu", outlier_pct: float = DEFAULT_OUTLIER_PCT) -> FleetSummary:
    """Groups, their spread per cell, each machine against the rest of its group, and the findings.
    Every machine's ratio to the rest of its group, in every cell, is estimated in one call
    (kit.compare.stats.ratio_estimates), and each rest's sample is the pool less the machine's own
    (kit.compare.stats.rest_samples)."""
    check_group_by(by)
    groups: dict[str, list[Source]] = {}
    for s in cmp.sources:
        groups.setdefault(group_of(s, by), []).append(s)
    ok = [s.figures.ok_cells() for s in cmp.sources]
    summary = FleetSummary(by, outlier_pct, groups)
    todo = []  # (group, row, metric, members kept, their samples, the rests' samples)
    pairs: list = []
    for row in cmp.rows:
        for group, members in groups.items():
            # a machine's cell left out of the row (measured by another method: kit.compare.engine) is
            # left out of its group's findings too
            cells = [(s, ok[s.index].get(row.key)) for s in members
                     if row.machines[s.index] is not None and row.machines[s.index].status == "ok"]
            cells = [(s, c) for s, c in cells if c is not None]
            if not cells:
                continue
            metric = _speed_metric([c for _, c in cells])
            thr = metric == THROUGHPUT
            keep = [(s, c, c.throughput_values if thr else c.epoch_values) for s, c in cells]
            keep = [k for k in keep if k[2]]
            if not keep:
                continue
            # each cell's own sample of its values (kit.compare.figures: the same Sample of the same values)
            owns = [(c.throughput if thr else c.epoch_s) or Sample.of_floats(v) for _, c, v in keep]
            rests = rest_samples([v for _, _, v in keep])
            todo.append((group, row, metric, keep, owns, rests, len(pairs)))
            pairs.extend(zip(owns, rests))
    estimates = _vs_rest_all(pairs, [t[2] for t in todo for _ in t[3]])
    for group, row, metric, keep, owns, rests, at in todo:
        vs = estimates[at:at + len(keep)]
        out = [Member(s, own.median, est, own.cv if own.n > 1 else None) for (s, _, _), own, est in zip(keep, owns, vs)]
        faster_first = metric == THROUGHPUT
        out.sort(key=lambda m: (-m.median if faster_first else m.median, m.source.index))
        med, lo, hi, q1, q3 = _spread([m.median for m in out])
        summary.cells.append(GroupCell(group, row, metric, out, med, lo, hi, q1, q3))
    summary.findings = find(summary, outlier_pct)
    summary.left_out = left_out(cmp, summary)
    return summary
