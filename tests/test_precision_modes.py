"""Precision modes on the CPU: each code path the CPU allows, forced overflows, skip reasons."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from kit.bench.precision import LossScaler, Precision, configure_backends, unavailable_reason  # noqa: E402


def _tiny(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))


def _batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(12, 8, generator=g), torch.randint(0, 4, (12,), generator=g)


def _train_step(prec: Precision, model: nn.Module, opt) -> torch.Tensor:
    x, y = _batch()
    with prec.autocast():
        out = model(x)
    loss = nn.functional.cross_entropy(out.float(), y)
    prec.backward_step(loss, opt)
    return loss


def _params(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().float().clone() for p in model.parameters()]


def test_fp32_step_changes_parameters_and_counts_no_overflow():
    prec = Precision("fp32", "cpu")
    model = prec.prepare_model(_tiny())
    opt = torch.optim.SGD(prec.optimizer_params(model), lr=0.1)
    before = _params(model)
    _train_step(prec, model, opt)
    assert any(not torch.equal(a, b) for a, b in zip(before, _params(model)))
    c = prec.counters()
    assert c["overflow_steps"] == 0 and c["nan_losses"] == 0 and c["steps"] == 1


def test_amp_bf16_runs_matmuls_in_bfloat16_on_cpu():
    prec = Precision("amp-bf16", "cpu")
    model = prec.prepare_model(_tiny())
    with prec.autocast():
        out = model(_batch()[0])
    assert out.dtype == torch.bfloat16
    assert next(model.parameters()).dtype == torch.float32  # weights stay fp32 under autocast
    opt = torch.optim.SGD(prec.optimizer_params(model), lr=0.1)
    loss = _train_step(prec, model, opt)
    assert torch.isfinite(loss)


def _fp16_master(**kw) -> tuple[Precision, nn.Module, torch.optim.Optimizer]:
    # fp16 on the CPU is refused in real runs; the bookkeeping is what we test here
    prec = Precision("fp16-master", "cpu", check_available=False, **kw)
    model = prec.prepare_model(_tiny())
    opt = torch.optim.SGD(prec.optimizer_params(model), lr=0.1)
    return prec, model, opt


def test_fp16_master_keeps_half_weights_with_fp32_batchnorm_and_fp32_masters():
    prec, model, _ = _fp16_master()
    dtypes = {type(m).__name__: m.weight.dtype for m in model.modules() if isinstance(m, (nn.Linear, nn.BatchNorm1d))}
    assert dtypes == {"Linear": torch.float16, "BatchNorm1d": torch.float32}
    assert all(p.dtype == torch.float32 for p in prec.optimizer_params(model))


def test_fp16_master_overflow_skips_step_keeps_weights_and_halves_dynamic_scale():
    prec, model, opt = _fp16_master(init_scale=2.0**40)  # 2^40 x loss overflows fp16 gradients
    before = _params(model)
    masters_before = [p.detach().clone() for p in prec.optimizer_params(model)]
    _train_step(prec, model, opt)
    assert all(torch.equal(a, b) for a, b in zip(before, _params(model)))
    assert all(torch.equal(a, b) for a, b in zip(masters_before, prec.optimizer_params(model)))
    c = prec.counters()
    assert c["overflow_steps"] == 1
    assert c["loss_scale_final"] == 2.0**39


def test_fp16_master_static_scale_never_skips_a_step_as_apex_static_loss_scaler():
    """Apex's static LossScaler has no overflow check (has_overflow is False): an
    overflowing step is taken, not skipped; the kit still counts it, on the device."""
    prec, model, opt = _fp16_master(static_loss_scale=1e30, dynamic_loss_scale=False)
    before = _params(model)
    _train_step(prec, model, opt)
    _train_step(prec, model, opt)
    assert any(not torch.equal(a, b) for a, b in zip(before, _params(model)))
    c = prec.counters()
    assert c["overflow_steps"] == 2 and c["loss_scale_final"] == 1e30


class _NoHostReads:
    """Makes every way of reading a tensor back to the host raise inside the block."""

    NAMES = ("item", "tolist", "numpy", "__bool__", "__float__", "__int__", "__index__")

    def __init__(self, monkeypatch):
        self.mp = monkeypatch

    def __enter__(self):
        def refuse(*_a, **_k):
            raise AssertionError("the step read a tensor back to the host (a device sync on a GPU)")

        for name in self.NAMES:
            self.mp.setattr(torch.Tensor, name, refuse)
        return self

    def __exit__(self, *exc):
        self.mp.undo()
        return False


def test_fp16_master_static_scale_step_reads_nothing_back_to_the_host(monkeypatch):
    prec, model, opt = _fp16_master(static_loss_scale=128.0, dynamic_loss_scale=False)
    x, y = _batch()
    with prec.autocast():
        loss = nn.functional.cross_entropy(model(x).float(), y)
    with _NoHostReads(monkeypatch):
        prec.backward_step(loss, opt, clip=0.25)
    assert prec.counters()["steps"] == 1


def test_fp16_master_dynamic_scale_reads_the_overflow_flag_once_per_step(monkeypatch):
    prec, model, opt = _fp16_master()
    reads = []
    real_item = torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "item", lambda t: reads.append(1) or real_item(t))
    _train_step(prec, model, opt)
    assert len(reads) == 1  # DynamicLossScaler must decide on the host: one sync, not one per parameter


def test_fp16_master_dynamic_scale_starts_at_apex_dynamic_loss_scaler_default():
    prec, _, _ = _fp16_master()
    assert prec.loss_scaler.dynamic and prec.loss_scaler.scale == 2.0**32
    assert prec.loss_scaler.growth_interval == 1000


def test_fp16_master_clean_step_updates_masters_and_copies_them_to_the_model():
    prec, model, opt = _fp16_master(init_scale=128.0)
    before = _params(model)
    _train_step(prec, model, opt)
    after = _params(model)
    assert any(not torch.equal(a, b) for a, b in zip(before, after))
    for p, mp in zip(prec.master.model_params, prec.master.master_params):
        assert torch.equal(p.detach().float(), mp.detach().to(p.dtype).float())
    assert prec.counters()["overflow_steps"] == 0


def test_amp_fp16_counts_a_step_the_grad_scaler_skipped():
    prec = Precision("amp-fp16", "cpu", check_available=False)
    model = prec.prepare_model(_tiny())
    opt = torch.optim.SGD(prec.optimizer_params(model), lr=0.1)
    first = next(model.parameters())
    handle = first.register_hook(lambda g: torch.full_like(g, float("inf")))  # force an overflow
    before = _params(model)
    _train_step(prec, model, opt)
    handle.remove()
    assert all(torch.equal(a, b) for a, b in zip(before, _params(model)))
    _train_step(prec, model, opt)  # a clean step after it
    c = prec.counters()
    assert c["overflow_steps"] == 1 and c["steps"] == 2
    assert c["loss_scale_final"] == 2.0**15


def test_nan_losses_are_counted():
    prec = Precision("fp32", "cpu")
    model = prec.prepare_model(_tiny())
    opt = torch.optim.SGD(prec.optimizer_params(model), lr=0.1)
    x, y = _batch()
    loss = nn.functional.cross_entropy(model(x), y) * float("nan")
    prec.backward_step(loss, opt)
    assert prec.counters()["nan_losses"] == 1


def test_dynamic_loss_scale_doubles_after_clean_interval():
    s = LossScaler(scale=8.0, dynamic=True, growth_interval=3)
    for _ in range(3):
        s.update(False)
    assert s.scale == 16.0
    s.update(True)
    assert s.scale == 8.0 and s.overflows == 1


@pytest.mark.parametrize("mode", ["tf32", "amp-fp16", "fp16-master", "apex-o1", "apex-o2"])
def test_modes_the_cpu_cannot_run_say_why(mode):
    reason = unavailable_reason(mode, "cpu")
    assert reason and len(reason) > 15
    with pytest.raises(ValueError):
        Precision(mode, "cpu")


@pytest.mark.parametrize("mode", ["fp32", "amp-bf16"])
def test_modes_the_cpu_can_run_have_no_skip_reason(mode):
    assert unavailable_reason(mode, "cpu") is None


def test_fp32_is_strict_and_tf32_switches_tf32_on():
    try:
        assert configure_backends("tf32") == {"matmul_allow_tf32": True, "cudnn_allow_tf32": True}
        assert torch.backends.cudnn.allow_tf32 is True
        assert configure_backends("fp32") == {"matmul_allow_tf32": False, "cudnn_allow_tf32": False}
        assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is False
    finally:
        configure_backends("fp32")


def test_an_apex_whose_amp_predates_opt_levels_is_skipped_with_the_reason(monkeypatch):
    """Apex 241dd6c4 (the cuda10 image's) has amp.init but no amp.initialize: apex-o1/o2 cannot
    run there, and the reason says so instead of failing in the cell."""
    import sys
    import types

    from kit.bench import precision

    apex = types.ModuleType("apex")
    amp = types.ModuleType("apex.amp")
    amp.init = lambda **kw: None
    apex.amp = amp
    monkeypatch.setitem(sys.modules, "apex", apex)
    monkeypatch.setitem(sys.modules, "apex.amp", amp)
    ok, why = precision.apex_amp_status()
    assert not ok and "opt levels" in why and "fp16-master" in why
    amp.initialize = lambda *a, **kw: a
    assert precision.apex_amp_status() == (True, "apex.amp available")


def test_a_cell_under_autocast_compiles_without_aotautograds_cache_and_says_why(monkeypatch):
    """PyTorch 2.11 keys AOTAutograd's on-disk cache without the autocast dtype: an amp-bf16 cell was
    served amp-fp16's compiled step (references/h100/explain/). A cell under autocast turns the cache
    off and records why; a cell without autocast leaves it as it was, and both start from a fresh Dynamo."""
    import torch._functorch.config

    from kit.bench import compilation as prec

    config = torch._functorch.config
    monkeypatch.setattr(config, "enable_autograd_cache", True)
    resets = []
    monkeypatch.setattr(torch._dynamo, "reset", lambda: resets.append(1))
    assert prec.fresh_compilation("fp32") is None and config.enable_autograd_cache is True
    assert prec.fresh_compilation("fp16-master") is None and config.enable_autograd_cache is True
    note = prec.fresh_compilation("amp-bf16")
    assert note == prec.AUTOGRAD_CACHE_OFF and "autocast dtype" in note and config.enable_autograd_cache is False
    monkeypatch.setattr(config, "enable_autograd_cache", True)
    assert prec.fresh_compilation("fp8-rowwise") == prec.AUTOGRAD_CACHE_OFF  # bf16 autocast around fp8 GEMMs
    assert len(resets) == 4
