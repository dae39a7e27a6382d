"""What the user sees while a run goes: the plan, a bar per cell, an overall ETA."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

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
        parts.append(f"{s['median']:,.0f} {result.throughput_unit}/s (cv {s['cv']:.1%})")
    if e:
        parts.append(f"{e['median']:.2f} s/epoch")
    mb = result.metrics.get("max_batch")
    if mb is not None:
        parts.append(f"max batch {'≥ ' if result.metrics.get('max_batch_at_limit') else ''}{mb:,}")
    return ", ".join(parts) or "ok"


def print_plan(console, plan: "Plan", done: dict, estimate_tflops: float = 10.0) -> None:
    """The plan table (one row per workload x model x engine) and the cell count with a
    rough time estimate: printed before a run, and alone by `kit run --dry-run`."""
    from rich.table import Table

    from kit.runner.plan import estimate_seconds

    todo = [c for c in plan.cells if c.cell_id not in done]
    est = sum(estimate_seconds(c, plan.config.repeats, estimate_tflops, plan.config.mode) for c in todo)
    table = Table(title=f"Plan: {len(plan.cells)} cells x {plan.config.repeats} repeats", show_lines=False)
    for col in ("workload", "model", "engine", "precisions"):
        table.add_column(col)
    groups: dict[tuple, list[str]] = {}
    for c in plan.cells:
        groups.setdefault((c.workload, c.model, c.engine), []).append(c.precision)
    for (w, m, e), ps in groups.items():
        table.add_row(w, m, e, ", ".join(ps))
    console.print(table)
    data = "synthetic data (throughput only)" if plan.config.data == "synthetic" else "real data"
    console.print(
        f"{len(todo)} cell(s) to run on {data}"
        + (f", {len(done)} already finished (resumed)" if done else "")
        + f"; rough estimate {_fmt_s(est)} (from model FLOPs at an assumed {estimate_tflops:g} TFLOP/s; a guess, not a measurement)"
    )


class RichUI(NullUI):
    """Rich progress: one overall bar (cells, with ETA) and one for the cell in flight."""

    def __init__(self, console=None, estimate_tflops: float = 10.0):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.console = console or Console(stderr=True)
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self.overall = None
        self.current = None
        self.estimate_tflops = estimate_tflops
        self._started = False

    def plan(self, plan, done):
        print_plan(self.console, plan, done, self.estimate_tflops)
        self.progress.start()
        self._started = True
        self.overall = self.progress.add_task("all cells", total=len(plan.cells), completed=len(done))

    def cell_start(self, spec):
        self.current = self.progress.add_task(f"  {spec.cell_id}", total=None)

    def cell_progress(self, spec, done, total, desc=""):
        if self.current is not None:
            self.progress.update(self.current, completed=done, total=total)

    def cell_done(self, spec, result):
        if self.current is not None:
            self.progress.remove_task(self.current)
            self.current = None
        self.progress.console.print(f"[bold]{spec.cell_id}[/bold]: {describe_result(result)}")
        if self.overall is not None:
            self.progress.advance(self.overall)

    def cell_skipped_resume(self, spec):
        pass

    def close(self):
        if self._started:
            self.progress.stop()
            self._started = False


def _fmt_s(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"
