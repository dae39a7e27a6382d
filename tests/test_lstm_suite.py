"""`kit run --suite lstm` cells: presets, vocabulary padding, skips, and a whole cell on the CPU."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from kit.bench.lstm import suite  # noqa: E402
from kit.bench.lstm.config import resolve  # noqa: E402
from kit.bench.lstm.model import LSTMModel, pad_vocab  # noqa: E402
from kit.errors import UsageError  # noqa: E402
from kit.results.schema import CellResult, CellSpec  # noqa: E402
from kit.bench.context import CellContext  # noqa: E402

TINY = {"emsize": 16, "nhid": 16, "nlayers": 1, "bptt": 8, "batch_size": 4, "lr": 5.0}


def tiny_corpus(words: int = 13, tokens: int = 1200):
    """A made-up 13-word corpus (test fixture), not padded by the 'loader'."""
    rng = np.random.default_rng(0)
    idx2word = [f"w{i}" for i in range(words)]
    split = lambda n: rng.integers(0, words, n).astype(np.int64)  # noqa: E731
    return SimpleNamespace(
        dictionary=SimpleNamespace(idx2word=idx2word, word2idx={w: i for i, w in enumerate(idx2word)}),
        train=split(tokens), valid=split(300), test=split(300),
        vocab_size=words, info={"dataset": "fixture", "source": "synthetic"},
    )


def make_ctx(events: list, progress: list, **kw) -> CellContext:
    base = dict(device="cpu", data_dir=Path("unused"), data_source="synthetic", seed=0, repeats=2)
    base.update(kw)
    return CellContext(
        **base,
        event=lambda kind, **f: events.append((kind, f)),
        progress=lambda done, total, desc="": progress.append((done, total)),
    )


@pytest.fixture
def corpus(monkeypatch):
    c = tiny_corpus()
    monkeypatch.setattr(suite, "load_corpus", lambda ctx, pad, splits=None: c)
    return c


# ---------------------------------------------------------------- presets
def test_presets_resolve_to_the_historical_values_with_overrides_on_top():
    apex = resolve({"preset": "apex-2018"})
    assert (apex.emsize, apex.nhid, apex.batch_size, apex.dropout, apex.static_loss_scale) == (200, 200, 20, 0.2, 1.0)
    tc = resolve({"preset": "tensor-core", "nhid": 1024, "emsize": 1024})
    assert (tc.emsize, tc.nhid, tc.batch_size, tc.pad_vocab_to, tc.static_loss_scale) == (1024, 1024, 24, 8, 128.0)


def test_epochs_default_to_one_for_throughput_and_the_presets_thirty_for_convergence():
    assert resolve({"preset": "apex-2018"}).epochs == 1
    assert resolve({"preset": "apex-2018"}, mode="convergence").epochs == 30
    assert resolve({"preset": "apex-2018", "epochs": 3}, mode="convergence").epochs == 3


def test_a_static_loss_scale_given_alone_means_static_scaling():
    cfg = resolve({"preset": "apex-2018", "static_loss_scale": 512.0})
    assert cfg.static_loss_scale == 512.0 and cfg.dynamic_loss_scale is False and cfg.user_loss_scale


def test_tied_weights_with_different_sizes_are_refused_with_a_clear_error():
    with pytest.raises(UsageError, match="emsize == nhid"):
        resolve({"preset": "apex-2018", "tied": True, "nhid": 256})
    with pytest.raises(UsageError, match="emsize == nhid"):
        LSTMModel(10, 8, 16, 1, tied=True)
    tied = LSTMModel(10, 8, 8, 1, tied=True)
    assert tied.decoder.weight is tied.encoder.weight


def test_fp16_master_uses_the_presets_static_scale_and_apex_keeps_its_dynamic_default():
    kw, notes = suite.precision_kwargs("fp16-master", resolve({"preset": "tensor-core"}))
    assert kw == {"static_loss_scale": 128.0, "dynamic_loss_scale": False}
    assert "static loss scale 128" in notes[0]
    kw, _ = suite.precision_kwargs("apex-o1", resolve({"preset": "tensor-core"}))
    assert kw == {"static_loss_scale": None, "dynamic_loss_scale": True}
    kw, _ = suite.precision_kwargs("apex-o2", resolve({"preset": "tensor-core", "static_loss_scale": 64.0}))
    assert kw == {"static_loss_scale": 64.0, "dynamic_loss_scale": False}


# ---------------------------------------------------------------- vocabulary padding
def test_vocabulary_is_padded_to_a_multiple_of_8_as_apex_did():
    assert pad_vocab(33_278, 8) == 33_280
    assert pad_vocab(33_280, 8) == 33_280
    assert pad_vocab(33_278, 1) == 33_278


def test_padded_vocabulary_ids_never_appear_in_the_data_and_the_model_is_built_for_them(corpus):
    spec = CellSpec("lstm", "tensor-core", "fp32", "kit", {"preset": "tensor-core", "max_batches": 2, **TINY})
    res = suite.run_cell(spec, make_ctx([], [], repeats=1))
    assert res.status == "ok"
    assert res.data["model_vocab_size"] == 16 and res.data["vocab_words"] == 13
    for split in (corpus.train, corpus.valid, corpus.test):
        assert split.max() < 13  # ids 13, 14, 15 exist only as padding rows


def test_synthetic_loader_padding_leaves_padding_ids_out_of_the_data():
    synthetic = pytest.importorskip("kit.data.synthetic")
    c = synthetic.wikitext2_like(seed=0, pad_vocab_to=8, tokens={"train": 3000, "valid": 400, "test": 400}, vocab=101)
    assert c.vocab_size == 104
    assert max(int(c.train.max()), int(c.valid.max()), int(c.test.max())) < 101


# ---------------------------------------------------------------- skips
@pytest.mark.parametrize("mode, words", [
    ("tf32", "TF32"),
    ("amp-fp16", "GPU"),
    ("fp16-master", "GPU"),
    ("apex-o1", "Apex"),
    ("apex-o2", "Apex"),
])
def test_modes_the_cpu_cannot_run_are_skipped_with_the_reason(mode, words, corpus):
    spec = CellSpec("lstm", "apex-2018", mode, "kit", {"preset": "apex-2018", **TINY})
    res = suite.run_cell(spec, make_ctx([], []))
    assert res.status == "skipped"
    assert words in res.reason
    assert res.throughput_unit == "tokens"


def test_an_autocast_mode_the_lstm_cannot_run_is_skipped_not_run_in_fp32(corpus, monkeypatch):
    monkeypatch.setattr(suite, "probe_lstm", lambda mode, device: ("PyTorch cannot run an LSTM in bf16 on this CPU", None))
    spec = CellSpec("lstm", "apex-2018", "amp-bf16", "kit", {"preset": "apex-2018", **TINY})
    res = suite.run_cell(spec, make_ctx([], []))
    assert res.status == "skipped" and "bf16" in res.reason


def test_the_cpu_bf16_probe_agrees_with_what_the_cpu_can_do(monkeypatch):
    monkeypatch.setattr(suite, "_probe_cache", {})
    reason, dtype = suite.probe_lstm("amp-bf16", "cpu")
    rnn = torch.nn.LSTM(4, 4)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out_dtype = rnn(torch.randn(2, 1, 4))[0].dtype
    except RuntimeError:
        out_dtype = None
    assert (reason is None) == (out_dtype is not None)
    assert dtype == (str(out_dtype).removeprefix("torch.") if out_dtype is not None else None)


def test_an_lstm_autocast_ran_in_another_dtype_is_noted():
    assert "float16" in suite.lstm_dtype_note("amp-bf16", "float16")
    assert suite.lstm_dtype_note("amp-bf16", "bfloat16") is None
    assert suite.lstm_dtype_note("fp32", None) is None


# ---------------------------------------------------------------- a whole cell
def test_a_cell_on_the_cpu_produces_a_complete_result(corpus):
    events: list = []
    progress: list = []
    params = {"preset": "apex-2018", "epochs": 2, "max_batches": 6, "tolerance": None, **TINY}
    spec = CellSpec("lstm", "apex-2018", "fp32", "kit", params)
    res = suite.run_cell(spec, make_ctx(events, progress, seed=5))

    assert res.status == "ok" and res.throughput_unit == "tokens"
    assert [r["seed"] for r in res.repeats] == [1111 + 5, 1111 + 5 + 1]
    for rec in res.repeats:
        assert len(rec["epoch_seconds"]) == 2 and all(s > 0 for s in rec["epoch_seconds"])
        assert rec["train_batches_per_epoch"] == 6
        assert rec["throughput_items_per_s"] > 0 and rec["time_to_first_step_s"] > 0
        assert rec["overflow_steps"] == 0 and rec["nan_losses"] == 0
        assert math.isfinite(rec["final_loss"]) and rec["final_metric"] > 1
        assert rec["final_metric"] == rec["metrics"]["test_perplexity"]
        assert len(rec["metrics"]["val_perplexity"]) == 2 and len(rec["metrics"]["lr"]) == 2
        assert rec["peak_memory_bytes"] is None  # the CPU keeps no trustworthy peak
    assert res.summary["throughput_items_per_s"]["n"] == 2
    assert "final_metric" in res.summary
    assert res.metrics["final_metric_name"] == "test_perplexity"
    assert res.metrics["parity_tolerance_rel"] == suite.SUITE.parity.tolerance == 0.02
    assert any("synthetic" in n for n in res.notes)
    assert sum(1 for kind, _ in events if kind == "epoch") == 4
    assert progress[-1] == (24, 24)  # 2 repeats x 2 epochs x 6 batches
    # valid JSON (no NaN/inf) that reads back into the schema
    text = json.dumps(res.to_dict(), allow_nan=False)
    assert CellResult.from_dict(json.loads(text)).cell_id == "lstm/apex-2018/fp32/kit"


def test_the_same_seed_reproduces_the_same_losses(corpus):
    spec = CellSpec("lstm", "apex-2018", "fp32", "kit", {"preset": "apex-2018", "max_batches": 3, "dropout": 0.2, **TINY})
    a = suite.run_cell(spec, make_ctx([], [], repeats=1))
    b = suite.run_cell(spec, make_ctx([], [], repeats=1))
    c = suite.run_cell(spec, make_ctx([], [], repeats=1, seed=1))
    assert a.repeats[0]["metrics"]["train_loss"] == b.repeats[0]["metrics"]["train_loss"]
    assert a.repeats[0]["metrics"]["train_loss"] != c.repeats[0]["metrics"]["train_loss"]


def test_a_stop_request_interrupts_the_cell(corpus):
    ctx = make_ctx([], [], repeats=1)
    ctx.should_stop = lambda: True
    spec = CellSpec("lstm", "apex-2018", "fp32", "kit", {"preset": "apex-2018", "max_batches": 25, **TINY})
    with pytest.raises(KeyboardInterrupt):
        suite.run_cell(spec, ctx)
