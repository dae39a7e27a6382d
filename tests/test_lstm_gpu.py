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
    monkeypatch.setattr(suite, "load_corpus", lambda ctx, pad, splits=None: c)
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


# ---------------------------------------------------------------- the graphed engine
@pytest.mark.parametrize("mode", ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-master", "apex-o1"])
def test_every_mode_of_the_graphed_engine_runs_captured_or_says_why_not(mode, corpus):
    spec = CellSpec("lstm", "tensor-core", mode, "graphed", {"preset": "tensor-core", **TINY, "dropout": 0.2})
    res = suite.run_cell(spec, CellContext(device="cuda:0", data_dir=Path("unused"), data_source="synthetic", repeats=1))
    if mode.startswith("apex"):
        assert res.status == "skipped" and "CUDA graph" in res.reason
        return
    assert res.status == "ok", res.reason
    rec = res.repeats[0]
    assert rec["graph_replays"] > 0  # the steps after warm-up were replays of the captured graph
    assert rec["nan_losses"] == 0
    assert 0 < rec["gpu_busy_fraction"] <= 1.0
    assert rec["final_metric"] is not None and rec["final_metric"] < 1.5, (mode, rec["metrics"])


def _graphed_step(mode: str, **cfg_kw):
    from kit.bench.lstm import graphed
    from kit.bench.lstm.batching import batchify
    from kit.bench.lstm.config import resolve
    from kit.bench.lstm.train import SplitData

    cfg = resolve({"preset": "apex-2018", **TINY, **cfg_kw})
    ids = cyclic_corpus().train
    data = SplitData(batchify(ids, cfg.batch_size, "cuda:0"), None, None, 40)
    kwargs = {"static_loss_scale": None, "dynamic_loss_scale": True} if mode == "fp16-master" else {}
    step = graphed.GraphedStep(cfg, data, mode, "cuda:0", 7, kwargs)
    for _ in range(graphed.WARMUP_BEFORE_CAPTURE):
        step.window()
    assert step.graph is not None
    return step


@pytest.mark.parametrize("mode", ["amp-fp16", "fp16-master"])
def test_a_captured_fp16_step_with_an_overflow_skips_it_changes_no_weight_and_the_scale_backs_off(mode):
    step = _graphed_step(mode)
    step.scaler.scale.fill_(3.0e38)  # read by the next replay: the fp16 gradients overflow for real
    before = [p.detach().clone() for p in step.params]
    masters = [p.detach().clone() for p in step.update_params]
    overflows = step.counters()["overflow_steps"]
    step.window()
    torch.cuda.synchronize()
    c = step.counters()
    assert step.replays == 1
    assert c["overflow_steps"] == overflows + 1
    assert c["loss_scale_final"] == pytest.approx(1.5e38)
    assert all(torch.equal(p.detach(), b) for p, b in zip(step.params, before)), "a weight changed on an overflowed step"
    assert all(torch.equal(p.detach(), b) for p, b in zip(step.update_params, masters))
    step.scaler.scale.fill_(1024.0)
    step.window()
    assert step.counters()["overflow_steps"] == overflows + 1
    assert any(not torch.equal(p.detach(), b) for p, b in zip(step.params, before))


def test_the_captured_step_follows_the_faithful_engines_losses_on_the_gpu(monkeypatch):
    """fp32 without dropout, same seed: the replays' losses follow the faithful engine's eager steps
    (cuDNN may pick other kernels for the two, so near, not bit for bit)."""
    from kit.bench.lstm import graphed, train
    from kit.bench.lstm.batching import batchify
    from kit.bench.lstm.config import resolve
    from kit.bench.lstm.train import SplitData
    from kit.bench.precision import Precision

    cfg = resolve({"preset": "apex-2018", **TINY, "epochs": 1, "max_batches": 30})
    ids = np.random.default_rng(0).integers(0, 40, size=20000)
    data = SplitData(batchify(ids, cfg.batch_size, "cuda:0"), batchify(ids[:2000], 10, "cuda:0"),
                     batchify(ids[:2000], 10, "cuda:0"), 40)
    want = []
    real = Precision.backward_step
    monkeypatch.setattr(Precision, "backward_step", lambda self, loss, *a, **kw: (want.append(float(loss.detach())), real(self, loss, *a, **kw))[1])
    train.run_repeat(cfg, data, "fp32", "cuda:0", 5)
    monkeypatch.setattr(Precision, "backward_step", real)
    got = []
    rec = graphed.run_repeat(cfg, data, "fp32", "cuda:0", 5, step_losses=got)
    assert rec["graph_replays"] == 30 - graphed.WARMUP_BEFORE_CAPTURE
    assert got == pytest.approx(want, rel=2e-3)
