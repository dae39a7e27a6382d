"""A cell in a process of its own, so that nothing one cell does to its process reaches the next.

Why: Apex's ``amp.initialize`` patches torch functions for the whole process (an fp32 LSTM cell run
after an ``apex-o1`` cell failed with ``IndexError: tuple index out of range``); backend switches,
the CUDA caching allocator and a sticky CUDA error are process state too. TorchBench runs every
model in its own process for the same reason.

    parent (the runner; journal, progress, telemetry)     child (spawned: a fresh interpreter)
    run_isolated(bench_call, spec, ctx) ---spec, ctx--->  kit.bench.api.run_cell(spec, ctx')
        ctx.event / ctx.progress   <---("event" | "progress", ...)---  ctx'.event / ctx'.progress
        Ctrl-C, SIGTERM, ctx.should_stop() ---stop Event--->  ctx'.should_stop()  (the bench polls it)
        CellResult                 <---("result", dict)---
        a KitError                 <---("kit_error", ...)---  re-raised in the parent as the same class
        another exception          <---("exception", ...)---  the cell fails with its message
        the child dies (segfault, OOM kill) -> the cell fails: "its process ended with exit code N"

The child ignores SIGINT: Ctrl-C reaches the parent, which asks the child to stop through the
shared event (the bench polls ``should_stop`` between steps), waits ``STOP_GRACE_S`` and then ends
it. Which cells run this way is ``RunConfig.isolate``: ``apex`` (the default: the Apex cells),
``all`` or ``none``. The cost is one interpreter start and the imports (torch) per isolated cell.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import signal
import traceback
from pathlib import Path
from typing import Any

from kit import errors
from kit.results.schema import CellResult, CellSpec
from kit.bench.context import CellContext

log = logging.getLogger("kit.run")

ISOLATE_CHOICES = ("apex", "all", "none")
APEX_PRECISIONS = ("apex-o1", "apex-o2")
#: seconds a stopped child gets to end its cell before it is terminated: short, because
#: `docker stop` (and kit launch) give the whole container 10 s after SIGTERM, and the
#: parent must still close the journal and write the bundle; an unfinished cell is
#: discarded either way (a resume runs it again)
STOP_GRACE_S = 3.0
#: how often the parent looks at the stop flag and the child's liveness (s)
POLL_S = 0.2


class CellProcessDied(RuntimeError):
    """The cell's own process ended without a result."""


def wants_isolation(spec: CellSpec, isolate: str) -> bool:
    if isolate == "all":
        return True
    if isolate == "apex":
        return spec.precision in APEX_PRECISIONS
    return False


def _ctx_fields(ctx: CellContext) -> dict:
    return {"device": ctx.device, "data_dir": str(ctx.data_dir), "data_source": ctx.data_source, "seed": ctx.seed,
            "repeats": ctx.repeats, "mode": ctx.mode, "extra": dict(ctx.extra)}


#: what the child calls, as "module:function" (tests give their own)
RUN_CELL = "kit.bench.api:run_cell"


def run_isolated(spec: CellSpec, ctx: CellContext, log_path: Path | None = None, call: str = RUN_CELL) -> CellResult:
    """Run one cell through ``call`` (kit.bench.api.run_cell) in a spawned child; see the module's diagram."""
    mp = multiprocessing.get_context("spawn")  # never fork a process that has CUDA initialised
    messages = mp.Queue()
    stop = mp.Event()
    proc = mp.Process(target=_child_main, name=f"kit-cell {spec.cell_id}",
                      args=(call, spec.to_dict(), _ctx_fields(ctx), messages, stop, str(log_path) if log_path else None))
    proc.start()
    log.info("cell %s: running in its own process (pid %s)", spec.cell_id, proc.pid)
    try:
        while True:
            try:
                msg = messages.get(timeout=POLL_S)
            except queue.Empty:
                if ctx.should_stop():
                    stop.set()
                if not proc.is_alive():
                    msg = _last_message(messages)
                    if msg is None:
                        proc.join()
                        raise CellProcessDied(f"the cell's own process ended with exit code {proc.exitcode} "
                                              "before it reported a result")
                else:
                    continue
            kind = msg[0]
            if kind == "event":
                ctx.event(msg[1], **msg[2])
            elif kind == "progress":
                ctx.progress(*msg[1])
            elif kind == "result":
                return CellResult.from_dict(msg[1])
            elif kind == "interrupted":
                raise KeyboardInterrupt
            elif kind == "kit_error":
                cls = getattr(errors, msg[1], None)
                if not (isinstance(cls, type) and issubclass(cls, errors.KitError)):
                    cls = errors.KitError
                raise cls(msg[2], remedy=msg[3])
            elif kind == "exception":
                log.error("cell %s failed in its own process:\n%s", spec.cell_id, msg[2])
                raise RuntimeError(msg[1])
    except KeyboardInterrupt:
        _stop_child(proc, stop)
        raise
    finally:
        if proc.is_alive():
            _stop_child(proc, stop)
        else:
            proc.join()
        messages.close()


def _last_message(messages: Any) -> Any:
    try:
        return messages.get(timeout=1.0)  # a result put just before the child exited
    except queue.Empty:
        return None


def _stop_child(proc: Any, stop: Any) -> None:
    stop.set()
    proc.join(STOP_GRACE_S)
    if proc.is_alive():
        log.warning("cell process %s did not stop in %.0f s; terminating it", proc.pid, STOP_GRACE_S)
        proc.terminate()
        proc.join(2.0)
    if proc.is_alive():
        proc.kill()
        proc.join()


def _child_main(call: str, spec_dict: dict, ctx_fields: dict, messages: Any, stop: Any, log_path: str | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C (see the module docstring)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if log_path:
        handler = logging.FileHandler(log_path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [cell process]: %(message)s"))
        root = logging.getLogger("kit")
        root.setLevel(logging.INFO)
        root.addHandler(handler)
    spec = CellSpec(**spec_dict)
    log.info("cell %s: process started (pid %d)", spec.cell_id, os.getpid())
    ctx = CellContext(
        device=ctx_fields["device"], data_dir=Path(ctx_fields["data_dir"]), data_source=ctx_fields["data_source"],
        seed=ctx_fields["seed"], repeats=ctx_fields["repeats"], mode=ctx_fields["mode"], extra=ctx_fields["extra"],
        event=lambda kind, **f: messages.put(("event", kind, f)),
        progress=lambda *a: messages.put(("progress", a)),
        should_stop=stop.is_set,
    )
    try:
        import importlib

        module, _, name = call.partition(":")
        if call == RUN_CELL:
            from kit.bench import api as bench

            bench.resolve_device(ctx.device)  # the same current GPU as in the parent
        result = getattr(importlib.import_module(module), name)(spec, ctx)
        messages.put(("result", result.to_dict()))
    except KeyboardInterrupt:
        messages.put(("interrupted",))
    except errors.KitError as exc:
        messages.put(("kit_error", type(exc).__name__, exc.message, exc.remedy))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the cell
        messages.put(("exception", f"{exc.__class__.__name__}: {exc}", traceback.format_exc()))
    finally:
        messages.close()
        messages.join_thread()  # every message is in the pipe before the process exits
