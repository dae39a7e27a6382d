"""run_cell end to end on the CPU: valid CellResults for both engines, skips before any work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("torchvision")

from kit.bench.cifar import suite  # noqa: E402
from kit.results.schema import CellResult, CellSpec  # noqa: E402
from kit.bench.context import CellContext  # noqa: E402



class TinyArrays:
    """A made-up, CIFAR-shaped fixture (random pixels): not CIFAR, only the layout."""

    def __init__(self, n_train: int = 48, n_test: int = 16, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.train_x = rng.integers(0, 256, (n_train, 32, 32, 3), dtype=np.uint8)
        self.train_y = rng.integers(0, 100, n_train).astype(np.int64)
        self.test_x = rng.integers(0, 256, (n_test, 32, 32, 3), dtype=np.uint8)
        self.test_y = rng.integers(0, 100, n_test).astype(np.int64)
        self.info = {"source": "test fixture (random pixels)"}


def _ctx(events: list, repeats: int = 1, mode: str = "throughput", source: str = "synthetic") -> CellContext:
    return CellContext(device="cpu", data_dir=Path("unused"), data_source=source, repeats=repeats, mode=mode,
                       event=lambda kind, **f: events.append((kind, f)))


def _spec(precision: str, engine: str, **params) -> CellSpec:
    p = {"batch_size": 4, "image_size": 32, "epochs": 1, "steps": 2, "compile": "auto", "find_max_batch": False}
    p.update(params)
    return CellSpec("cifar", "resnet18", precision, engine, p)


@pytest.fixture
def tiny_data(monkeypatch):
    arrays = TinyArrays()
    monkeypatch.setattr(suite, "load_data", lambda ctx: arrays)
    return arrays


def _assert_valid(result: CellResult, repeats: int) -> dict:
    assert result.status == "ok", result.reason
    assert result.throughput_unit == "images"
    assert len(result.repeats) == repeats
    for rec in result.repeats:
        assert len(rec["epoch_seconds"]) == 1 and rec["epoch_seconds"][0] > 0
        assert rec["throughput_items_per_s"] > 0 and rec["time_to_first_step_s"] > 0
        assert rec["overflow_steps"] == 0 and rec["nan_losses"] == 0
        assert np.isfinite(rec["final_loss"])
        assert rec["achieved_tflops"] > 0
    assert result.summary["throughput_items_per_s"]["n"] == repeats
    assert result.metrics["flops_per_step"] == result.metrics["flops_per_image"] * 4  # batch 4
    assert result.data["synthetic"] is True and "SYNTHETIC" in result.data["label"]
    d = json.loads(json.dumps(result.to_dict()))  # serialisable, and reads back
    assert CellResult.from_dict(d).cell_id == result.cell_id
    return d


def test_torch_engine_cell_runs_on_cpu_and_is_valid(tiny_data):
    events: list = []
    result = suite.run_cell(_spec("fp32", "torch"), _ctx(events, repeats=2))
    _assert_valid(result, repeats=2)
    assert [r["seed"] for r in result.repeats] == [0, 1]
    assert result.metrics["precision"]["mode"] == "fp32"
    assert result.metrics["precision"]["cudnn_allow_tf32"] is False
    assert [f["epoch"] for k, f in events if k == "epoch"] == [0, 0]
    assert any(k == "step" for k, _ in events)


def test_torch_engine_amp_bf16_cell_runs_on_cpu(tiny_data, monkeypatch):
    monkeypatch.setattr(suite, "cpu_has_native_bf16", lambda: True)  # run the code path on any CPU
    result = suite.run_cell(_spec("amp-bf16", "torch"), _ctx([]))
    _assert_valid(result, repeats=1)
    assert result.metrics["precision"]["autocast_dtype"] == "torch.bfloat16"


def test_fastai_engine_cell_runs_on_cpu_and_is_valid(tiny_data):
    pytest.importorskip("fastai")
    events: list = []
    result = suite.run_cell(_spec("fp32", "fastai"), _ctx(events))
    d = _assert_valid(result, repeats=1)
    rec = d["repeats"][0]
    assert rec["fit_seconds"] >= sum(rec["epoch_seconds"])
    assert rec["data_wait_s"] >= 0 and rec["compute_s"] > 0
    assert result.metrics["precision"]["fastai"].startswith("no callback")
    assert [k for k, _ in events].count("epoch") == 1


def test_convergence_mode_reports_test_accuracy_per_epoch(monkeypatch):
    # 32 training images at batch 16: two full epochs of two steps, tested on 16 images
    monkeypatch.setattr(suite, "load_data", lambda ctx: TinyArrays(n_train=32))
    result = suite.run_cell(_spec("fp32", "torch", steps=None, epochs=2, batch_size=16),
                            _ctx([], mode="convergence", source="real"))
    rec = result.repeats[0]
    assert len(rec["metrics"]["test_accuracy"]) == 2
    assert 0.0 <= rec["final_metric"] <= 1.0
    assert rec["final_metric"] == rec["metrics"]["test_accuracy"][-1]
    assert result.data["synthetic"] is False


def test_bf16_on_a_cpu_without_bf16_instructions_is_skipped(monkeypatch):
    monkeypatch.setattr(suite, "cpu_has_native_bf16", lambda: False)
    result = suite.run_cell(_spec("amp-bf16", "torch"), _ctx([]))
    assert result.status == "skipped" and "bf16 instructions" in result.reason


@pytest.mark.parametrize("precision,engine,words", [
    ("amp-fp16", "torch", "fp16"),
    ("fp16-master", "torch", "fp16"),
    ("tf32", "torch", "TF32"),
    ("apex-o1", "torch", "Apex"),
    ("apex-o2", "fastai", "Apex"),
    ("amp-bf16", "fastai", "autocast"),
    ("amp-fp16", "fastai", "fp16"),
])
def test_cells_the_cpu_cannot_run_are_skipped_with_a_reason_before_any_work(monkeypatch, precision, engine, words):
    def no_data(ctx):
        raise AssertionError("a skipped cell must not load data")

    monkeypatch.setattr(suite, "load_data", no_data)
    result = suite.run_cell(_spec(precision, engine), _ctx([]))
    assert result.status == "skipped" and words in result.reason
    assert result.repeats == []


def test_max_batch_search_is_skipped_on_cpu_with_a_note(tiny_data):
    result = suite.run_cell(_spec("fp32", "torch", find_max_batch=True), _ctx([]))
    assert "max_batch" not in result.metrics
    assert any("find_max_batch skipped" in n for n in result.notes)


def test_max_batch_search_is_done_once_per_model_and_precision_and_flags_the_limit(monkeypatch):
    """The search runs once per (model, precision, size); the fastai cell reuses it; a search
    that never ran out of memory says the real limit is higher; cuDNN autotuning comes back on."""
    import torch

    from kit.bench.cifar import torch_engine

    tried: list[int] = []

    def fake_try_batch_fn(cfg, data, steps):
        assert steps == suite.SEARCH_STEPS_PER_TRY
        assert torch.backends.cudnn.benchmark is False

        def try_batch(n):
            tried.append(n)
            if n > cfg.batch_size * 50:  # "device memory" of this fake
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return try_batch

    monkeypatch.setattr(torch_engine, "try_batch_fn", fake_try_batch_fn)
    monkeypatch.setattr(suite, "_max_batch_cache", {})
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    cfg = suite.train_config(_spec("amp-fp16", "torch", batch_size=4), _ctx([]))
    notes: list[str] = []
    first = suite.max_batch_search(cfg, None, 50_000, _ctx([]), notes)
    assert first["max_batch"] == 200 and first["max_batch_at_limit"] is False
    assert first["max_batch_tries"][-1][0] in tried and len(tried) == len(first["max_batch_tries"])
    assert torch.backends.cudnn.benchmark is True
    n_tries = len(tried)
    again = suite.max_batch_search(cfg, None, 50_000, _ctx([]), notes)
    assert again == first and len(tried) == n_tries and "earlier in this run" in notes[-1]

    small = suite.train_config(_spec("fp32", "torch", batch_size=4), _ctx([]))
    capped = suite.max_batch_search(small, None, 100, _ctx([]), notes)
    assert capped["max_batch"] == 100 and capped["max_batch_at_limit"] is True
    assert "real limit is higher" in notes[-1]


def test_max_batch_search_stops_on_the_cells_stop_request_and_caches_nothing(monkeypatch):
    """A stop asked for during the search (ctx.should_stop: the run's signal record) ends it with
    KeyboardInterrupt before its next try; cuDNN autotuning comes back on and no answer is cached."""
    import torch

    from kit.bench.cifar import torch_engine

    tried: list[int] = []
    monkeypatch.setattr(torch_engine, "try_batch_fn", lambda cfg, data, steps: tried.append)
    monkeypatch.setattr(suite, "_max_batch_cache", {})
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    ctx = _ctx([])
    ctx.should_stop = lambda: len(tried) >= 2
    cfg = suite.train_config(_spec("amp-fp16", "torch", batch_size=4), ctx)
    with pytest.raises(KeyboardInterrupt):
        suite.max_batch_search(cfg, None, 50_000, ctx, [])
    assert tried == [64, 128]
    assert torch.backends.cudnn.benchmark is True and suite._max_batch_cache == {}
