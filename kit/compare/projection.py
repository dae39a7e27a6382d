"""What a comparison reads of a results.json: the projection the results index stores.

A run of the full CIFAR suite on an H200 writes 1.4 MB of results.json for its 156 cells: per-epoch
times, every NVML field, the derived tables, the notes. `kit compare` reads a small part of it. The
index (:mod:`kit.index`) stores, beside the results.json it was given, this projection of it, and
``kit compare --index`` builds its sources from the projection: the same comparison (the views read
nothing else; ``tests/test_index_projection.py`` compares every view of the committed references
from the index and from their tarballs), at a tenth of the reading and of the memory.

The projection is a results.json itself, of the same schema, read and checked by
:mod:`kit.results.schema` like any other. Kept: the run's identity, status, times and config; per
cell its identity, status, reason, parameters, unit, data source and host load; from each repeat
only the measures a comparison reads (:data:`MEASURES`), from the summary those of them that no
repeat has (what :func:`kit.compare.measures.sample` falls back to) and the final metric (which
:func:`kit.results.derive.parity` reads there), and the telemetry's fields that
say whether it was recorded, throttled and how much energy it measured. Left out: the run's ``environment`` (the index stores env.json beside it) and
``derived``; the cells' ``metrics`` and ``notes``; every other per-repeat field.

A view that starts reading another field must add it here, and the index must re-project what it
holds: a new schema version of :mod:`kit.index.db` whose migration step calls :func:`project`
again on the stored results.json.
"""

from __future__ import annotations

from kit.compare.measures import ENERGY, FINAL_METRIC
from kit.results.ratios import EPOCH_S, THROUGHPUT, finite_values

#: what a comparison reads of each repeat and of the summary (kit.compare.measures.sample's metrics,
#: and the warm-up steps that tell whether repeats' epoch times are like for like)
MEASURES = (THROUGHPUT, EPOCH_S, ENERGY, FINAL_METRIC)
REPEAT_FIELDS = MEASURES + ("warmup_steps",)
#: what a comparison reads of the telemetry (kit.compare.measures: telemetry, throttled, energy_per_epoch)
TELEMETRY_FIELDS = ("available", "reason", "throttled", "energy_j", "energy_basis", "items_per_j", ENERGY)
#: the cell's fields kept whole (small: a few keys each)
CELL_FIELDS = ("workload", "model", "precision", "engine", "status", "params", "reason", "throughput_unit", "host")
#: the run's fields kept whole
RUN_FIELDS = ("schema_version", "kit_version", "run_id", "status", "started_at", "finished_at", "config")


def _pick(d: dict, keys) -> dict:
    return {k: d[k] for k in keys if k in d}


def _cell(c) -> object:
    if not isinstance(c, dict):
        return c  # not a cell: left for the schema check to refuse
    out = _pick(c, CELL_FIELDS)
    if isinstance(c.get("repeats"), list):
        out["repeats"] = [_pick(r, REPEAT_FIELDS) if isinstance(r, dict) else r for r in c["repeats"]]
    if isinstance(c.get("summary"), dict):
        # a measure's summary is read where no repeat has a finite value of it (measures.sample), and
        # the final metric's always (kit.results.derive.parity judges the summary's median)
        reps = [r for r in out.get("repeats") or [] if isinstance(r, dict)]
        out["summary"] = {k: v for k, v in _pick(c["summary"], MEASURES).items()
                          if k == FINAL_METRIC or not finite_values(r.get(k) for r in reps)}
    if "telemetry" in c:
        t = c["telemetry"]
        out["telemetry"] = _pick(t, TELEMETRY_FIELDS) if isinstance(t, dict) else t
    if isinstance(c.get("data"), dict) and "source" in c["data"]:
        out["data"] = {"source": c["data"]["source"]}
    elif "data" in c and not isinstance(c["data"], dict):
        out["data"] = c["data"]  # malformed: the schema check says so
    return out


def project(results: dict) -> dict:
    """The part of a parsed results.json that a comparison reads (see the module's docstring)."""
    out = _pick(results, RUN_FIELDS)
    if "cells" in results:
        cells = results["cells"]
        out["cells"] = [_cell(c) for c in cells] if isinstance(cells, list) else cells
    return out
