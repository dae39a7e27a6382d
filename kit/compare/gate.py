"""`kit compare --fail-if-slower PCT`: a CI gate that says what it tested.

A cell of a machine is **tested** against the baseline when both measured it the same way (one
method, :mod:`kit.results.method`) and Welch's test has a p-value: two repeats or more on each side.
It **fails** the gate when the machine is significantly slower (p < 0.05) by more than PCT percent
(the ratio of medians): exit 9 (:class:`kit.errors.RegressionDetected`). Every other cell any of the
two measured is **not tested**, counted by reason (one repeat, measured by one side only, skipped or
failed, measured otherwise than the baseline).

What a user expects of a gate, and what it does:

- every cell testable: the gate passes or fails on all of them, and says "tested all N cells";
- some testable: it passes or fails on those, and names how many it could not test and why (a
  machine whose larger models ran one repeat is still gated on the rest);
- none testable (two single-repeat bundles, every cell measured by another method): there is no
  answer, so no green: exit 11 (:class:`kit.errors.NothingTested`) with the reasons. A gate never
  reads green on nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kit.compare.engine import METHOD_FLAG, OTHER_METHOD, Comparison
from kit.compare.fmt import fmt_vs_baseline
from kit.compare.stats import ONE_REPEAT, RatioEstimate
from kit.errors import NothingTested, RegressionDetected, UsageError

ONE_REPEAT_WHY = "with 1 repeat (Welch's test needs 2 or more on each side)"
OTHERWISE_WHY = "measured otherwise than the baseline"
#: the regressions a message lists (the rest are counted)
LISTED = 20


@dataclass(frozen=True)
class Regression:
    cell_id: str
    label: str
    ratio: RatioEstimate
    #: measured by another method than the baseline's, kept by --allow-method-change
    method_differs: bool = False
    #: why the host was busy while either side measured the cell (kit.env.hostload), else None
    busy: str | None = None

    @property
    def slower_pct(self) -> float:
        return (1.0 - self.ratio.ratio) * 100.0


@dataclass
class Gate:
    """What ``--fail-if-slower pct`` tested: ``tested`` of ``total`` (machine, cell) pairs against the
    baseline, the regressions among them, and (reason, pairs) for those not tested."""

    pct: float
    baseline: str
    machines: list  # the labels of the machines gated against the baseline
    total: int = 0
    tested: int = 0
    regressions: list = field(default_factory=list)
    untested: list = field(default_factory=list)

    @property
    def line(self) -> str:
        """``--fail-if-slower 5%: tested 3 of the 6 cells B shares with the baseline A; not tested: ...``."""
        whose = (f"cells measured by {self.machines[0]} or the baseline {self.baseline}" if len(self.machines) == 1 else
                 f"cells of {len(self.machines)} machines against the baseline {self.baseline} (a cell per machine)")
        head = (f"--fail-if-slower {self.pct:g}%: tested "
                + (f"all {self.total} {whose}" if self.tested == self.total else f"{self.tested} of the {self.total} {whose}"))
        if self.untested:
            head += "; not tested: " + ", ".join(f"{n} {why}" for why, n in self.untested)
        if self.tested and not self.regressions:
            head += "; no significant slowdown" + (" in the cells tested" if self.untested else "")
        return head

    def to_dict(self) -> dict:
        return {"pct": self.pct, "baseline": self.baseline, "machines": list(self.machines), "cells": self.total,
                "tested": self.tested, "not_tested": [{"reason": why, "cells": n} for why, n in self.untested],
                "regressions": [{"cell_id": r.cell_id, "machine": r.label, "slower_pct": r.slower_pct,
                                 "p_value": r.ratio.p_value, "method_differs": r.method_differs, "busy": r.busy}
                                for r in self.regressions],
                "line": self.line}


def _why_untested(cmp: Comparison, row, i: int) -> str | None:
    """Why machine ``i``'s cell of ``row`` is not tested against the baseline (None: it is)."""
    base, mc = row.machines[0], row.machines[i]
    label, base_label = cmp.sources[i].label, cmp.baseline_source.label
    for who, cell in ((label, mc), (base_label, base)):
        if cell is None or cell.status == "missing":
            return f"not measured by {who}"
        if cell.status == OTHER_METHOD:
            return OTHERWISE_WHY
        if cell.status != "ok":
            return f"{cell.status} on {who}"
    if mc.baseline_method_differs:
        return OTHERWISE_WHY
    est = mc.vs_baseline
    if est is None:
        return "no throughput or epoch time on both sides"
    if est.verdict == ONE_REPEAT:
        return ONE_REPEAT_WHY
    if est.p_value is None:
        return "no spread between repeats to test"
    return None


def _unrowed(cmp: Comparison) -> dict[str, int]:
    """Why the cells that are no row of the comparison (fewer than two inputs measured them the
    same way) are not tested, per machine pair: by the not-compared reason's first cause."""
    out: dict[str, int] = {}
    rows = {r.cell_id for r in cmp.rows}
    for n in cmp.not_compared:
        if n.cell_id in rows:
            continue
        for src in cmp.sources[1:]:
            why = _reason_of(n.reason, src.label, cmp.baseline_source.label)
            out[why] = out.get(why, 0) + 1
    return out


def _reason_of(reason: str, label: str, base: str) -> str:
    """A not-compared line's reason ("missing in B; skipped in A (...)") as the gate counts it for
    machine ``label`` against ``base``."""
    for part in reason.split("; "):
        words = part.split(" (", 1)[0]
        for who in (label, base):
            if words == f"missing in {who}":
                return f"not measured by {who}"
            if words == f"{OTHER_METHOD} in {who}":
                return OTHERWISE_WHY
            if words.endswith(f" in {who}"):
                return f"{words[:-len(f' in {who}')]} on {who}"
    return "not measured by two inputs the same way"


def gate(cmp: Comparison, pct: float) -> Gate:
    """What ``--fail-if-slower pct`` tests in ``cmp``: every (machine, cell) against the baseline."""
    g = Gate(pct, cmp.baseline_source.label, [s.label for s in cmp.sources[1:]])
    counts = _unrowed(cmp)
    limit = 1.0 - pct / 100.0
    for row in cmp.rows:
        for i, src in enumerate(cmp.sources[1:], 1):
            why = _why_untested(cmp, row, i)
            if why is not None:
                counts[why] = counts.get(why, 0) + 1
                continue
            g.tested += 1
            mc = row.machines[i]
            est = mc.vs_baseline
            if est.significant and est.ratio < limit:
                busy = "; ".join(f"{who}: {b}" for who, b in ((src.label, mc.busy), (g.baseline, row.machines[0].busy))
                                 if b)
                g.regressions.append(Regression(row.cell_id, src.label, est, METHOD_FLAG in mc.flags, busy or None))
    g.untested = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    g.total = g.tested + sum(counts.values())
    return g


def check_gate(cmp: Comparison, pct: float) -> list[str]:
    """:func:`outcome` of the gate of ``cmp`` at ``pct``."""
    return outcome(gate(cmp, pct))


def outcome(g: Gate) -> list[str]:
    """The gate's line when it passes; RegressionDetected (exit 9) naming each slower cell when it
    fails, NothingTested (exit 11) when it could test no cell."""
    pct = g.pct
    if not g.tested:
        raise NothingTested(
            f"{g.line}. The gate tested no cell, so it cannot pass.",
            remedy="Run each side with --repeats 2 or more (3 is the default), with the same kit and settings "
                   "(docs/compare.md, \"A CI gate\").")
    if g.regressions:
        lines = [
            f"{r.label} is {r.slower_pct:.1f}% slower than {g.baseline} on {r.cell_id} "
            f"(throughput {fmt_vs_baseline(r.ratio)}, p={r.ratio.p_value:.2g})"
            + (f" [{METHOD_FLAG}: compares methods, not machines]" if r.method_differs else "")
            + (f" [host busy: {r.busy}]" if r.busy else "")
            for r in g.regressions[:LISTED]
        ]
        more = f"\n  ... and {len(g.regressions) - LISTED} more" if len(g.regressions) > LISTED else ""
        raise RegressionDetected(
            f"{len(g.regressions)} cell(s) slower than the baseline by more than {pct:g}% (significant at p < 0.05):\n  "
            + "\n  ".join(lines) + more + f"\n{g.line}",
            remedy="Check the comparability warnings above; if the slowdown is real, bisect the change that caused it.",
        )
    return [g.line]


def parse_pct(value) -> float:
    """``--fail-if-slower``'s percentage: ``5`` or ``5%``, from 0 to under 100."""
    try:
        pct = float(str(value).rstrip("%"))
    except ValueError:
        raise UsageError(f"--fail-if-slower takes a percentage like 5 or 5%, not {value!r}.") from None
    if not 0 <= pct < 100:
        raise UsageError("--fail-if-slower must be between 0 and 100 (percent).")
    return pct
