"""What the user sees while a run goes: the plan, a bar per cell, an overall ETA."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kit.compare.measures import busy_note, host_busy

if TYPE_CHECKING:
    from kit.results.schema import CellResult, CellSpec
    from kit.runner.plan import Plan


class NullUI:
    def plan(self, plan: "Plan", done: dict) -> None: ...
    def cell_start(self, spec: "CellSpec") -> None: ...
    def cell_progress(self, spec: "CellSpec", done: float, total: float, desc: str = "") -> None: ...
    def cell_done(self, spec: "CellSpec", result: "CellResult") -> None: ...
    def cell_skipped_resume(self, spec: "CellSpec") -> None: ...
    def close(self) -> None: ...


def describe_result(result: "CellResult") -> str:
    if result.status != "ok":
        return f"{result.status}: {result.reason}"
    s = result.summary.get("throughput_items_per_s")
    e = result.summary.get("epoch_seconds_median")
    parts = []
    if s:
        parts.append(f"{s['median']:,.0f} {result.throughput_unit}/s ({describe_spread(s)})")
    if e:
        parts.append(f"{e['median']:.2f} s/epoch")
    mb = result.metrics.get("max_batch")
    if mb is not None:
        parts.append(f"max batch {'≥ ' if result.metrics.get('max_batch_at_limit') else ''}{mb:,}")
    busy = host_busy(result)
    if busy:  # its figures include waiting for the CPU: said as the figure is shown, not only in run.log
        parts.append(busy_note(busy))
    return ", ".join(parts) or "ok"


def describe_spread(summary: dict) -> str:
    """'cv 1.2% over 3 repeats', or '1 repeat' (one repeat has no spread: a cv of 0.0% would claim one)."""
    n = summary.get("n")
    if n is not None and n < 2:
        return "1 repeat"
    return f"cv {summary['cv']:.1%}" + (f" over {n} repeats" if n else "")


def print_plan(console, plan: "Plan", done: dict) -> None:
    """The plan table (one row per workload x model x engine) and the cell count with a
    rough time estimate for the run's device: printed before a run, and alone by
    `kit run --dry-run`."""
    from rich.table import Table

    from kit.env.record import device_kind
    from kit.runner.plan import estimate_plan_seconds, estimate_source
    from kit.results.cell_ids import CURVE_PARAM, cell_label

    kind = device_kind(plan.config.device)
    todo = [c for c in plan.cells if c.cell_id not in done]
    est = estimate_plan_seconds(plan, todo)
    table = Table(title=f"Plan: {len(plan.cells)} cells x {plan.config.repeats} repeats", show_lines=False)
    for col in ("workload", "model", "engine", "precisions"):
        table.add_column(col)
    groups: dict[tuple, list[str]] = {}
    for c in plan.cells:
        # a fastai engine shows its learner: "fastai (create_cnn)"
        ps = groups.setdefault((c.workload, c.model, cell_label(c.engine, c.params.get("learner"))), [])
        if c.precision not in ps:  # a batch curve has a cell per batch size and precision
            ps.append(c.precision)
    for (w, m, e), ps in groups.items():
        table.add_row(w, m, e, ", ".join(ps))
    console.print(table)
    curves = {c.workload: c.params[CURVE_PARAM] for c in plan.cells if c.params.get(CURVE_PARAM)}
    for workload, sizes in curves.items():
        console.print(f"batch curve: each {workload} cell at batch sizes " + ", ".join(map(str, sorted(sizes))))
    data = "synthetic data (throughput only)" if plan.config.data == "synthetic" else "real data"
    console.print(
        f"{len(todo)} cell(s) to run on {data}"
        + (f", {len(done)} already finished (resumed)" if done else "")
        + f"; rough estimate {_fmt_s(est)} ({estimate_source(kind)}; a guess, not a measurement; "
        "cells this machine cannot run are skipped in seconds)"
    )


def skip_kind(spec) -> tuple:
    """What a skipped cell predicts about the cells still to run (RunEta). Mostly a precision:
    (workload, precision). A batch-curve point skipped past the GPU's memory says nothing about
    other models or smaller batches: its kind is ("curve", workload, model, precision, engine,
    batch), and it predicts only the same cell at larger batches."""
    from kit.results.cell_ids import curve_batch

    batch = curve_batch(spec.params)
    if batch is None:
        return (spec.workload, spec.precision)
    return ("curve", spec.workload, spec.model, spec.precision, spec.engine, batch)


def _predicted_skip(kind: tuple, skipped: "set[tuple]") -> bool:
    if kind in skipped:
        return True
    if kind and kind[0] == "curve":
        return any(k[:5] == kind[:5] and k[5] <= kind[5] for k in skipped if k and k[0] == "curve")
    return False


class RunEta:
    """Time left in a run, from the cells measured so far and nothing else.

    Each cell weighs what the plan estimates for it (kit.runner.plan.estimate_seconds);
    the cells measured so far say how fast this machine is against those estimates:
    left = (their wall time / their estimates) x the estimates of the cells still to run,
    less what the cell in flight has already taken. A cell recorded skipped took no
    time and says nothing about speed (counting it, as a cells-per-second rate does,
    made three quick skips show "1 s left" for a 38 s run); a cell of the same workload
    and precision as one skipped earlier is expected to be skipped too (what a machine
    cannot run is mostly a precision: fp16 on a CPU, apex-* without Apex, bf16 before
    Ampere; a batch-curve point past the GPU's memory predicts only larger batches of its
    cell: skip_kind). Unknown (None) until a cell has been measured."""

    def __init__(self, estimates: dict[str, float], kinds: dict[str, tuple], done: "set[str] | None" = None):
        self.estimates = dict(estimates)
        self.kinds = dict(kinds)
        self.pending = [c for c in estimates if c not in (done or set())]
        self.skipped_kinds: set[tuple] = set()
        self.measured_s = 0.0
        self.measured_est = 0.0
        self.current: "str | None" = None
        self.current_since = 0.0

    def start(self, cell_id: str, now: float) -> None:
        self.current, self.current_since = cell_id, now

    def done(self, cell_id: str, status: str, seconds: float) -> None:
        if cell_id in self.pending:
            self.pending.remove(cell_id)
        if status == "skipped":
            self.skipped_kinds.add(self.kinds.get(cell_id))
        elif seconds > 0 and self.estimates.get(cell_id, 0) > 0:
            self.measured_s += seconds
            self.measured_est += self.estimates[cell_id]
        if self.current == cell_id:
            self.current = None

    def seconds_left(self, now: float) -> "float | None":
        if self.measured_est <= 0:
            return None
        scale = self.measured_s / self.measured_est
        left = 0.0
        for cell in list(self.pending):  # the bar redraws from its own thread
            if _predicted_skip(self.kinds.get(cell) or (), self.skipped_kinds):
                continue
            cost = scale * self.estimates.get(cell, 0.0)
            if cell == self.current:
                cost = max(0.0, cost - (now - self.current_since))
            left += cost
        return left


def _progress_columns(eta: "RunEta | None", clock):
    from rich.progress import BarColumn, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class Count(ProgressColumn):
        """'3/14' cells, or a cell's steps; 'warming up' while a cell has not reported a step."""

        def render(self, task):
            if task.total is None:
                return Text("warming up", style="progress.download")
            return Text(f"{task.completed:.0f}/{task.total:.0f}", style="progress.download")

    class Left(ProgressColumn):
        """The run's ETA (RunEta: measured cells only); a cell's own time left from its steps."""

        def render(self, task):
            if task.fields.get("run"):
                left = eta.seconds_left(clock()) if eta is not None else None
                return Text("ETA " + ("after a measured cell" if left is None else _fmt_clock(left)), style="progress.remaining")
            left = task.time_remaining
            return Text("" if left is None else f"{_fmt_clock(left)} left", style="progress.remaining")

    return (TextColumn("{task.description}"), BarColumn(), Count(), TimeElapsedColumn(), Left())


class RichUI(NullUI):
    """Rich progress: one overall bar (cells, with ETA) and one for the cell in flight."""

    def __init__(self, console=None, clock=time.monotonic):
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.clock = clock
        self.eta: "RunEta | None" = None
        self.progress = None
        self.overall = None
        self.current = None
        self._started = False

    def plan(self, plan, done):
        from rich.progress import Progress

        from kit.runner.plan import cell_seconds

        print_plan(self.console, plan, done)
        self.eta = RunEta(
            {c.cell_id: cell_seconds(plan.config, c) for c in plan.cells},
            {c.cell_id: skip_kind(c) for c in plan.cells},
            set(done),
        )
        self.progress = Progress(*_progress_columns(self.eta, self.clock), console=self.console, transient=False,
                                 get_time=self.clock)
        self.progress.start()
        self._started = True
        self.overall = self.progress.add_task("all cells", total=len(plan.cells), completed=len(done), run=True)

    def cell_start(self, spec):
        if self.eta is not None:
            self.eta.start(spec.cell_id, self.clock())
        if self.progress is not None:
            self.current = self.progress.add_task(f"  {spec.cell_id}", total=None)

    def cell_progress(self, spec, done, total, desc=""):
        if self.current is not None:
            self.progress.update(self.current, completed=done, total=total)

    def cell_done(self, spec, result):
        if self.eta is not None:
            seconds = (result.finished_at - result.started_at) if result.finished_at and result.started_at else 0.0
            self.eta.done(spec.cell_id, result.status, seconds)
        if self.current is not None:
            self.progress.remove_task(self.current)
            self.current = None
        if self.progress is None:
            return
        from rich.markup import escape

        self.progress.console.print(f"[bold]{escape(spec.cell_id)}[/bold]: {escape(describe_result(result))}", highlight=False)
        if self.overall is not None:
            self.progress.advance(self.overall)

    def cell_skipped_resume(self, spec):
        pass

    def close(self):
        if self._started:
            self.progress.stop()
            self._started = False


def _fmt_clock(s: float) -> str:
    s = int(round(max(0.0, s)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _fmt_s(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"
