"""What the runner hands to the benchmark code for one cell (torch-free: the runner imports it
at start-up; kit.bench.api and the suites receive it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


def _noop(*_a: Any, **_k: Any) -> None:
    return None


@dataclass
class CellContext:
    #: "cpu", "cuda" or "cuda:N" (already resolved by kit.bench.api.resolve_device)
    device: str
    data_dir: Path
    data_source: str  # "real" | "synthetic"
    seed: int = 0
    repeats: int = 3
    mode: str = "throughput"
    #: journal writer: event(kind, **fields); kinds used by bench: "step", "epoch", "note"
    event: Callable[..., Any] = _noop
    #: progress(done, total, description) -- units are steps of the whole cell
    progress: Callable[..., Any] = _noop
    #: set by the runner when the user asked to stop; bench code may poll it
    should_stop: Callable[[], bool] = lambda: False
    #: steps of the profiled window after the timed repeats (kit.bench.profile_window); 0: none
    #: (kit run --no-profile-window, and a context built by hand)
    profile_steps: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def stop_point(should_stop: Callable[[], bool]) -> None:
    """A place in a cell's loop where a stop request ends the cell: raises KeyboardInterrupt when
    ``should_stop()`` says so. Every long loop of the bench code passes through one (at each
    training step or every few, through StepTally, and at each try of the batch search), because the
    signal handler's own KeyboardInterrupt can be lost where it lands (a weakref callback of
    PyTorch's compiler), and only the loop's own check then stops the run (kit.runner.stop_signals)."""
    if should_stop():
        raise KeyboardInterrupt("stop requested")


class StepTally:
    """A training loop's progress: ``step()`` after every step reports the steps done to ``report``
    once ``every`` of them have gathered, and then passes a stop point (so a stop request is heard
    within ``every`` steps without a call into the runner per step); ``flush()`` after the loop
    reports the rest."""

    def __init__(self, report: Callable[[int], Any], should_stop: Callable[[], bool], every: int):
        self.report = report
        self.should_stop = should_stop
        self.every = every
        self.pending = 0

    def step(self) -> None:
        self.pending += 1
        if self.pending >= self.every:
            self.flush()
            stop_point(self.should_stop)

    def flush(self) -> None:
        if self.pending:
            self.report(self.pending)
            self.pending = 0
