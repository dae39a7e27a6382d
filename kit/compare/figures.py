"""What one run measured, per cell, as a comparison reads it: computed once per run.

A comparison of N machines reads, of each run, the same things: per cell its samples over the
repeats (throughput, epoch time, the final metric), its energy per epoch, its speedup over fp32
with the CI, its parity verdict, its flags (high CV, throttled), whether the host was busy. None of
that depends on the other runs, so it is computed here, once per run, by the functions every view
uses (:mod:`kit.compare.measures`, :mod:`kit.compare.stats`, :func:`kit.results.derive.parity`);
:func:`kit.compare.engine.build_comparison` adds only what depends on the baseline (the ratio to
its cell, the gap to its final metric) and the warnings.

``kit compare`` computes a run's figures when it reads a tarball; ``kit index add`` computes them
at ingest and the index stores them (:mod:`kit.index.figures_codec`), so ``kit compare --index``
of 200 runs reads numbers instead of re-deriving them from 200 results.json files.
``tests/test_index_figures.py`` checks that every view is the same either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kit.compare import measures
from kit.compare.stats import RatioEstimate, Sample
from kit.results import explain, ratios
from kit.results.cell_ids import cell_learner
from kit.results.method import host_paced, method_of
from kit.results.schema import CellResult, RunResults

#: the flag of a cell whose engine's loop the host drives step by step (kit.results.method.host_paced)
HOST_PACED = "host-paced"

Key = tuple  # kit.results.cell_ids.cell_key: workload, model, precision, engine (+ size, + "bs512")


@dataclass
class CellFigures:
    """One cell of one run. For a cell that is not ``ok`` only the identity, status and reason."""

    key: Key
    status: str
    reason: str | None = None
    unit: str = "items"
    #: the cell's parameters, with a fastai cell's learner filled in (kit.results.cell_ids.cell_learner)
    params: dict = field(default_factory=dict)
    #: the cell's own data source (real / synthetic) where it recorded one, else None (the run's applies;
    #: kit.bundle.envinfo.summarise_environment reads every cell's)
    data_source: str | None = None
    #: why the host was busy while the cell ran (kit.env.hostload.busy_reason), else None
    busy: str | None = None
    throughput: Sample | None = None
    epoch_s: Sample | None = None
    #: convergence runs only: the final metric over repeats (measures.parity_metric names it)
    final_metric: Sample | None = None
    energy_j_per_epoch: float | None = None
    #: "high throughput CV 12%", "throttled": measures.high_cv_flags and measures.throttled
    flags: list = field(default_factory=list)
    #: the per-repeat values ratios take their medians of (kit.results.ratios.metric_values)
    throughput_values: list = field(default_factory=list)
    epoch_values: list = field(default_factory=list)
    vs_fp32: RatioEstimate | None = None
    #: convergence runs only: this cell's parity row (kit.results.derive.parity; None for the base precision)
    parity: dict | None = None
    #: the medians of the two value lists (kit.results.ratios.median_of): each ratio's numerator or
    #: denominator, taken once per cell (a fleet's baseline cell divides every machine's)
    throughput_median: float | None = None
    epoch_median: float | None = None
    #: how the cell was measured (kit.results.method; None: method unknown)
    method: dict | None = None
    #: what bound the cell (kit.results.explain.bound, kit explain's verdict): its kind and its short
    #: form ("host-bound", "host-bound 62% idle"); None only for a cell that is not ok
    explain_kind: str | None = None
    explain_verdict: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def cell_id(self) -> str:
        """kit.results.cell_ids.cell_id: the key's parts joined by "/"."""
        return "/".join(self.key)


@dataclass
class RunFigures:
    run_id: str | None
    mode: str | None  # "throughput" / "convergence" (RunConfig.mode)
    cells: list  # CellFigures, in the run's order
    data: str | None = None  # RunConfig.data: the data source the run asked for

    def environment_summary(self, env: dict | None):
        """kit.bundle.envinfo.summarise_environment of the run, from its figures (the same summary
        as from its results: the environment, then the config's data source, then the cells')."""
        from kit.bundle.envinfo import summarise_environment

        cells = [{"data": {"source": c.data_source}} for c in self.cells if c.data_source is not None]
        return summarise_environment(env, {"data": self.data}, cells)

    @property
    def converged(self) -> bool:
        """A convergence run: its cells' final metric is the quality parity compares."""
        return self.mode == "convergence"

    def by_key(self) -> dict:
        """The cells by key (a key given twice: the later cell, as a dict of the run's cells keeps it)."""
        return {c.key: c for c in self.cells}

    def ok_cells(self) -> dict:
        return {c.key: c for c in self.cells if c.ok}


def _data_source(cell: CellResult) -> str | None:
    source = (cell.data or {}).get("source") if isinstance(cell.data, dict) else None
    return None if source is None else str(source)


def run_figures(results: RunResults) -> RunFigures:
    """The figures of every cell of ``results`` (see the module's docstring)."""
    from kit.env.hostload import busy_reason

    cache = measures.SampleCache()
    mode = getattr(results.config, "mode", None)
    converged = mode == "convergence"
    speedups = measures.speedup_vs_fp32(results, cache)
    parities = {measures.parity_key(r): r for r in measures.parity_rows(results)} if converged else {}
    cells = []
    for cell in results.cells:
        key = cache.key(cell)
        if cell.status != "ok":
            cells.append(CellFigures(key, cell.status, cell.reason, data_source=_data_source(cell)))
            continue
        params = dict(cell.params or {})
        learner = cell_learner(cell.engine, cell.params)
        if learner:  # a fastai cell recorded before the option existed: the plain Learner
            params["learner"] = learner
        flags = measures.high_cv_flags(cell, cache)
        if measures.throttled(cell):
            flags.append("throttled")
        method = method_of(cell)
        why = explain.bound(cell)
        if host_paced(method):
            flags.append(HOST_PACED)
        cells.append(CellFigures(
            key, "ok", None, measures.unit_of(cell), params, _data_source(cell),
            busy_reason(getattr(cell, "host", None)),
            throughput=cache.sample(cell, ratios.THROUGHPUT),
            epoch_s=cache.sample(cell, ratios.EPOCH_S),
            final_metric=cache.sample(cell, measures.FINAL_METRIC) if converged else None,
            energy_j_per_epoch=measures.energy_per_epoch(cell),
            flags=flags,
            throughput_values=cache.values(cell, ratios.THROUGHPUT),
            epoch_values=cache.values(cell, ratios.EPOCH_S),
            throughput_median=ratios.median_of(cache.values(cell, ratios.THROUGHPUT)),
            epoch_median=ratios.median_of(cache.values(cell, ratios.EPOCH_S)),
            vs_fp32=speedups.get(key),
            parity=parities.get(key),
            method=method,
            explain_kind=why.kind,
            explain_verdict=why.short,
        ))
    data = getattr(results.config, "data", None)
    return RunFigures(results.run_id, mode, cells, None if data is None else str(data))
