"""What the user sees during `kit image build` and `kit launch` (rich, on stderr)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.launch.stacks import ImageSpec, first_build_note


class RichBuildUI:
    """A bar over the Dockerfile's steps, the current step, and the latest log line."""

    def __init__(self, console: Any = None):
        from rich.console import Console

        self.console = console or Console(stderr=True, highlight=False)
        self.progress: Any = None
        self.task: Any = None
        self.spec: ImageSpec | None = None

    def start(self, spec: ImageSpec, log_path: Path) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.spec = spec
        self.console.print(f"Building [bold]{spec.tag}[/bold] (stack {spec.stack}, base {spec.base}); full log: {log_path}")
        note = first_build_note(spec.stack)
        if note:
            self.console.print(note, markup=False, highlight=False)
        self.progress = Progress(
            TextColumn("[bold]step[/bold]"),
            MofNCompleteColumn(),
            BarColumn(bar_width=24),
            TimeElapsedColumn(),
            TextColumn("{task.description}", markup=False),
            console=self.console,
            transient=True,
        )
        self.progress.start()
        self.task = self.progress.add_task("starting", total=None)

    def note(self, text: str) -> None:
        """A line that stays (above the bar while it runs)."""
        (self.progress.console if self.progress is not None else self.console).print(text, markup=False, highlight=False)

    def step(self, number: int, total: int, instruction: str) -> None:
        if self.progress is None:
            return
        self.progress.update(self.task, completed=number - 1, total=total, description=_short(instruction))
        # Keep a permanent record of the steps above the bar.
        self.progress.console.print(f"  step {number}/{total}: {_short(instruction, 100)}", markup=False, highlight=False)

    def line(self, text: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=_short(text))

    def finish(self, ok: bool) -> None:
        if self.progress is not None:
            if ok:
                task = self.progress.tasks[0]
                self.progress.update(self.task, completed=task.total or 0)
            self.progress.stop()
            self.progress = None


class RichLaunchUI:
    """A line per finished cell with its headline number, and a bar over the cells."""

    def __init__(self, console: Any = None):
        from rich.console import Console

        self.console = console or Console(stderr=True, highlight=False)
        self.progress: Any = None
        self.task: Any = None

    def note(self, text: str) -> None:
        self.console.print(text, markup=False)

    def build_ui(self) -> RichBuildUI:
        return RichBuildUI(self.console)

    def started(self, container_name: str, image: str, command: list[str]) -> None:
        self.console.print(f"Started container {container_name} from {image}: kit {' '.join(command)}", markup=False, soft_wrap=True)
        self.console.print("Following the run's journal (Ctrl-C stops it and keeps finished cells)...", markup=False)

    def run_started(self, run_id: str, cells: list[str], finished: int = 0) -> None:
        """The run's cells; ``finished``: how many a resumed run's earlier sessions finished
        (the bar starts there)."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console.print(f"Run {run_id}: {len(cells)} cell(s)" + (f", {finished} finished before this resume" if finished else ""),
                           markup=False)
        self.progress = Progress(
            TextColumn("cells"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=self.console, transient=True,
        )
        self.progress.start()
        self.task = self.progress.add_task("cells", total=len(cells) or None, completed=finished)

    def cell_done(self, cell_id: str, headline: str, status: str) -> None:
        from rich.text import Text

        style = {"ok": "green", "skipped": "yellow", "failed": "red"}.get(status, "")
        out = self.progress.console if self.progress is not None else self.console
        # one print per line: the live bar redraws after each print, from the start of
        # the line, so a name printed alone (end="") was erased before its headline came
        out.print(Text.assemble((cell_id, style), ": ", headline), highlight=False)
        if self.progress is not None:
            self.progress.advance(self.task)

    def stopping(self) -> None:
        self.console.print("Stopping: the run keeps its finished cells and writes its bundle (Ctrl-C again to stop at once)...", markup=False)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _short(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
