"""Rank functions that tests/test_ddp_cells.py runs in the ranks of a data-parallel cell (importable by name)."""

from __future__ import annotations

import os
import signal
import time

from kit.results.schema import CellResult


def kill_rank_1_in_tensor_core(spec, ctx):
    """The real rank worker, except that rank 1 of the tensor-core cell is killed (SIGKILL) as soon as
    DDP has wrapped its model: rank 0 is then inside the training loop, waiting for rank 1."""
    from kit.bench.distributed import state, worker

    if ctx.extra["ddp"]["rank"] == 1 and spec.model == "tensor-core":
        real = state.wrap_model

        def wrap_then_die(model):
            real(model)
            os.kill(os.getpid(), signal.SIGKILL)

        state.wrap_model = wrap_then_die
    return worker.run_rank(spec, ctx)


def rank_1_exits(spec, ctx):
    """No torch: rank 1 exits with code 9, rank 0 waits as if in a collective until told to stop."""
    if ctx.extra["ddp"]["rank"] == 1:
        os._exit(9)
    deadline = time.time() + 60
    while time.time() < deadline and not ctx.should_stop():
        time.sleep(0.05)
    return CellResult(spec.workload, spec.model, spec.precision, spec.engine, "ok", params=spec.params)


def rank_1_raises(spec, ctx):
    if ctx.extra["ddp"]["rank"] == 1:
        raise MemoryError("rank 1 ran out of memory")
    deadline = time.time() + 60
    while time.time() < deadline and not ctx.should_stop():
        time.sleep(0.05)
    return CellResult(spec.workload, spec.model, spec.precision, spec.engine, "ok", params=spec.params)


def report_rank(spec, ctx):
    """Every rank reports; rank 0 talks (its event must arrive, rank 1's must not)."""
    dp = ctx.extra["ddp"]
    ctx.event("note", message=f"from rank {dp['rank']}")
    return CellResult(spec.workload, spec.model, spec.precision, spec.engine, "ok", params=spec.params,
                      metrics={"rank": dp["rank"], "world_size": dp["world_size"], "device": ctx.device,
                               "threads": dp["threads"], "store": dp["store"]})
