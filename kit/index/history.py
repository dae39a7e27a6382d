"""A machine's history: its runs in the index, over time, and per cell the change from one run to the next.

**Which runs are one machine's.** A series follows the host id each bundle records
(``env.json``'s ``host.host_id``; a bundle that recorded none, the id its host name gives,
:func:`kit.env.identity.host_id`; the id names the machine where it came from its machine-id), with the host name shown beside it. Clouds call every machine
``vm``: ``--host vm`` where several host ids carry that name asks which (exit 2), and ``--host ID``
picks one.

**Where a series breaks.** A ratio between two runs of a machine measures the machine only where
both measured the cell the same way on the same GPUs. So no change is computed, and nothing is
flagged, across a change of method (kit.results.method.method_change: "method changed: no ratio")
or of GPU: another GPU model ("GPU changed: NVIDIA H200 -> NVIDIA H100: no ratio") or other GPUs
of the same model, by their UUIDs where both runs recorded them ("other GPUs (...): no ratio").

:func:`history` gives the runs and each cell's points, :func:`summary` a row per run (per precision
the geometric mean of its cells' ratios to the previous run), :func:`matching` the cells a pattern
picks; :mod:`kit.index.history_view` shows them.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from kit.bundle import safe_json
from kit.bundle.inert import inert
from kit.compare.stats import RatioEstimate, Sample, ratio_estimate
from kit.errors import UsageError
from kit.facts import plausible
from kit.index.bounds import MAX_REPEATS, check_cells
from kit.index.figures_codec import Damaged, decode, inflate
from kit.index.query import Filter, damaged_copy, list_runs
from kit.results import ratios
from kit.results.method import method_change

CHANGE_FIELDS = ("gpu", "driver", "stack", "torch", "kit")


@dataclass
class HistoryPoint:
    run: dict  # a list_runs row, with the machine's "host_id" and "gpu_uuids"
    median: Optional[float]
    values: list
    status: str
    changed: list  # names among driver/torch/kit/stack/gpu that differ from the previous run
    vs_previous: Optional[RatioEstimate] = None
    flagged: bool = False
    #: how this run measured the cell (kit.results.method; None: method unknown)
    method: Optional[dict] = None
    #: a break in the series: the previous run measured the cell by another method
    #: (kit.results.method.method_change's words); no change is computed across it
    method_break: Optional[str] = None
    #: a break in the series: the previous run measured it on another GPU model, or other GPUs
    gpu_break: Optional[str] = None


@dataclass
class CellHistory:
    cell_id: str
    unit: str
    points: list  # HistoryPoint, in run-date order


def _identity(con: sqlite3.Connection, run: dict) -> tuple:
    """(host id, GPU UUIDs) of a run, from its stored env.json: the recorded host id (else the one its
    host name gives) and its GPUs' UUIDs, sorted (empty where none was recorded)."""
    from kit.env.identity import host_id
    from kit.env.record import gpu_records, host_id_of

    (env_z,) = con.execute("SELECT env_z FROM bundles WHERE id = ?", (run["id"],)).fetchone()
    try:
        env = safe_json.loads(inflate(env_z))
    except ValueError as exc:  # Damaged, TooLarge and UnicodeDecodeError included
        raise damaged_copy(inert(run["file_name"]), exc) from None
    env = env if isinstance(env, dict) else {}
    hid = host_id_of(env)
    hid = inert(hid) if isinstance(hid, str) and hid.strip() else host_id(str(run["host"]))
    uuids = sorted(inert(g["uuid"]) for g in gpu_records(env) or [] if isinstance(g.get("uuid"), str))
    return hid, tuple(uuids)


def machine_runs(con: sqlite3.Connection, host: str, flt: Optional[Filter] = None) -> list[dict]:
    """The runs of the machine ``host`` names (a host name carried by one host id, or a host id) in
    run-date order, each once, each with its ``host_id`` and ``gpu_uuids``. UsageError where no run
    has it, or where the name is several machines' (each id named with its runs, and the option
    that picks it)."""
    flt = Filter(dict(flt.equals), list(flt.words), flt.since) if flt else Filter()
    named = list_runs(con, Filter(dict(flt.equals, host=host), list(flt.words), flt.since))
    candidates = named or list_runs(con, flt)
    by_id: dict = {}
    for r in candidates:
        r["host_id"], r["gpu_uuids"] = _identity(con, r)
        if named or r["host_id"] == host:
            by_id.setdefault(r["host_id"], []).append(r)
    if not by_id:
        known = [x[0] for x in con.execute("SELECT DISTINCT host FROM bundles ORDER BY host LIMIT 8")]
        raise UsageError(f"--host {inert(repr(host))}: no run of that host in the index"
                         + (f" (hosts: {', '.join(map(inert, known))}{', ...' if len(known) == 8 else ''})." if known
                            else " (it is empty)."))
    if len(by_id) > 1:
        ids = sorted(by_id, key=lambda i: -len(by_id[i]))
        from kit.env.identity import host_id as name_id

        def said(i: str) -> str:  # an id derived from the name: runs recorded without the machine's own id
            named_so = any(i == name_id(str(r["host"])) for r in by_id[i])
            return f"{i} ({len(by_id[i])} run{'s' if len(by_id[i]) != 1 else ''}{', id from the host name' if named_so else ''})"

        listed = ", ".join(said(i) for i in ids)
        raise UsageError(f"--host {inert(host)}: {len(by_id)} machines are named {inert(host)} (host ids {listed}); "
                         "a history follows one machine.",
                         remedy=f"Give its host id, e.g. --host {ids[0]} (kit index list --json shows each run's host).")
    (runs,) = by_id.values()
    return runs


def _gpu_break(before: dict, now: dict) -> Optional[str]:
    """Why no ratio is taken between two runs of one machine on different GPUs, else None."""
    if before["gpu"] != now["gpu"]:
        return f"GPU changed: {inert(before['gpu'])} -> {inert(now['gpu'])}: no ratio"
    if before["gpu_uuids"] and now["gpu_uuids"] and before["gpu_uuids"] != now["gpu_uuids"]:
        return f"other GPUs ({', '.join(before['gpu_uuids'])} -> {', '.join(now['gpu_uuids'])}): no ratio"
    return None


def history(con: sqlite3.Connection, host: str, min_change_pct: float = 5.0,
            flt: Optional[Filter] = None) -> tuple[list[dict], list[CellHistory]]:
    """A machine's runs in run-date order (:func:`machine_runs`; each run once: kit.index.runs), and per
    cell its median throughput in each run, the change against the previous run that measured it
    (kit.compare.stats.ratio_estimate on the per-repeat throughputs, as compare does for two
    machines) and whether that change is flagged: significant (Welch, p < 0.05) and at least
    ``min_change_pct`` percent. Where the cell's method or the machine's GPUs changed between two runs
    the series breaks: no change is computed across it, never a "significant change"."""
    runs = machine_runs(con, host, flt)
    by_id = {r["id"]: r for r in runs}
    q = "SELECT bundle_id, cell_id, status, unit, throughput_median, throughput_json FROM cells WHERE bundle_id IN ({})"
    rows: list = []
    ids = list(by_id)
    check_cells(con, Path(con.execute("PRAGMA database_list").fetchone()[2]), ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        rows.extend(con.execute(q.format(", ".join("?" * len(chunk))), chunk).fetchall())
    order = {r["id"]: i for i, r in enumerate(runs)}
    per_cell: dict = {}
    for bundle_id, cid, status, unit, median, values in rows:
        try:
            values = _repeats(values)
            if type(cid) is not str or cid.count("/") < 3 or type(status) is not str:
                raise ValueError("not a cell of the kit's form")
        except (TypeError, ValueError) as exc:  # the cells table is as untrusted as the rest of the file
            raise damaged_copy(inert(by_id[bundle_id]["file_name"]), exc) from None
        per_cell.setdefault(cid, (str(unit), []))[1].append((order[bundle_id], bundle_id, status, median, values))
    prev_run: dict = {}
    changes = {}
    for r in runs:
        changes[r["id"]] = [f for f in CHANGE_FIELDS if prev_run and r[f] != prev_run[f]]
        prev_run = r
    from kit.compare.measures import order_key

    methods = _methods(con, ids)
    out = []
    for cid in sorted(per_cell, key=lambda c: order_key(tuple(c.split("/")))):
        unit, entries = per_cell[cid]
        points, prev = [], None
        for _, bid, status, median, values in sorted(entries):
            median = next(iter(ratios.finite_values([median])), None) if status == "ok" else None
            p = HistoryPoint(by_id[bid], median, values, status, changes[bid], method=methods.get((bid, cid)))
            if status == "ok" and values:
                if prev is not None:
                    p.method_break = method_change([("before", prev.method), ("now", p.method)])
                    p.gpu_break = _gpu_break(prev.run, p.run)
                if prev is not None and p.method_break is None and p.gpu_break is None:
                    p.vs_previous = _change(values, prev.values)
                    p.flagged = bool(p.vs_previous and p.vs_previous.significant
                                     and abs(p.vs_previous.ratio - 1.0) * 100.0 >= min_change_pct)
                prev = p
            points.append(p)
        out.append(CellHistory(cid, unit, points))
    return runs, out


def _repeats(text: str) -> list:
    """A cell's per-repeat throughputs as stored (a JSON list), checked: at most MAX_REPEATS numbers,
    each inside kit.facts.plausible's range; ValueError otherwise."""
    values = safe_json.loads(text.encode("utf-8"), max_values=MAX_REPEATS + 1)
    if type(values) is not list or any(type(v) not in (int, float) or not (
            plausible.MIN_THROUGHPUT <= v <= plausible.MAX_THROUGHPUT) for v in values):
        raise ValueError("its per-repeat throughputs are not numbers any device can measure")
    return values


def matching(cells: list[CellHistory], host: str, pattern: str) -> list[CellHistory]:
    """The cells whose id matches ``pattern``: a glob (``cifar/*/amp-fp16/*``), or without ``*?[`` any
    id that holds it (``amp-fp16``); UsageError naming a few of the host's cells when none does."""
    import fnmatch

    glob = pattern if any(ch in pattern for ch in "*?[") else f"*{pattern}*"
    out = [c for c in cells if fnmatch.fnmatchcase(c.cell_id, glob)]
    if not out:
        known = [c.cell_id for c in cells]
        raise UsageError(f"--cells {inert(repr(pattern))}: {inert(host)} has no such cell"
                         + (f" (its cells: {', '.join(map(inert, known[:6]))}{', ...' if len(known) > 6 else ''})." if known else "."))
    return out


@dataclass
class PrecisionChange:
    """One precision's cells of a run against the run before that measured each."""

    #: the geometric mean of the cells' ratios (kit.results.ratios.geometric_mean); None: no cell has one
    ratio: Optional[float]
    cells: int  # cells with a ratio
    flagged: int  # of them, a significant change of at least the minimum
    breaks: int  # cells measured by another method than before: no ratio
    gpu_breaks: int = 0  # cells measured on another GPU model, or other GPUs, than before: no ratio


@dataclass
class RunChange:
    """A row of the history's summary: one run against the run before it."""

    run: dict
    #: (field, before, now) for each of CHANGE_FIELDS that differs from the run before, and "GPUs"
    #: where the GPUs' UUIDs did
    changed: list
    by_precision: dict  # precision -> PrecisionChange (the precisions the run measured)
    cells: int  # cells the run measured (status ok)


def summary(runs: list[dict], cells: list[CellHistory]) -> tuple[list[str], list[RunChange]]:
    """The precisions (in the cells' order) and a row per run: what changed since the run before
    (software, GPUs, and cells whose method or GPU changed: a break, never a change of speed) and per
    precision the geometric mean of its cells' ratios to the previous run that measured each."""
    precisions: list = []
    per_run: dict = {r["id"]: {} for r in runs}
    measured = dict.fromkeys(per_run, 0)
    for c in cells:
        precision = c.cell_id.split("/")[2]
        if precision not in precisions:
            precisions.append(precision)
        for p in c.points:
            bid = p.run["id"]
            measured[bid] += p.status == "ok"
            acc = per_run[bid].setdefault(precision, [[], 0, 0, 0])
            if p.vs_previous is not None:
                acc[0].append(p.vs_previous.ratio)
                acc[1] += p.flagged
            acc[2] += p.method_break is not None
            acc[3] += p.gpu_break is not None
    rows, prev = [], None
    for r in runs:
        changed = [(f, prev[f], r[f]) for f in CHANGE_FIELDS if prev is not None and r[f] != prev[f]]
        if prev is not None and prev["gpu"] == r["gpu"] and prev["gpu_uuids"] and r["gpu_uuids"] \
                and prev["gpu_uuids"] != r["gpu_uuids"]:
            changed.append(("GPUs", ", ".join(prev["gpu_uuids"]), ", ".join(r["gpu_uuids"])))
        by_precision = {pr: PrecisionChange(ratios.geometric_mean(xs), len(xs), flagged, breaks, gpu)
                        for pr, (xs, flagged, breaks, gpu) in per_run[r["id"]].items()}
        rows.append(RunChange(r, changed, by_precision, measured[r["id"]]))
        prev = r
    return precisions, rows


def _methods(con: sqlite3.Connection, ids: list) -> dict:
    """(bundle id, cell id) -> the cell's method record, from the runs' stored figures (a run whose
    figures are damaged reads as method unknown here; compare names it)."""
    out: dict = {}
    for bundle_id in ids:
        row = con.execute("SELECT figures_z FROM bundles WHERE id = ?", (bundle_id,)).fetchone()
        try:
            figures = decode(row[0])
        except Damaged:
            continue
        for c in figures.cells:
            if c.method is not None:
                out[(bundle_id, c.cell_id)] = c.method
    return out


def _change(now: list, before: list) -> Optional[RatioEstimate]:
    """This run's throughput over the previous run's: the ratio compare computes between machines."""
    a, b = Sample.of(now), Sample.of(before)
    if a is None or b is None:
        return None
    return ratio_estimate(a, b, ratios.ratio_of_medians(now, before))
