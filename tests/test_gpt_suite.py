"""`kit run --suite gpt` cells: settings, fp8 skip reasons, a whole cell on the CPU, and the
derived figures (parity against bf16, ratios against bf16)."""

from __future__ import annotations

import builtins
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from kit.bench import precision  # noqa: E402
from kit.bench.context import CellContext  # noqa: E402
from kit.bench.gpt import suite  # noqa: E402
from kit.bench.gpt.config import resolve  # noqa: E402
from kit.errors import UsageError  # noqa: E402
from kit.results.derive import derive  # noqa: E402
from kit.results.schema import CellResult, CellSpec, check_cell  # noqa: E402

TINY = {"preset": "tiny", "compile": "off"}


def fixture_corpus(words: int = 40, tokens: int = 3000):
    rng = np.random.default_rng(0)
    idx2word = [f"w{i}" for i in range(words)]
    split = lambda n: rng.integers(0, words, n).astype(np.int64)  # noqa: E731
    return SimpleNamespace(
        dictionary=SimpleNamespace(idx2word=idx2word, word2idx={w: i for i, w in enumerate(idx2word)}),
        train=split(tokens), valid=split(600), test=split(600),
        vocab_size=64, info={"dataset": "fixture", "source": "synthetic"},
    )


def make_ctx(**kw) -> CellContext:
    base = dict(device="cpu", data_dir=Path("unused"), data_source="synthetic", seed=0, repeats=2)
    base.update(kw)
    return CellContext(**base)


@pytest.fixture
def corpus(monkeypatch):
    c = fixture_corpus()
    monkeypatch.setattr(suite, "load_corpus", lambda ctx, pad, splits=None: c)
    return c


# ---------------------------------------------------------------- settings
def test_presets_resolve_with_overrides_on_top():
    one_b = resolve({"preset": "gpt-1b"})
    assert (one_b.d_model, one_b.n_layers, one_b.n_heads, one_b.seq_len, one_b.batch_size) == (2048, 16, 16, 1024, 16)
    small = resolve({"preset": "gpt2-small", "seq_len": 512, "batch_size": 8, "steps": 7})
    assert (small.d_model, small.seq_len, small.batch_size, small.steps) == (768, 512, 8, 7)
    assert resolve({"preset": "gpt2-small"}, "convergence").steps == 400


def test_a_width_not_divisible_by_the_head_count_is_refused_with_a_remedy():
    with pytest.raises(UsageError) as err:
        resolve({"preset": "gpt2-small", "n_heads": 11})
    assert "not divisible by --n-heads 11" in err.value.message and "e.g. 12" in (err.value.remedy or "")


def test_a_sequence_longer_than_the_corpus_allows_is_refused():
    with pytest.raises(UsageError, match="longer than WikiText-2's train split allows"):
        resolve({"preset": "tiny", "seq_len": 3_000_000})
    # convergence mode also reads the (smaller) valid split
    with pytest.raises(UsageError, match="valid split"):
        resolve({"preset": "tiny", "seq_len": 300_000}, "convergence")


def test_a_corpus_shorter_than_the_published_one_is_checked_when_the_cell_reads_it(corpus):
    spec = CellSpec("gpt", "tiny", "fp32", "kit", {**TINY, "seq_len": 5000})
    with pytest.raises(UsageError, match="train split allows \\(3,000 tokens"):
        suite.run_cell(spec, make_ctx())


def test_a_train_split_other_than_train_or_valid_is_refused_and_each_split_is_checked():
    from kit.bench.gpt.config import check_seq_len, splits_read

    with pytest.raises(UsageError, match="--train-split test: choose train or valid"):
        resolve({"preset": "tiny", "train_split": "test"})
    assert resolve({"preset": "tiny", "train_split": "valid"}, "convergence").heldout_split == "test"
    with pytest.raises(UsageError, match="longer than WikiText-2's valid split allows \\(217,646"):
        resolve({"preset": "tiny", "train_split": "valid", "seq_len": 250_000})
    with pytest.raises(UsageError, match="test split allows \\(50 tokens"):
        check_seq_len(100, {"train": 0, "valid": 1000, "test": 50}, "convergence", "valid")
    check_seq_len(100, {"train": 0, "valid": 1000, "test": 50}, "throughput", "valid")  # test is not read
    assert splits_read("train") is None and splits_read("valid") == ("valid", "test")


def test_train_split_valid_trains_on_valid_and_measures_the_heldout_loss_on_test(monkeypatch):
    c = fixture_corpus()
    c.train = c.train[:10]  # shorter than one window of the tiny preset: a cell that read it would be refused
    asked, held_from = [], []
    monkeypatch.setattr(suite, "load_corpus", lambda ctx, pad, splits=None: asked.append(splits) or c)
    real = suite.heldout_batches
    monkeypatch.setattr(suite, "heldout_batches", lambda ids, *a: held_from.append(ids) or real(ids, *a))
    spec = CellSpec("gpt", "tiny", "fp32", "kit", {**TINY, "steps": 4, "train_split": "valid"})
    result = suite.run_cell(spec, make_ctx(repeats=1, mode="convergence"))
    assert result.status == "ok" and asked == [("valid", "test")] and held_from[0] is c.test
    assert result.data["train_split"] == "valid" and result.data["heldout_split"] == "test"
    assert "from the valid split" in result.data["sampling"]
    assert any("trained on WikiText-2's valid split" in n and "held-out loss on its test split" in n for n in result.notes)
    with pytest.raises(UsageError, match="train split allows \\(10 tokens"):  # the same cell on the train split
        suite.run_cell(CellSpec("gpt", "tiny", "fp32", "kit", {**TINY, "steps": 4}), make_ctx(repeats=1))


# ---------------------------------------------------------------- fp8 availability
def test_fp8_is_skipped_on_the_cpu_with_the_reason(corpus):
    result = suite.run_cell(CellSpec("gpt", "tiny", "fp8-tensorwise", "kit", TINY), make_ctx())
    assert result.status == "skipped" and "compute capability 8.9+" in result.reason and "CPU" in result.reason


@pytest.mark.parametrize("cap,needle", [((8, 0), "this GPU is 8.0"), ((7, 5), "this GPU is 7.5")])
def test_fp8_is_skipped_on_a_gpu_before_ada(monkeypatch, cap, needle):
    monkeypatch.setattr(precision, "_cuda_capability", lambda device: cap)
    for mode in ("fp8-tensorwise", "fp8-rowwise"):
        reason = precision.unavailable_reason(mode, "cuda:0")
        assert reason and "8.9+" in reason and needle in reason


def test_fp8_without_torchao_is_skipped_with_the_reason(monkeypatch):
    monkeypatch.setattr(precision, "_cuda_capability", lambda device: (9, 0))
    real_import = builtins.__import__

    def no_torchao(name, *a, **k):
        if name == "torchao" or name.startswith("torchao."):
            raise ImportError("No module named 'torchao'")
        return real_import(name, *a, **k)

    monkeypatch.delitem(sys.modules, "torchao", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_torchao)
    reason = precision.unavailable_reason("fp8-rowwise", "cuda:0")
    assert reason and "torchao is not installed" in reason


def test_fp16_is_skipped_on_the_cpu(corpus):
    result = suite.run_cell(CellSpec("gpt", "tiny", "amp-fp16", "kit", TINY), make_ctx())
    assert result.status == "skipped" and "fp16" in result.reason


# ---------------------------------------------------------------- a whole cell
@pytest.mark.parametrize("mode", ["fp32", "amp-bf16"])
def test_a_cell_on_the_cpu_produces_a_complete_result(corpus, mode):
    events: list = []
    result = suite.run_cell(CellSpec("gpt", "tiny", mode, "kit", TINY),
                            make_ctx(event=lambda kind, **f: events.append(kind)))
    assert result.status == "ok" and result.throughput_unit == "tokens"
    check_cell(result.to_dict())
    assert len(result.repeats) == 2 and [r["seed"] for r in result.repeats] == [1337, 1338]
    first, second = result.repeats
    assert first["warmup_steps"] == 1 and first["steps"] == 1 + 4 and second["steps"] == 1 + 4
    for rec in result.repeats:
        assert rec["throughput_items_per_s"] > 0 and rec["time_to_first_step_s"] > 0
        assert rec["steady_tokens"] == 4 * 4 * 32  # the timed steps' tokens only
        assert rec["achieved_tflops"] == pytest.approx(result.metrics["flops_per_token"] * rec["throughput_items_per_s"] / 1e12)
    m = result.metrics
    assert m["compile"]["used"] is False and m["compile"]["reason"] == "--compile off"
    assert m["optimizer"].startswith("AdamW")
    assert m["final_metric_name"] == "train_loss" and m["parity_base"] == "amp-bf16"
    assert "synthetic" in " ".join(result.notes)
    assert result.data["model_vocab_size"] == 64
    assert events.count("note") == 2


def test_compile_auto_is_off_on_the_cpu_and_says_why(corpus):
    result = suite.run_cell(CellSpec("gpt", "tiny", "fp32", "kit", {"preset": "tiny"}), make_ctx(repeats=1))
    assert result.metrics["compile"]["used"] is False and "off on the CPU" in result.metrics["compile"]["reason"]


def test_a_failing_compile_falls_back_to_eager_and_records_the_reason(corpus, monkeypatch):
    from kit.bench.gpt import train

    calls = []

    def broken(model, state):
        calls.append(state.enabled)
        if state.enabled:
            def boom(x, y):
                raise RuntimeError("inductor: no working C++ compiler")
            return boom
        return real(model, state)

    real = train.apply_compile
    monkeypatch.setattr(train, "apply_compile", broken)
    monkeypatch.setattr(train, "compile_state", lambda req, dev: train.CompileState(req, True, "--compile on"))
    monkeypatch.setattr(suite, "compile_state", train.compile_state)
    result = suite.run_cell(CellSpec("gpt", "tiny", "fp32", "kit", {"preset": "tiny", "compile": "on"}), make_ctx(repeats=1))
    assert result.status == "ok" and calls == [True, False]
    assert "torch.compile failed, ran eager instead (RuntimeError: inductor: no working C++ compiler)" == result.metrics["compile"]["reason"]
    assert any(n.startswith("eager (not compiled)") for n in result.notes)


def test_convergence_mode_reports_the_heldout_loss_after_n_steps(corpus):
    result = suite.run_cell(CellSpec("gpt", "tiny", "fp32", "kit", {**TINY, "steps": 6}), make_ctx(repeats=1, mode="convergence"))
    rec = result.repeats[0]
    assert rec["steps"] == 6 and rec["final_metric"] == rec["metrics"]["heldout_loss"] > 0
    assert result.metrics["final_metric_name"] == "heldout_loss"
    assert "3 passes over WikiText-2" in result.metrics["convergence_steps_reason"]


def test_a_stop_request_interrupts_the_cell(corpus):
    with pytest.raises(KeyboardInterrupt):
        suite.run_cell(CellSpec("gpt", "tiny", "fp32", "kit", {**TINY, "steps": 20}), make_ctx(should_stop=lambda: True))


# ---------------------------------------------------------------- derived figures
def _cell(model: str, precision: str, tput: list, metric: float | None = None) -> CellResult:
    reps = [{"throughput_items_per_s": t, "final_metric": metric, "epoch_seconds_median": 1.0} for t in tput]
    from kit.results.stats import summarise_repeats

    return CellResult("gpt", model, precision, "kit", "ok", repeats=reps, summary=summarise_repeats(reps), throughput_unit="tokens")


def test_parity_compares_each_precision_with_bf16_within_one_percent():
    cells = [_cell("gpt2-small", "amp-bf16", [100.0], 4.00), _cell("gpt2-small", "fp8-tensorwise", [120.0], 4.03),
             _cell("gpt2-small", "amp-fp16", [95.0], 4.10), _cell("gpt2-small", "fp32", [10.0], 3.99)]
    rows = {r["precision"]: r for r in derive(cells, "convergence")["parity"]}
    assert set(rows) == {"fp8-tensorwise", "amp-fp16", "fp32"}
    assert rows["fp8-tensorwise"]["verdict"] == "matches amp-bf16" and rows["fp8-tensorwise"]["base"] == "amp-bf16"
    assert rows["amp-fp16"]["verdict"] == "worse than amp-bf16"
    assert rows["fp8-tensorwise"]["rule"] == "held-out loss within 1% of amp-bf16's"


def test_fp8_over_bf16_is_the_one_ratio_of_medians():
    cells = [_cell("gpt-1b", "amp-bf16", [100.0, 98.0, 102.0]), _cell("gpt-1b", "fp8-tensorwise", [115.0, 130.0, 110.0]),
             _cell("gpt-1b", "fp32", [10.0, 10.0, 10.0])]
    d = derive(cells, "throughput", environment={"peak_tflops_measured": {"available": True, "fp8": 1000.0}})
    (row,) = [r for r in d["bf16_ratios"] if r["precision"] == "fp8-tensorwise"]
    assert row["speedup_over_bf16"] == pytest.approx(115.0 / 100.0)
    speedups = {r["precision"]: r["speedup_over_fp32"] for r in d["performance_ratios"]}
    assert speedups["amp-bf16"] == pytest.approx(10.0)
