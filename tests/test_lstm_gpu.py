"""The LSTM suite's CUDA paths (run on a GPU machine; skipped where there is none)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from kit.bench.lstm import suite  # noqa: E402
from kit.results.schema import CellSpec  # noqa: E402
from kit.bench.context import CellContext  # noqa: E402

TINY = {"emsize": 64, "nhid": 64, "nlayers": 1, "bptt": 16, "batch_size": 8, "lr": 10.0, "dropout": 0.0, "epochs": 2, "max_batches": 40}


def cyclic_corpus(vocab: int = 37):
    """0 1 2 ... 36 0 1 2 ...: a test fixture whose next token is always certain."""
    ids = np.tile(np.arange(vocab, dtype=np.int64), 200)
    idx2word = [f"w{i}" for i in range(vocab)]
    return SimpleNamespace(dictionary=SimpleNamespace(idx2word=idx2word, word2idx={}), train=ids, valid=ids[:2000],
                           test=ids[:2000], vocab_size=vocab, info={"dataset": "fixture", "source": "synthetic"})


@pytest.fixture
def corpus(monkeypatch):
    c = cyclic_corpus()
    monkeypatch.setattr(suite, "load_corpus", lambda ctx, pad: c)
    return c


@pytest.mark.parametrize("mode", ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-master", "apex-o1", "apex-o2"])
def test_every_mode_runs_or_says_why_not_on_the_gpu(mode, corpus):
    spec = CellSpec("lstm", "tensor-core", mode, "kit", {"preset": "tensor-core", **TINY})
    ctx = CellContext(device="cuda:0", data_dir=Path("unused"), data_source="synthetic", repeats=2)
    if mode.startswith("apex"):
        # in a process of its own, as `kit run` runs Apex cells: amp.initialize patches torch
        # process-wide, and the GPU tests after this one would otherwise fail (IndexError in apex/amp/utils.py)
        from kit.runner.isolate import run_isolated

        res = run_isolated(spec, ctx, call="isolate_cells:lstm_on_cyclic_corpus")
    else:
        res = suite.run_cell(spec, ctx)
    if res.status == "skipped":
        assert res.reason
        return
    assert res.status == "ok"
    assert res.data["model_vocab_size"] == 40  # 37 padded to a multiple of 8
    for rec in res.repeats:
        assert rec["throughput_items_per_s"] > 0
        assert rec["peak_memory_bytes"] > 0
        assert rec["nan_losses"] == 0
        # the fixture is fully predictable: every working mode learns it
        assert rec["final_metric"] is not None and rec["final_metric"] < 1.5, (mode, rec["metrics"])
    if mode == "fp16-master":
        assert res.repeats[0]["loss_scale_final"] == 128.0  # the tensor-core preset's static scale
    if mode in ("amp-fp16", "amp-bf16"):
        assert res.metrics["lstm_autocast_dtype"] in ("float16", "bfloat16")


def test_fp32_mode_switches_tf32_off_and_tf32_mode_on(corpus):
    for mode, expected in (("fp32", False), ("tf32", True)):
        spec = CellSpec("lstm", "apex-2018", mode, "kit", {"preset": "apex-2018", **TINY, "epochs": 1, "max_batches": 3})
        res = suite.run_cell(spec, CellContext(device="cuda:0", data_dir=Path("unused"), data_source="synthetic", repeats=1))
        if res.status == "skipped":
            continue
        assert res.metrics["precision"]["cudnn_allow_tf32"] is expected
        assert math.isfinite(res.repeats[0]["final_loss"])
