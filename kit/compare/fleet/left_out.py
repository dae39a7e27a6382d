"""What a fleet's groups leave out, and why: every group, or cell of a group, that no view compares is
named with its reason, in every view (terminal, Markdown, JSON, the fleet page).

A group compares a cell where two or more of its machines measured it the same way
(:func:`kit.compare.fleet.summarise_fleet`'s group cells). Of the cells its machines measured (in
the comparison: ``--cells`` narrows it), the others are left out:

- **measured by one machine of the group**: nothing to compare it against;
- **measured by different methods on its machines**: two or more measured it, but no two the same way
  (:mod:`kit.results.method`; methods are judged within each group with ``--group-by``);

and in a cell the group compares, a machine that measured it by another method than the rest of its
group is left out of that cell (``machine cells``). A group that compares no cell at all is left out
entirely, and its line says so: a group never vanishes from a view without a word.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.bundle.inert import inert

ONE_MACHINE = "measured by one machine of the group"
OTHER_METHODS = "measured by different methods on its machines"
OTHERWISE = "measured otherwise than the rest of the group"


@dataclass(frozen=True)
class LeftOut:
    """A group (``by`` ``group``, ``machines`` of them) that leaves out some of the ``cells`` its
    machines measured: ``compared`` of them are compared; ``reasons``: (why, cells) for the cells left
    out whole; ``machine_cells``: machines' cells left out of cells the group compares (another method)."""

    by: str
    group: str
    machines: int
    cells: int
    compared: int
    reasons: tuple
    machine_cells: int = 0

    @property
    def entirely(self) -> bool:
        return self.compared == 0

    @property
    def line(self) -> str:
        name = f"{self.by} {self.group} ({self.machines} machine{'s' if self.machines != 1 else ''})"
        why = ", ".join(f"{n} {why}" for why, n in self.reasons)
        if self.entirely and self.machines == 1:
            return f"{name}: left out entirely: one machine, nothing to compare it against ({self.cells} cells)"
        if self.entirely:
            return f"{name}: left out entirely: none of its {self.cells} cells compared: {why}"
        out = f"{name}: {self.compared} of its {self.cells} cells compared"
        out += f"; left out: {why}" if why else ""
        if self.machine_cells:
            out += (f"; {self.machine_cells} machine cell{'s' if self.machine_cells != 1 else ''} {OTHERWISE} "
                    "left out of cells it compares")
        return out

    def to_dict(self) -> dict:
        return {"group_by": self.by, "group": self.group, "machines": self.machines, "cells": self.cells,
                "compared": self.compared, "entirely": self.entirely,
                "cells_left_out": [{"reason": why, "cells": n} for why, n in self.reasons],
                "machine_cells_measured_otherwise": self.machine_cells, "line": self.line}


def left_out(cmp, summary) -> list:
    """The :class:`LeftOut` of every group of ``summary`` (kit.compare.fleet.FleetSummary of ``cmp``)
    that leaves something out, in the groups' order."""
    universe = {r.cell_id for r in cmp.rows} | {n.cell_id for n in cmp.not_compared}
    compared: dict[str, dict[tuple, set]] = {}
    for gc in summary.cells:
        valued = {m.source.index for m in gc.members}
        if any(m.vs_rest is not None for m in gc.members):
            compared.setdefault(gc.group, {})[gc.row.key] = valued
    out = []
    for group, members in summary.groups.items():
        measured: dict[tuple, int] = {}
        otherwise = 0
        mine = compared.get(group, {})
        for s in members:
            for key in s.figures.ok_cells():
                if inert("/".join(key)) not in universe:
                    continue  # not in this comparison (--cells)
                measured[key] = measured.get(key, 0) + 1
                otherwise += key in mine and s.index not in mine[key]
        counts: dict[str, int] = {}
        for key, n in measured.items():
            if key not in mine:
                why = ONE_MACHINE if n == 1 else OTHER_METHODS
                counts[why] = counts.get(why, 0) + 1
        if counts or otherwise:
            out.append(LeftOut(summary.by, group, len(members), len(measured), len(mine),
                               tuple(sorted(counts.items(), key=lambda kv: -kv[1])), otherwise))
    return out
