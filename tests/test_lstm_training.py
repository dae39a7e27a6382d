"""The training loop: lr annealing, perplexity, loss scaling and overflow skips on the CPU."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from kit.bench.lstm.batching import batchify  # noqa: E402
from kit.bench.lstm.config import LSTMConfig  # noqa: E402
from kit.bench.lstm.model import LSTMModel  # noqa: E402
from kit.bench.lstm.train import SplitData, anneal_lr, evaluate, lm_loss, perplexity, run_repeat  # noqa: E402
from kit.bench.precision import Precision  # noqa: E402


def tiny_cfg(**kw) -> LSTMConfig:
    base = dict(preset="test", emsize=16, nhid=16, nlayers=1, lr=5.0, clip=0.25, epochs=1, batch_size=4,
                eval_batch_size=2, bptt=10, dropout=0.0, tied=False, seed=1, pad_vocab_to=1,
                static_loss_scale=1.0, dynamic_loss_scale=False)
    base.update(kw)
    return LSTMConfig(**base)


def cyclic_data(vocab: int = 5, repeats: int = 200) -> SplitData:
    """0 1 2 3 4 0 1 2 ...: every next token is certain, so a model can reach perplexity ~1."""
    ids = np.tile(np.arange(vocab, dtype=np.int64), repeats)
    return SplitData(batchify(ids, 4), batchify(ids[:100], 2), batchify(ids[:100], 2), vocab)


# ---------------------------------------------------------------- learning rate
def test_lr_is_kept_when_validation_loss_improves():
    assert anneal_lr(20.0, 5.0, None) == (20.0, 5.0)
    assert anneal_lr(20.0, 4.0, 5.0) == (20.0, 4.0)


def test_lr_is_divided_by_4_when_validation_loss_does_not_improve():
    assert anneal_lr(20.0, 5.0, 5.0) == (5.0, 5.0)  # equal is not an improvement
    assert anneal_lr(20.0, 6.0, 5.0) == (5.0, 5.0)
    assert anneal_lr(20.0, math.nan, 5.0) == (5.0, 5.0)


# ---------------------------------------------------------------- perplexity
def test_a_model_with_uniform_output_has_perplexity_equal_to_the_vocabulary():
    vocab = 37
    torch.manual_seed(0)
    model = LSTMModel(vocab, 8, 8, 1, dropout=0.0)
    with torch.no_grad():
        model.decoder.weight.zero_()
        model.decoder.bias.zero_()
    source = batchify(np.arange(300) % vocab, 3)
    loss = evaluate(model, model, source, bptt=7, prec=Precision("fp32", "cpu"))
    assert perplexity(loss) == pytest.approx(vocab, rel=1e-6)  # fp32 log-softmax rounding


def test_evaluation_with_max_batches_reads_only_that_many_chunks():
    torch.manual_seed(0)
    model = LSTMModel(11, 8, 8, 1, dropout=0.0)
    source = batchify(np.random.default_rng(0).integers(0, 11, 400), 2)
    prec = Precision("fp32", "cpu")
    first_only = evaluate(model, model, source, bptt=5, prec=prec, max_batches=1)
    assert first_only == pytest.approx(evaluate(model, model, source[:6], bptt=5, prec=prec))
    assert first_only != pytest.approx(evaluate(model, model, source, bptt=5, prec=prec))


def test_a_deterministic_corpus_is_learned_to_near_perplexity_one():
    rec = run_repeat(tiny_cfg(epochs=2), cyclic_data(), "fp32", "cpu", seed=1)
    assert rec["final_metric"] < 1.1
    assert rec["metrics"]["val_perplexity"][0] > rec["final_metric"] >= 1.0
    assert rec["metrics"]["lr"] == [5.0, 5.0]  # validation improved, so no annealing


def test_perplexity_of_a_diverged_loss_is_infinite_not_an_error():
    assert perplexity(1e6) == math.inf
    assert math.isnan(perplexity(math.nan))


# ---------------------------------------------------------------- loss scaling (fp16-master on the CPU)
def _half_step(scale: float, dynamic: bool) -> tuple[Precision, LSTMModel, list, bool, bool]:
    """One fp16-master step on the CPU (the availability check refuses fp16 there)."""
    torch.manual_seed(0)
    core = LSTMModel(7, 8, 8, 1, dropout=0.0)
    prec = Precision("fp16-master", "cpu", static_loss_scale=None if dynamic else scale,
                     dynamic_loss_scale=dynamic, init_scale=scale, check_available=False)
    model = prec.prepare_model(core)
    opt = torch.optim.SGD(prec.optimizer_params(model), lr=1.0)
    before = [p.detach().clone() for p in prec.optimizer_params(model)]
    data = batchify(np.arange(70) % 7, 2)
    logits, _ = model(data[:5], core.init_hidden(2))
    step = prec.backward_step(lm_loss(logits, data[1:6]), opt, clip=0.25)
    changed = any(not torch.equal(b, p) for b, p in zip(before, prec.optimizer_params(model)))
    return prec, core, before, step.skipped, changed


def test_static_loss_scale_overflow_takes_the_step_as_the_example_does():
    """The example's --fp16 --static-loss-scale checks nothing: the step is taken."""
    prec, core, _, skipped, changed = _half_step(scale=2.0**100, dynamic=False)
    assert core.decoder.weight.dtype == torch.float16  # the example's --fp16: a half model
    assert not skipped and changed
    assert prec.loss_scaler.scale == 2.0**100
    assert prec.counters()["overflow_steps"] == 1  # counted on the device, never acted on


def test_dynamic_loss_scale_overflow_skips_the_step_and_halves_the_scale():
    prec, _, _, skipped, changed = _half_step(scale=2.0**100, dynamic=True)
    assert skipped and not changed
    assert prec.loss_scaler.scale == 2.0**99
    assert prec.counters()["overflow_steps"] == 1


def test_a_safe_loss_scale_takes_the_step_on_the_fp32_masters():
    prec, core, _, skipped, changed = _half_step(scale=128.0, dynamic=False)
    assert not skipped and changed
    assert prec.loss_scaler.scale == 128.0
    assert prec.counters()["overflow_steps"] == 0
    # the half model was refreshed from the updated masters
    assert torch.equal(core.decoder.weight.float(), prec.master.master_params[-2].half().float())


def test_fp16_master_training_loop_counts_every_overflowing_step():
    """The whole loop, forced to overflow on every step: nothing trains, all is counted."""
    cfg = tiny_cfg(max_batches=4)
    kwargs = {"static_loss_scale": None, "dynamic_loss_scale": True, "init_scale": 2.0**120, "check_available": False}
    rec = run_repeat(cfg, cyclic_data(), "fp16-master", "cpu", seed=1, precision_kwargs=kwargs)
    assert rec["overflow_steps"] == 4
    assert rec["loss_scale_final"] == 2.0**116
    assert rec["nan_losses"] == 0


# ---------------------------------------------------------------- the example's evaluation rules
def test_test_perplexity_comes_from_the_best_validation_model(monkeypatch):
    """The example reloads the checkpoint of the best validation loss for the test split."""
    import kit.bench.lstm.train as train

    seen = []
    losses = iter([1.0, 5.0])  # epoch 1 validates better than epoch 2

    def fake_evaluate(model, core, source, bptt, prec, max_batches=None):
        seen.append(core.decoder.weight.detach().clone())
        return next(losses, 2.0)

    monkeypatch.setattr(train, "evaluate", fake_evaluate)
    rec = run_repeat(tiny_cfg(epochs=2, max_batches=3), cyclic_data(), "fp32", "cpu", seed=1)
    val1, val2, test = seen
    assert not torch.equal(val1, val2)  # epoch 2 trained on
    assert torch.equal(test, val1)  # but the test split saw epoch 1's model
    assert rec["metrics"]["test_model_epoch"] == 1


def test_fp16_master_loss_is_computed_on_half_logits_as_in_the_example():
    from kit.bench.lstm.train import loss_in_fp32

    assert not loss_in_fp32(Precision("fp16-master", "cpu", check_available=False))
    assert loss_in_fp32(Precision("fp32", "cpu"))
    logits = torch.randn(3, 2, 7).half()
    assert lm_loss(logits, torch.zeros(3, 2, dtype=torch.long), in_fp32=False).dtype == torch.float16
    assert lm_loss(logits, torch.zeros(3, 2, dtype=torch.long)).dtype == torch.float32


def _example_model_module(tmp_path):
    """Apex's own examples/word_language_model/model.py (241dd6c4), read from that commit's
    source (tests/fixtures/originals.py): the oracle, never copied into the kit."""
    import tarfile

    from fixtures.modules import load_file
    from fixtures.originals import apex_archive, missing_apex

    archive = apex_archive("241dd6c4")
    if not archive.is_file():
        pytest.skip(missing_apex("241dd6c4"))
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("examples/word_language_model/model.py"))
        (tmp_path / "apex_wlm_model.py").write_bytes(tar.extractfile(member).read())
    return load_file(tmp_path / "apex_wlm_model.py")


@pytest.mark.parametrize("tied", [False, True])
def test_initial_weights_equal_the_apex_examples_model(tmp_path, tied):
    ref_mod = _example_model_module(tmp_path)
    torch.manual_seed(1111)
    ref = ref_mod.RNNModel("LSTM", 50, 16, 16, 2, 0.2, tied)
    torch.manual_seed(1111)
    mine = LSTMModel(50, 16, 16, 2, dropout=0.2, tied=tied)
    ref_state = ref.state_dict()
    for name, value in mine.state_dict().items():
        assert torch.equal(value, ref_state[name]), name
