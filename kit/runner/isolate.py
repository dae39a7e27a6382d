"""A cell in a process of its own, so that nothing one cell does to its process reaches the next.

Why: Apex's ``amp.initialize`` patches torch functions for the whole process (an fp32 LSTM cell run
after an ``apex-o1`` cell failed with ``IndexError: tuple index out of range``); backend switches,
the CUDA caching allocator and a sticky CUDA error are process state too. TorchBench runs every
model in its own process for the same reason.

    parent (the runner; journal, progress, telemetry)     child (forked by the fork server, below)
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
``all`` or ``none``.

**The fork server.** A fresh interpreter per cell would import torch and torchvision again every time
(about 4 s a cell on an H200, 5.2 s on the 2-core CI machine: docs/measurements.md). Children are started
by multiprocessing's fork server instead: one clean process per run, started at the first isolated cell
(a new interpreter, never one that has touched CUDA), which imports ``PRELOAD`` once and then forks a
child per cell. Each child is a copy of that clean process: nothing a cell does reaches the server or
the next child, and CUDA is first initialised in the child. The server is started with the runner's
``sys.path`` as its PYTHONPATH (``_ensure_fork_server``), so it imports the runner's copy of the kit;
each child takes the parent's working folder and ``sys.path`` (multiprocessing's preparation data) and,
from ``_child_env``, the parent's environment variables as the cell starts. What a library read from
the environment when the server imported it (torch's, OpenMP's) stays as it was at the run's first
isolated cell; the kit itself changes no variable between cells. Where the fork server is not
available (not a POSIX system), children are spawned as before.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from kit import errors
from kit.results import precisions as precision_modes
from kit.results import suites
from kit.results.atomic import LogFileHandler
from kit.results.schema import CellResult, CellSpec
from kit.bench.context import CellContext

log = logging.getLogger("kit.run")

#: the Apex modes (kit.results.precisions: needs apex)
APEX_PRECISIONS = precision_modes.where(needs="apex")
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
            "repeats": ctx.repeats, "mode": ctx.mode, "extra": dict(ctx.extra), "profile_steps": ctx.profile_steps}


#: what the child calls, as "module:function" (tests give their own)
RUN_CELL = "kit.bench.api:run_cell"

#: what the fork server imports once, before it forks any child: kit.bench.preload, which imports
#: torch, torchvision and the bench, each on its own, leaving a failure to the cell (multiprocessing
#: skips a preload that raises ImportError, as on a host without torch, but dies on any other error)
PRELOAD = ("kit.bench.preload",)


def start_method() -> str:
    """"forkserver" where the platform has it (Linux, macOS), else "spawn"."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def _mp_context() -> Any:
    """The multiprocessing context children start from (never a plain fork of the runner, which may
    have CUDA initialised); for the fork server, started (or restarted, if it died) here."""
    method = start_method()
    mp = multiprocessing.get_context(method)
    if method == "forkserver":
        mp.set_forkserver_preload(list(PRELOAD))
        _ensure_fork_server()
    return mp


def _ensure_fork_server() -> None:
    """Start the fork server with this process's ``sys.path`` as its PYTHONPATH, and (Python 3.11+)
    PYTHONSAFEPATH so that its working folder does not come first. multiprocessing starts it as a new
    interpreter (``python -c ...``) that imports its preload from its own path, not the parent's:
    without this the preloaded kit.bench could come from another copy of the kit than the runner's
    (a source tree in the working folder). Before Python 3.11 the working folder still comes first."""
    from multiprocessing import forkserver

    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PYTHONSAFEPATH")}
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        forkserver.ensure_running()  # a no-op while the server lives
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _child_env() -> dict:
    """The parent's environment now, for the child to take (the fork server's is the one it started with)."""
    return dict(os.environ)


def run_isolated(spec: CellSpec, ctx: CellContext, log_path: Path | None = None, call: str = RUN_CELL) -> CellResult:
    """Run one cell through ``call`` (kit.bench.api.run_cell) in a child of its own; see the module's diagram."""
    return _run_children(spec, ctx, [_ctx_fields(ctx)], log_path, call)


#: what each rank of a data-parallel cell calls (tests give their own, e.g. one that kills a rank)
DDP_CALL = "kit.bench.distributed.worker:run_rank"


def run_data_parallel(spec: CellSpec, ctx: CellContext, world_size: int, log_path: Path | None = None,
                      store_dir: Path | None = None, call: str | None = None) -> CellResult:
    """One cell over ``world_size`` ranks, each a child process as above (kit.bench.distributed).

    Ranks get GPUs 0..N-1 of those visible (``ctx.device`` "cuda...") or share the CPU (gloo; each
    rank gets an equal share of the cores as its thread count). They meet through a FileStore in
    ``store_dir`` (no TCP port to choose). Only rank 0's events and progress reach ``ctx``, and its
    result is the cell's. A rank that raises, or dies, ends the cell: the others are stopped and
    the error names the rank; the runner records the cell as failed and keeps going."""
    import tempfile

    call = call or DDP_CALL
    tmp = tempfile.TemporaryDirectory(prefix="kit-ddp-", dir=str(store_dir) if store_dir else None)
    store = Path(tmp.name) / "store"
    threads = None
    if not ctx.device.startswith("cuda"):
        threads = max(1, (os.cpu_count() or 1) // world_size)
    fields = []
    for rank in range(world_size):
        f = _ctx_fields(ctx)
        if ctx.device.startswith("cuda"):
            f["device"] = f"cuda:{rank}"
        f["extra"]["ddp"] = {"rank": rank, "world_size": world_size, "store": str(store), "threads": threads,
                             "start_method": start_method()}
        fields.append(f)
    try:
        return _run_children(spec, ctx, fields, log_path, call)
    finally:
        tmp.cleanup()


def run_parallel_cell(spec: CellSpec, ctx: CellContext, log_path: Path | None = None,
                      store_dir: Path | None = None) -> CellResult:
    """A data-parallel cell (``spec.params["world_size"]``): with ``scaling_baseline``, the same cell on
    one rank first, then on all; records the scaling efficiency and the GPUs' interconnect."""
    from kit.bench.distributed.worker import unsupported_reason  # torch-free at import

    world = int(spec.params["world_size"])
    why = unsupported_reason(spec)
    if why:  # before any process starts
        return CellResult.skipped(spec, why, throughput_unit=suites.unit(spec.workload))
    baseline = None
    if spec.params.get("scaling_baseline") and world > 1:
        one = CellSpec(spec.workload, spec.model, spec.precision, spec.engine, dict(spec.params, world_size=1))
        ctx.event("note", message="scaling baseline: the same cell on one rank first")
        baseline = run_data_parallel(one, ctx, 1, log_path, store_dir)
    result = run_data_parallel(spec, ctx, world, log_path, store_dir)
    if result.status == "ok":
        dp = result.metrics.setdefault("data_parallel", {"world_size": world})
        if baseline is not None:
            dp["scaling"] = scaling_efficiency(result, baseline, world)
        if ctx.device.startswith("cuda"):
            from kit.env import nvml

            dp["interconnect"] = nvml.interconnect(nvml_indices(world))
    return result


def scaling_efficiency(result: CellResult, baseline: CellResult, world: int) -> dict:
    """Median total throughput on ``world`` ranks / (``world`` x the median on one rank), same run."""
    def median(c: CellResult) -> float | None:
        s = (c.summary or {}).get("throughput_items_per_s") or {}
        return s.get("median")

    total, one = median(result), median(baseline)
    out = {"baseline_world_size": 1, "baseline_throughput_items_per_s_median": one,
           "throughput_items_per_s_median": total,
           "method": "median total throughput / (world size x median throughput of the same cell on one rank, "
                     "measured just before in the same run)"}
    if baseline.status != "ok" or not one or not total:
        out["efficiency"] = None
        out["reason"] = f"the one-rank baseline did not measure a throughput ({baseline.status}: {baseline.reason})"
    else:
        out["efficiency"] = total / (world * one)
    return out


def nvml_indices(world: int) -> list[int]:
    """NVML's numbers of the GPUs that ranks 0..world-1 use (CUDA_VISIBLE_DEVICES renumbers them for torch)."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if visible and all(v.isdigit() for v in visible):
        return [int(v) for v in visible[:world]]
    return list(range(world))


def check_data_parallel(config: Any) -> None:
    """Before anything is written: the ranks ``--gpus`` asks for exist here (UsageError, exit 2)."""
    if not config.gpus:
        return
    if config.device.startswith("cuda:"):
        raise errors.UsageError(f"--gpus {config.gpus} runs on GPUs 0..{config.gpus - 1}; it cannot be combined with --device {config.device}.",
                                remedy="Use --device cuda (or auto), and choose the GPUs with CUDA_VISIBLE_DEVICES "
                                       "or kit launch --gpu 2,3.")
    if config.device == "cpu":
        return
    from kit.bench.distributed.worker import visible_gpu_count

    count = visible_gpu_count()
    if count == 0:
        raise errors.UsageError(f"--gpus {config.gpus}: no CUDA GPU is visible here.",
                                remedy="For data-parallel ranks on the CPU (gloo) add --device cpu; for GPUs see kit doctor.")
    if config.gpus > count:
        raise errors.UsageError(f"--gpus {config.gpus}: only {count} GPU(s) are visible here.",
                                remedy=f"Use --gpus {count} or fewer (CUDA_VISIBLE_DEVICES and kit launch --gpu decide which are visible).")


def _run_children(spec: CellSpec, ctx: CellContext, fields: list, log_path: Path | None, call: str) -> CellResult:
    """Start one child per entry of ``fields`` (one: an isolated cell; N: the ranks of a data-parallel
    cell), relay child 0's events and progress, return child 0's result once every child reported."""
    mp = _mp_context()
    stop = mp.Event()
    world = len(fields)
    children = []
    for rank, f in enumerate(fields):
        messages = mp.Queue()
        name = f"kit-cell {spec.cell_id}" + (f" rank {rank}" if world > 1 else "")
        proc = mp.Process(target=_child_main, name=name,
                          args=(call, spec.to_dict(), f, messages, stop, str(log_path) if log_path else None,
                                _child_env()))
        children.append((rank, proc, messages))

    def who(rank: int, proc: Any) -> str:
        return f"rank {rank} of {world} (pid {proc.pid})" if world > 1 else "the cell's own process"

    results: dict = {}
    try:
        for rank, proc, _ in children:  # inside the try: a rank that fails to start stops those started
            proc.start()
            log.info("cell %s: %s in its own process (pid %s)", spec.cell_id,
                     f"rank {rank} of {world}" if world > 1 else "running", proc.pid)
        while True:
            for rank, proc, messages in children:
                if rank in results:
                    continue
                try:
                    # wait on child 0 (the one that talks); only look at the others
                    msg = messages.get(timeout=POLL_S) if rank == 0 or 0 in results else messages.get_nowait()
                except queue.Empty:
                    if ctx.should_stop():
                        stop.set()
                    if proc.is_alive():
                        continue
                    msg = _last_message(messages)
                    if msg is None:
                        proc.join()
                        others = "; the other ranks were stopped" if world > 1 else ""
                        raise CellProcessDied(f"{who(rank, proc)} ended with exit code {proc.exitcode} "
                                              f"before it reported a result{others}")
                kind = msg[0]
                if kind == "event":
                    if rank == 0:
                        ctx.event(msg[1], **msg[2])
                elif kind == "progress":
                    if rank == 0:
                        ctx.progress(*msg[1])
                elif kind == "result":
                    results[rank] = CellResult.from_dict(msg[1])
                    if len(results) == world:
                        return results[0]
                elif kind == "interrupted":
                    raise KeyboardInterrupt
                elif kind in ("kit_error", "exception"):
                    # a rank whose peer died fails in its next collective: name the dead one first
                    dead = _dead_rank(children, results, rank) if world > 1 else None
                    if dead is not None:
                        d_rank, d_proc = dead
                        raise CellProcessDied(f"{who(d_rank, d_proc)} ended with exit code {d_proc.exitcode} before it "
                                              f"reported a result; rank {rank} then failed too ({msg[1] if kind == 'exception' else msg[2]})")
                    if kind == "exception":
                        log.error("cell %s failed in %s:\n%s", spec.cell_id, who(rank, proc), msg[2])
                        raise RuntimeError((f"rank {rank} of {world}: " if world > 1 else "") + msg[1])
                    cls = getattr(errors, msg[1], None)
                    if not (isinstance(cls, type) and issubclass(cls, errors.KitError)):
                        cls = errors.KitError
                    raise cls((f"rank {rank} of {world}: " if world > 1 else "") + msg[2], remedy=msg[3])
    except KeyboardInterrupt:
        _stop_children(children, stop)
        raise
    finally:
        _stop_children(children, stop)
        for _, _, messages in children:
            messages.close()


def _dead_rank(children: list, results: dict, failed: int, wait_s: float = 2.0) -> Any:
    """(rank, process) of another rank that ended without a result, waiting up to ``wait_s`` for it."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        for rank, proc, _ in children:
            if rank != failed and rank not in results and not proc.is_alive() and proc.exitcode not in (0, None):
                return rank, proc
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _stop_children(children: list, stop: Any) -> None:
    """Ask every child to stop, give them STOP_GRACE_S together, then end the rest."""
    import time

    procs = [proc for _, proc, _ in children if proc.pid is not None]  # those that were started
    if any(p.is_alive() for p in procs):
        stop.set()
        deadline = time.monotonic() + STOP_GRACE_S
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            log.warning("cell process %s did not stop in %.0f s; terminating it", p.pid, STOP_GRACE_S)
            p.terminate()
            p.join(2.0)
        if p.is_alive():
            p.kill()
        p.join()


def _last_message(messages: Any) -> Any:
    try:
        return messages.get(timeout=1.0)  # a result put just before the child exited
    except queue.Empty:
        return None


def _child_main(call: str, spec_dict: dict, ctx_fields: dict, messages: Any, stop: Any, log_path: str | None,
                env: dict | None = None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C (see the module docstring)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if env is not None and env != dict(os.environ):  # the parent's variables, not the fork server's
        os.environ.clear()
        os.environ.update(env)
    if log_path:
        handler = LogFileHandler(log_path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [cell process]: %(message)s"))
        root = logging.getLogger("kit")
        root.setLevel(logging.INFO)
        root.addHandler(handler)
    spec = CellSpec(**spec_dict)
    log.info("cell %s: process started (pid %d)", spec.cell_id, os.getpid())
    ctx = CellContext(
        device=ctx_fields["device"], data_dir=Path(ctx_fields["data_dir"]), data_source=ctx_fields["data_source"],
        seed=ctx_fields["seed"], repeats=ctx_fields["repeats"], mode=ctx_fields["mode"], extra=ctx_fields["extra"],
        profile_steps=ctx_fields.get("profile_steps", 0),
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
