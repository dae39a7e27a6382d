"""Which machines of a fleet are slow or unstable, and where: findings that hold up under many cells.

Each machine's cells come from :mod:`kit.compare.fleet.grouped` (its repeats against the pooled repeats of
the other machines of its group, by :func:`kit.compare.stats.ratio_estimates`). Testing each of 131
cells at p < 0.05 names about 5% of the cells of a healthy machine by chance, so a machine is
**slow** only when its slowdown is consistent:

- a cell is slow when the machine is slower than the rest by more than ``outlier_pct`` (the ratio of
  medians) and Welch's p-value stays under the false-discovery rate of 5% over the machine's cells
  (Benjamini-Hochberg's adjusted p-values, :func:`bh_adjusted`: the procedure of
  ``scipy.stats.false_discovery_control``, which tests/test_compare_fleet_doctor.py holds it to,
  written out because importing scipy.stats costs 0.4 s of a fleet view's 2 s and the cuda10
  image's scipy 1.5 lacks it);
- the machine is named when such cells are at least half of its cells, or of the cells of one
  precision, model, suite, engine or pacing (host-paced or GPU-paced, :mod:`kit.results.method`)
  that has three cells or more;
- or, however few they are, when some of its cells are far below the rest (more than
  :data:`FEW_CELLS_FLOOR_PCT`, or ``outlier_pct`` where that is larger) and significantly so after the
  same false-discovery control: a GPU that fails in some kernels is slow in a handful of cells, never
  in half of a facet. The finding lists those cells ("slow in 3 cells: ...").

A machine whose repeats spread far more than its group's (its coefficient of variation over 3x the
group's median and at least 2%, in the same share of cells) is **unstable**: a finding of its own,
never "slow" (its medians may be where the group's are).

Each finding names its pattern: of the facets above, the values that hold the flagged cells with the
fewest others ("amp-fp16 only: 36 of 36 amp-fp16 cells; every other precision within 1%"), and the
facts of its environment that differ from its group's as candidate causes (:mod:`kit.compare.fleet.causes`).
Where every slow cell of a finding has the same measured verdict (:func:`kit.results.explain.bound`'s kind:
host-bound, loader-bound, compute-bound...), the finding says so ("host-bound cells only"): the machine's
slowness sits where its host, not its GPU, paced the step.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable

from kit.compare.fleet.causes import NO_CAUSE, Cause, GroupFacts
from kit.compare.figures import HOST_PACED
from kit.results.explain import NOT_MEASURED
from kit.results.ratios import fmt_ratio

FDR = 0.05
#: the share of a set of cells the slow (or unstable) cells must reach
SHARE = 0.5
#: the fewest cells of one precision, model, suite, engine or pacing that can carry a finding alone
MIN_CELLS = 3
UNSTABLE_FACTOR = 3.0
UNSTABLE_MIN_CV = 0.02
#: a cell more than this far below the rest of its group (percent, the ratio of medians), significant
#: after the false-discovery control, names its machine alone: the effect-size floor of the few-cells
#: rule. 15% is three times the default outlier threshold: in a fleet whose machines differ by a few
#: percent and whose repeats spread 1-2%, no healthy cell comes near it, while a failing kernel (a
#: GPU at 0.6x in its convolutions) is far past it.
FEW_CELLS_FLOOR_PCT = 15.0
#: the cells a few-cells finding names (the rest are counted; --json lists every one)
FEW_CELLS_SHOWN = 5
#: the facet of a few-cells finding's pattern: the cells themselves
CELLS_FACET = "cells"


def few_cells_floor(outlier_pct: float) -> float:
    """The few-cells rule's floor (percent): :data:`FEW_CELLS_FLOOR_PCT`, or ``outlier_pct`` where
    the user asked for a larger threshold (a 30% threshold never names a cell 20% below)."""
    return max(FEW_CELLS_FLOOR_PCT, outlier_pct)


def rule_sentence(outlier_pct: float) -> str:
    """The rule, in one sentence, as the views print it."""
    return (f"a machine is slow when it is more than {outlier_pct:g}% slower than the pooled repeats of the "
            f"rest of its group (ratio of medians) and significantly so after controlling the false-discovery "
            f"rate over its cells at {FDR:.0%} (Benjamini-Hochberg on Welch's p-values), in at least half of its "
            f"cells or of the cells of one precision, model, suite, engine or pacing ({MIN_CELLS} cells or more), "
            f"or in any number of cells more than {few_cells_floor(outlier_pct):g}% slower and significantly so "
            f"(each such cell named); unstable when its repeats' CV is over {UNSTABLE_FACTOR:g}x its group's median "
            f"CV and at least {UNSTABLE_MIN_CV:.0%} in such a share of cells")


def group_phrase(by: str, group: str, n: int) -> str:
    """``23 NVIDIA H200 machines``, ``3 machines with driver 575.57``, ``2 runs of node017``."""
    many = n != 1
    if by == "gpu":
        return f"{n} {group} machine{'s' if many else ''}"
    if by == "host":
        return f"{n} run{'s' if many else ''} of {group}"
    return f"{n} machine{'s' if many else ''} with {by} {group}"


def bh_reject(pvalues: list[float], rate: float = FDR) -> list[bool]:
    """Which of ``pvalues`` Benjamini-Hochberg rejects at false-discovery rate ``rate``."""
    return [q <= rate for q in bh_adjusted(pvalues)]


def bh_adjusted(ps: list[float]) -> list[float]:
    """Benjamini-Hochberg's adjusted p-values (``scipy.stats.false_discovery_control(ps)``): the
    i-th smallest p x m / i, made monotone from the largest down, at most 1."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    out = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, ps[i] * m / rank)
        out[i] = min(running, 1.0)
    return out


@dataclass(frozen=True)
class CellMark:
    """One machine's cell as the rule reads it."""

    row: object  # kit.compare.engine.Row
    ratio: float  # this machine's speed ÷ the rest of its group's (ratio of medians)
    p_value: float  # Welch's (1 where there is none: one repeat)
    paced_by_host: bool
    cv: float | None  # the machine's repeats' coefficient of variation here
    group_cv: float | None  # the median of its group's machines' CVs here
    bound: str | None = None  # what bound the machine's cell: kit.results.explain.bound's kind


#: (facet, its value for a cell): the ways a pattern is looked for, in the order ties are broken
FACETS: tuple[tuple[str, Callable[[CellMark], str]], ...] = (
    ("precision", lambda c: c.row.precision),
    ("pacing", lambda c: "host-paced" if c.paced_by_host else "GPU-paced"),
    ("engine", lambda c: f"{c.row.workload}/{c.row.engine}"),
    ("model", lambda c: c.row.model),
    ("suite", lambda c: c.row.workload),
)


@dataclass(frozen=True)
class Pattern:
    """Where the flagged cells sit: ``values`` of ``facet`` (every cell where ``everywhere``)."""

    facet: str
    values: tuple
    flagged: int  # flagged cells among those values' cells
    cells: int  # those values' cells
    elsewhere: int  # flagged cells outside them
    others: tuple  # the facet's other values
    others_within_pct: float | None  # the largest gap to 1 of the other values' geometric-mean ratios
    everywhere: bool
    #: a few-cells pattern (facet :data:`CELLS_FACET`, ``values`` the cell ids): each cell's ratio
    ratios: tuple = ()

    def text(self, with_rest: bool = True) -> str:
        if self.facet == CELLS_FACET:
            shown = ", ".join(f"{cid} {fmt_ratio(r)}" for cid, r in zip(self.values[:FEW_CELLS_SHOWN], self.ratios))
            more = len(self.values) - FEW_CELLS_SHOWN
            return shown + (f" and {more} more (--json lists them)" if more > 0 else "")
        if self.everywhere:
            return f"everywhere, {self.flagged} of {self.cells} cell{'s' if self.cells != 1 else ''}"
        vals = " and ".join(self.values)
        noun = ("cell" if self.cells == 1 else "cells") if self.facet == "pacing" else f"{vals} cell{'s' if self.cells != 1 else ''}"
        out = f"{vals} only, {self.flagged} of {self.cells} {noun}"
        if with_rest and self.others_within_pct is not None:
            rest = f"{self.others[0]} cells" if len(self.others) == 1 else f"every other {self.facet}"
            out += f"; {rest} within {math.ceil(self.others_within_pct - 1e-9):.0f}%"
        if self.elsewhere:
            out += f" (and {self.elsewhere} cell{'s' if self.elsewhere != 1 else ''} elsewhere)"
        return out

    def to_dict(self) -> dict:
        return {"facet": "all cells" if self.everywhere else self.facet, "values": list(self.values),
                "flagged_cells": self.flagged, "cells": self.cells, "flagged_elsewhere": self.elsewhere,
                "others_within_pct": self.others_within_pct, "text": self.text(),
                **({"ratios": list(self.ratios)} if self.facet == CELLS_FACET else {})}


def few_cells_pattern(marks: list[CellMark], far: list[bool]) -> Pattern | None:
    """The pattern of the few-cells rule: the cells marked ``far`` (far below the rest and significant),
    lowest ratio first; None where there is none."""
    cells = sorted((c.ratio, c.row.cell_id) for c, f in zip(marks, far) if f)
    if not cells:
        return None
    return Pattern(CELLS_FACET, tuple(cid for _, cid in cells), len(cells), len(cells), 0, (), None, False,
                   tuple(r for r, _ in cells))


def _geomean(xs: list[float]) -> float:
    return math.exp(math.fsum(math.log(x) for x in xs) / len(xs))


def find_pattern(marks: list[CellMark], flagged: list[bool]) -> Pattern | None:
    """The pattern of the flagged cells, or None where the rule does not name the machine: the
    values of one facet whose cells are at least :data:`SHARE` flagged (and :data:`MIN_CELLS` or
    more), the facet that leaves the fewest flagged cells outside, then holds the most, then the
    fewest cells; every cell where that is all of them."""
    total, hits = len(marks), sum(flagged)
    if not hits:
        return None
    best = None
    for order, (facet, value_of) in enumerate(FACETS):
        by_value: dict[str, list[int]] = {}
        for i, c in enumerate(marks):
            by_value.setdefault(value_of(c), []).append(i)
        chosen = sorted(v for v, idx in by_value.items()
                        if len(idx) >= MIN_CELLS and sum(flagged[i] for i in idx) >= SHARE * len(idx))
        if not chosen:
            continue
        inside = [i for v in chosen for i in by_value[v]]
        covered = sum(flagged[i] for i in inside)
        key = (hits - covered, -covered, len(inside), order)
        if best is None or key < best[0]:
            best = (key, facet, chosen, inside, covered, by_value)
    if best is None:
        if hits < SHARE * total:
            return None
        return Pattern("all cells", (), hits, total, 0, (), None, True)
    _, facet, chosen, inside, covered, by_value = best
    if len(inside) == total:
        return Pattern("all cells", (), hits, total, 0, (), None, True)
    others = tuple(sorted(v for v in by_value if v not in chosen))
    gaps = [abs(1.0 - _geomean([marks[i].ratio for i in by_value[v]])) * 100.0 for v in others]
    return Pattern(facet, tuple(chosen), covered, len(inside), hits - covered, others,
                   max(gaps) if gaps else None, False)


@dataclass(frozen=True)
class Finding:
    """A machine named slow (``kind`` "slow": by ``figure`` percent, the median over its slow cells
    in the pattern) or unstable (``kind`` "unstable": ``figure`` its median CV in percent against
    ``group_figure``, its group's), with the pattern and the candidate causes."""

    kind: str
    source: object  # kit.compare.load.Source
    name: str
    by: str
    group: str
    others: int
    cells: int
    figure: float
    pattern: Pattern
    causes: tuple = ()
    group_figure: float | None = None
    cell_keys: frozenset = field(default_factory=frozenset)  # the keys of the flagged cells
    #: the verdict every flagged cell shares (:func:`shared_verdict`), or None
    shared: SharedVerdict | None = None

    def __repr__(self) -> str:
        return f"Finding({self.kind}: {self.line})"

    @property
    def line(self) -> str:
        verdict = f"; {self.shared.text}" if self.shared else ""
        if self.kind == "slow" and self.pattern.facet == CELLS_FACET:
            n = self.pattern.flagged
            return (f"{self.name}: slow in {n} cell{'s' if n != 1 else ''}, {self.figure:.0f}% below the other "
                    f"{group_phrase(self.by, self.group, self.others)} there: {self.pattern.text()}{verdict}")
        if self.kind == "slow":
            return (f"{self.name}: {self.figure:.0f}% below the other {group_phrase(self.by, self.group, self.others)}: "
                    f"{self.pattern.text()}{verdict}")
        return (f"{self.name}: unstable: its repeats spread {self.figure:.1f}% (median CV) against the group's "
                f"{self.group_figure:.1f}%, {self.pattern.text(with_rest=False)}")

    @property
    def lines(self) -> list[str]:
        """The finding, then one line per candidate cause (or a line saying there is none)."""
        causes = [c.line for c in self.causes] or [NO_CAUSE]
        return [self.line] + [f"  {c}" for c in causes]

    @property
    def short(self) -> str:
        """For the summary table: ``slow: amp-fp16 only``, ``slow: everywhere``, ``unstable``."""
        if self.kind == "unstable":
            return "unstable"
        n = self.pattern.flagged
        where = (f"{n} cell{'s' if n != 1 else ''}" if self.pattern.facet == CELLS_FACET else
                 "everywhere" if self.pattern.everywhere else " and ".join(self.pattern.values) + " only")
        return "slow: " + where + (f", {self.shared.short}" if self.shared else "")

    def to_dict(self) -> dict:
        src = self.source
        return {"kind": self.kind, "label": src.label, "machine": src.env.machine, "group": self.group,
                "others_in_group": self.others, "cells": self.cells,
                **({"pct_below": self.figure} if self.kind == "slow" else
                   {"cv_pct": self.figure, "group_cv_pct": self.group_figure}),
                "flagged_cells": self.pattern.flagged + self.pattern.elsewhere, "pattern": self.pattern.to_dict(),
                "candidate_causes": [c.to_dict() for c in self.causes],
                "shared_verdict": None if self.shared is None else self.shared.to_dict(), "line": self.line}


@dataclass(frozen=True)
class SharedVerdict:
    """The verdict (kit.results.explain.bound's kind) every slow cell of a finding shares: ``flagged``
    slow cells, of the machine's ``of_kind`` cells of that kind, of its ``cells`` cells. Where every cell of
    the machine has that verdict, "host-bound cells only" would contrast them with cells it does not have:
    the finding says every cell is of that kind instead."""

    kind: str
    flagged: int
    of_kind: int
    cells: int

    @property
    def every_cell(self) -> bool:
        return self.of_kind == self.cells

    @property
    def short(self) -> str:
        return f"every cell {self.kind}" if self.every_cell else f"{self.kind} cells only"

    @property
    def text(self) -> str:
        if self.every_cell:
            return (f"every cell {self.kind} (kit explain's verdict), the {self.flagged} slow "
                    f"one{'s' if self.flagged != 1 else ''} among the machine's {self.cells}")
        return (f"{self.kind} cells only: every slow cell {self.kind} (kit explain's verdict), {self.flagged} of the "
                f"machine's {self.of_kind} {self.kind} cell{'s' if self.of_kind != 1 else ''}")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "flagged_cells": self.flagged, "cells_of_kind": self.of_kind,
                "cells": self.cells, "text": self.text}


def shared_verdict(marks: list[CellMark], flagged: list[bool]) -> SharedVerdict | None:
    """The verdict every flagged cell shares, where it is a measured one (not "not measured"), else None."""
    kinds = {c.bound for c, f in zip(marks, flagged) if f}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind is None or kind == NOT_MEASURED:
        return None
    return SharedVerdict(kind, sum(flagged), sum(c.bound == kind for c in marks), len(marks))


def machine_marks(cells: list) -> dict[int, list[CellMark]]:
    """Each machine's :class:`CellMark` per cell (``cells``: kit.compare.fleet.GroupCell)."""
    out: dict[int, list[CellMark]] = {}
    for gc in cells:
        cvs = [m.cv for m in gc.members if m.cv is not None]
        group_cv = statistics.median(cvs) if cvs else None
        for m in gc.members:
            if m.vs_rest is None or not m.vs_rest.ratio > 0:
                continue
            mc = gc.row.machines[m.source.index]
            p = m.vs_rest.p_value
            out.setdefault(m.source.index, []).append(CellMark(
                gc.row, m.vs_rest.ratio, 1.0 if p is None or math.isnan(p) else p,
                bool(mc and HOST_PACED in mc.flags), m.cv, group_cv, mc.explain_kind if mc else None))
    return out


def find(summary, outlier_pct: float) -> list[Finding]:
    """The findings of a kit.compare.fleet.FleetSummary: the slow machines, then the unstable ones."""
    marks = machine_marks(summary.cells)
    sources = {s.index: s for members in summary.groups.values() for s in members}
    group_of = {s.index: g for g, members in summary.groups.items() for s in members}
    names: dict[str, int] = {}
    for i in marks:
        names[sources[i].env.machine] = names.get(sources[i].env.machine, 0) + 1
    facts: dict[str, GroupFacts] = {}  # read for a group only once one of its machines is named

    def causes_of(src, group: str) -> tuple[Cause, ...]:
        if group not in facts:
            facts[group] = GroupFacts(summary.groups[group])
        return tuple(facts[group].causes(src))

    others = {}
    for gc in summary.cells:
        others[gc.group] = max(others.get(gc.group, 0), len(gc.members) - 1)
    limit = 1.0 - outlier_pct / 100.0
    far = 1.0 - few_cells_floor(outlier_pct) / 100.0
    slow, unstable = [], []
    for i, ms in marks.items():
        src, group = sources[i], group_of[i]
        name = src.env.machine if names[src.env.machine] == 1 else f"{src.env.machine} ({src.label})"
        causes: tuple[Cause, ...] | None = None
        rejected = bh_reject([c.p_value for c in ms])
        flagged = [r and c.ratio < limit for r, c in zip(rejected, ms)]
        pattern = find_pattern(ms, flagged)
        if pattern is None:  # no consistent slowdown: a few cells far below the rest, each named
            flagged = [r and c.ratio < far for r, c in zip(rejected, ms)]
            pattern = few_cells_pattern(ms, flagged)
        if pattern is not None:
            causes = causes_of(src, group)
            keys = frozenset(c.row.key for c, f in zip(ms, flagged) if f)
            inside = [c for c, f in zip(ms, flagged)
                      if f and (pattern.everywhere or pattern.facet == CELLS_FACET or _in(pattern, c))]
            pct = statistics.median(1.0 - c.ratio for c in inside) * 100.0
            slow.append(Finding("slow", src, name, summary.by, group, others[group], len(ms), pct, pattern, causes,
                                cell_keys=keys, shared=shared_verdict(ms, flagged)))
        noisy = [c.cv is not None and c.group_cv is not None and c.cv >= UNSTABLE_MIN_CV
                 and c.cv > UNSTABLE_FACTOR * c.group_cv for c in ms]
        wide = find_pattern(ms, noisy)
        if wide is not None:
            causes = causes if causes is not None else causes_of(src, group)
            mine = statistics.median(c.cv for c in ms if c.cv is not None) * 100.0
            theirs = statistics.median(c.group_cv for c in ms if c.group_cv is not None) * 100.0
            unstable.append(Finding("unstable", src, name, summary.by, group, others[group], len(ms), mine, wide,
                                    causes, theirs))
    slow.sort(key=lambda f: (-f.pattern.flagged, -f.figure, f.source.index))
    unstable.sort(key=lambda f: (-f.figure, f.source.index))
    return slow + unstable


def _in(pattern: Pattern, mark: CellMark) -> bool:
    value_of = dict(FACETS)[pattern.facet]
    return value_of(mark) in pattern.values
