"""Cell functions that tests/test_runner_isolate.py runs in a cell's own process (importable by name)."""

from __future__ import annotations

import math
import os
import sys
import time

from kit.errors import DataError
from kit.results.schema import CellResult

_REAL_FLOOR = math.floor


def _ok(spec, **metrics):
    return CellResult(spec.workload, spec.model, spec.precision, spec.engine, "ok", params=spec.params,
                      metrics=metrics, repeats=[{"throughput_items_per_s": 1.0}])


def patch_a_global(spec, ctx):
    """What Apex's amp.initialize does to torch, done to the stdlib: patch a function process-wide."""
    math.floor = lambda x: -1
    return _ok(spec, pid=os.getpid())


def check_the_global(spec, ctx):
    return _ok(spec, floor_is_real=math.floor is _REAL_FLOOR, pid=os.getpid())


def talk(spec, ctx):
    ctx.event("note", message="from the child")
    ctx.progress(1, 2, "half way")
    return _ok(spec, seed=ctx.seed, device=ctx.device)


def report_process(spec, ctx):
    """What the child started with: the parent's variable, torch already imported (the fork server's
    preload), CUDA not initialised, and the process it was forked from."""
    torch = sys.modules.get("torch")
    return _ok(spec, pid=os.getpid(), ppid=os.getppid(), var=os.environ.get("KIT_ISOLATE_TEST_VAR"),
               torch_loaded=torch is not None,
               cuda_initialised=bool(torch is not None and torch.cuda.is_initialized()),
               cwd=os.getcwd(),
               preloaded=getattr(sys.modules.get("kit.bench.preload"), "__file__", None),
               preload_failed=dict(getattr(sys.modules.get("kit.bench.preload"), "FAILED", {}) or {}))


def raise_data_error(spec, ctx):
    raise DataError("no such data set here", remedy="fetch it")


def raise_bug(spec, ctx):
    raise ZeroDivisionError("a bug in the cell")


def die(spec, ctx):
    os._exit(9)


def wait_for_stop(spec, ctx):
    deadline = time.time() + 60
    while time.time() < deadline:
        if ctx.should_stop():
            raise KeyboardInterrupt
        time.sleep(0.05)
    return _ok(spec)


def lstm_on_cyclic_corpus(spec, ctx):
    """The LSTM suite's run_cell on tests/test_lstm_gpu.py's predictable corpus, in a process of its own
    (how the GPU test runs the Apex modes: amp.initialize patches torch for the whole process)."""
    from kit.bench.lstm import suite
    from test_lstm_gpu import cyclic_corpus

    corpus = cyclic_corpus()
    suite.load_corpus = lambda ctx, pad, splits=None: corpus
    return suite.run_cell(spec, ctx)
