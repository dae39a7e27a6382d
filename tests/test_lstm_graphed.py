"""The graphed LSTM engine on the CPU: its step (run eagerly here, replayed as one CUDA graph on a GPU)
trains exactly as the faithful engine does, and its device-side loss scale skips an overflowed step."""

from __future__ import annotations

import math
from contextlib import contextmanager

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from kit.bench.graphed_scaling import DeviceLossScale  # noqa: E402
from kit.bench.lstm import graphed, train  # noqa: E402
from kit.bench.lstm.batching import batchify, get_batch  # noqa: E402
from kit.bench.lstm.config import LSTMConfig  # noqa: E402
from kit.bench.lstm.train import SplitData  # noqa: E402
from kit.bench.precision import Precision  # noqa: E402


def cfg_of(**kw) -> LSTMConfig:
    base = dict(preset="test", emsize=16, nhid=16, nlayers=2, lr=5.0, clip=0.25, epochs=2, batch_size=4,
                eval_batch_size=2, bptt=7, dropout=0.3, tied=True, seed=3, pad_vocab_to=1,
                static_loss_scale=1.0, dynamic_loss_scale=False)
    base.update(kw)
    return LSTMConfig(**base)


def random_data(vocab: int = 23, n: int = 4 * 60 + 3, seed: int = 0) -> SplitData:
    """Random ids (synthetic, a test fixture): 60 rows of 4 columns, so with bptt 7 an epoch has
    8 full windows and a shorter last one (the graphed engine's eager tail)."""
    g = np.random.default_rng(seed)
    ids = g.integers(0, vocab, size=n).astype(np.int64)
    return SplitData(batchify(ids, 4), batchify(ids[:80], 2), batchify(ids[80:160], 2), vocab)


@contextmanager
def threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def faithful_losses(cfg, data, monkeypatch) -> tuple[list, dict]:
    seen: list = []
    real = Precision.backward_step

    def recording(self, loss, *a, **kw):
        seen.append(float(loss.detach()))
        return real(self, loss, *a, **kw)

    monkeypatch.setattr(Precision, "backward_step", recording)
    rec = train.run_repeat(cfg, data, "fp32", "cpu", cfg.seed)
    monkeypatch.setattr(Precision, "backward_step", real)
    return seen, rec


@pytest.mark.parametrize("tied,dropout", [(True, 0.3), (False, 0.0)])
def test_the_graphed_step_gives_the_faithful_engines_loss_at_every_step(tied, dropout, monkeypatch):
    """Same seed, same data: the per-step training losses (two epochs, the last window of each shorter
    than bptt, the learning rate annealed between them), the validation losses and the test perplexity
    of the graphed engine's step equal the faithful engine's (fp32; one thread, so that both sum in
    one order; the tolerance covers a rounding step of the fused SGD kernel)."""
    cfg = cfg_of(tied=tied, dropout=dropout)
    data = random_data()
    with threads(1):
        want, want_rec = faithful_losses(cfg, data, monkeypatch)
        got: list = []
        got_rec = graphed.run_repeat(cfg, data, "fp32", "cpu", cfg.seed, step_losses=got)
    assert len(want) == len(got) == 2 * 9
    assert got == pytest.approx(want, rel=1e-5, abs=1e-6)
    assert got[0] == want[0]  # the first step: the same model, the same dropout draws, before any update
    assert got_rec["metrics"]["val_loss"] == pytest.approx(want_rec["metrics"]["val_loss"], rel=1e-5)
    assert got_rec["final_metric"] == pytest.approx(want_rec["final_metric"], rel=1e-5)
    assert got_rec["metrics"]["lr"] == want_rec["metrics"]["lr"]
    assert got_rec["steps"] == want_rec["steps"] == 18
    assert got_rec["gpu_busy_fraction"] is None  # no GPU: nothing measured, nothing invented
    assert got_rec["precision"]["engine"] == "graphed"
    assert "eagerly" in got_rec["precision"]["step"]
    assert got[-1] < got[0]  # it trained


def test_the_window_copy_reads_the_rows_the_faithful_get_batch_reads():
    cfg = cfg_of(dropout=0.0)
    data = random_data()
    step = graphed.GraphedStep(cfg, data, "fp32", "cpu", 1)
    for k in range(3):
        step._gather()
        x, y = get_batch(data.train, k * cfg.bptt, cfg.bptt)
        assert torch.equal(step.static_x, x) and torch.equal(step.static_y, y)
    assert int(step.pos) == 3


def test_an_overflowed_scaled_step_changes_no_weight_and_the_scale_backs_off():
    """The engine's update with a device loss scale (as amp-fp16 has it): one gradient made infinite in
    the backward (as an fp16 overflow makes it); the step changes no weight, is counted, and the scale
    halves; without the overflow the next step trains."""
    cfg = cfg_of(dropout=0.0, tied=False)
    data = random_data()
    step = graphed.GraphedStep(cfg, data, "fp32", "cpu", 1)
    step.scaler = DeviceLossScale("cpu", 1024.0, dynamic=True, growth_interval=2000)
    step.skip_on_overflow = True
    before = [p.detach().clone() for p in step.params]
    hook = step.core.decoder.bias.register_hook(lambda g: g * float("inf"))
    step.window()
    hook.remove()
    c = step.counters()
    assert c["overflow_steps"] == 1 and c["loss_scale_final"] == 512.0
    assert all(torch.equal(p.detach(), b) for p, b in zip(step.params, before))
    step.window()
    assert step.counters()["overflow_steps"] == 1
    assert any(not torch.equal(p.detach(), b) for p, b in zip(step.params, before))


def test_a_static_scale_takes_an_overflowed_step_and_counts_it_as_apex_static_loss_scaler():
    cfg = cfg_of(dropout=0.0, tied=False)
    step = graphed.GraphedStep(cfg, random_data(), "fp32", "cpu", 1)
    step.scaler = DeviceLossScale("cpu", 128.0, dynamic=False)
    step.skip_on_overflow = False  # Apex's LossScaler: has_overflow is False, the step is always taken
    hook = step.core.decoder.bias.register_hook(lambda g: g * float("inf"))
    step.window()
    hook.remove()
    c = step.counters()
    assert c["overflow_steps"] == 1 and c["loss_scale_final"] == 128.0  # never changes
    # the step was taken, as Apex's static scaler takes it: the infinite gradient reached the weight
    assert not torch.isfinite(step.core.decoder.bias.detach()).all()


def test_a_dynamic_scale_never_falls_below_its_floor_and_grows_after_its_interval():
    s = DeviceLossScale("cpu", 2.0, dynamic=True, growth_interval=3, min_scale=1.0)
    for _ in range(3):
        s.found_inf.fill_(1.0)
        s.update()
    assert float(s.scale) == 1.0  # Apex's DynamicLossScaler: max(scale / 2, 1)
    s.found_inf.zero_()
    for _ in range(3):
        s.update()
    assert float(s.scale) == 2.0


@pytest.mark.parametrize("mode", ["apex-o1", "apex-o2", "fp8-rowwise"])
def test_a_precision_the_engine_cannot_capture_is_refused_with_the_reason(mode):
    why = graphed.unsupported_reason(mode)
    assert why and mode in why


def test_data_parallel_cells_are_refused_with_the_reason():
    assert "data-parallel" in graphed.unsupported_reason("fp32", {"world_size": 2})
    assert graphed.unsupported_reason("fp16-master") is None


def test_the_suite_skips_an_apex_cell_of_the_graphed_engine_and_runs_fp32(monkeypatch, tmp_path):
    from kit.bench.context import CellContext
    from kit.bench.lstm import suite
    from kit.results.schema import CellSpec

    ids = np.tile(np.arange(11, dtype=np.int64), 60)
    from types import SimpleNamespace

    corpus = SimpleNamespace(dictionary=SimpleNamespace(idx2word=[f"w{i}" for i in range(11)], word2idx={}),
                             train=ids, valid=ids[:200], test=ids[:200], vocab_size=11,
                             info={"dataset": "fixture", "source": "synthetic"})
    monkeypatch.setattr(suite, "load_corpus", lambda ctx, pad, splits=None: corpus)
    params = {"preset": "apex-2018", "emsize": 8, "nhid": 8, "nlayers": 1, "bptt": 5, "batch_size": 4,
              "epochs": 1, "max_batches": 6, "dropout": 0.0}
    ctx = CellContext(device="cpu", data_dir=tmp_path, data_source="synthetic", repeats=1)
    skipped = suite.run_cell(CellSpec("lstm", "apex-2018", "apex-o1", "graphed", params), ctx)
    assert skipped.status == "skipped" and "CUDA graph" in skipped.reason
    ok = suite.run_cell(CellSpec("lstm", "apex-2018", "fp32", "graphed", params), ctx)
    assert ok.status == "ok" and ok.engine == "graphed"
    assert ok.metrics["engine"] == "graphed"
    assert any("eagerly" in n for n in ok.notes)
    assert math.isfinite(ok.repeats[0]["final_metric"])
