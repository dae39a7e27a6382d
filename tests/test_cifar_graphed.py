"""The CUDA-graph step's hand-written optimizer and device-side loss scaling,
checked on the CPU by running the same step body eagerly (capture=False)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from kit.bench.caps import HAS_FUSED_SGD  # noqa: E402
from kit.bench.cifar.graphed import GraphedTrainer  # noqa: E402
from kit.bench.cifar.schedule import one_cycle_factor  # noqa: E402
from kit.bench.cifar.train_config import TrainConfig  # noqa: E402
from kit.bench.cifar.trainer import Trainer  # noqa: E402


def _cfg(precision="fp32"):
    return TrainConfig(model="resnet18", precision=precision, device="cpu", batch_size=8, steps=3, compile="off", seed=3)


#: both forms of the update: torch's fused SGD kernel (torch 2.x) and the foreach fallback
UPDATES = [pytest.param(True, id="fused", marks=pytest.mark.skipif(not HAS_FUSED_SGD, reason="torch has no _fused_sgd_")),
           pytest.param(False, id="foreach")]


def _batch():
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 3, 32, 32, generator=g), torch.randint(0, 100, (8,), generator=g)


def _to_float64(trainer, lr_of_step=None) -> None:
    """Both steps in float64: in float32, three steps of a whole ResNet amplify the
    last-bit differences between two orders of summation (which depend on the CPU
    thread count) to ~1e-3; in float64 the same amplification stays far below the
    tolerance, so what is compared is the update rule, not the rounding."""
    trainer.model.double()
    if hasattr(trainer, "bufs"):
        trainer.bufs = [torch.zeros_like(p) for p in trainer.params]
        # torch.optim.SGD's lr is a Python float: the schedule again, in float64
        trainer.lr_sched = torch.tensor([lr_of_step(s) for s in range(trainer.last + 1)], dtype=torch.float64)


@pytest.mark.parametrize("fused", UPDATES)
def test_graphed_sgd_matches_torch_sgd_step_for_step(fused):
    cfg = _cfg()
    total = 3
    ref = Trainer(cfg, total)  # torch.optim.SGD(nesterov, weight decay) + LambdaLR one-cycle
    lr_max = cfg.max_lr()
    lr_of_step = lambda s: lr_max * one_cycle_factor(s, total)  # noqa: E731
    mine = GraphedTrainer(cfg, total, lr_of_step, capture=False)
    mine.fused_sgd = fused
    mine.model.load_state_dict(ref.model.state_dict())
    _to_float64(ref)
    _to_float64(mine, lr_of_step)
    x, y = _batch()
    x = x.double()
    start = {k: v.clone() for k, v in ref.model.state_dict().items()}
    for _ in range(total):
        l_ref = ref.step(x, y)
        l_mine = mine.step(x, y)
        assert float(l_mine) == pytest.approx(float(l_ref), rel=1e-6)
    moved = 0
    for (name, a), b in zip(ref.model.state_dict().items(), mine.model.state_dict().values()):
        assert torch.allclose(a, b, rtol=1e-7, atol=1e-9), name
        moved += int(a.is_floating_point() and not torch.equal(a, start[name]))
    assert moved > 0  # the steps did update the weights, so the comparison means something
    assert mine.counters()["steps"] == total


@pytest.mark.parametrize("fused", UPDATES)
@pytest.mark.parametrize("steps", [1, 4])
def test_graphed_sgd_update_rule_equals_torch_sgd_exactly_enough(steps, fused):
    """The update rule alone, on fixed gradients: no network, no thread-dependent sums."""
    cfg = _cfg()
    mine = GraphedTrainer(cfg, steps, lambda s: 0.05 * (s + 1), capture=False)
    mine.fused_sgd = fused
    g = torch.Generator().manual_seed(1)
    params = [torch.randn(5, 3, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    ref_params = [p.detach().clone().requires_grad_(True) for p in params]
    opt = torch.optim.SGD(ref_params, lr=0.05, momentum=cfg.momentum, nesterov=True, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: s + 1.0)
    mine.params = params
    mine.bufs = [torch.zeros_like(p) for p in params]
    mine.lr_sched = torch.tensor([0.05 * (s + 1) for s in range(steps + 1)], dtype=torch.float64)
    for _ in range(steps):
        grads = [torch.randn(5, 3, generator=g, dtype=torch.float64) for _ in params]
        for p, q, gr in zip(params, ref_params, grads):
            p.grad, q.grad = gr.clone(), gr.clone()
        mine._sgd()
        opt.step()
        sched.step()
    for p, q in zip(params, ref_params):
        assert torch.allclose(p.detach(), q.detach(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("fused", UPDATES)
def test_graphed_fp16_step_is_masked_out_on_overflow_and_the_scale_backs_off(fused):
    cfg = _cfg("amp-fp16")
    mine = GraphedTrainer(cfg, 4, lambda s: 0.1, capture=False)
    mine.fused_sgd = fused
    # an fp32 loss scaled past float32's range: the gradients overflow for real
    mine.scale.fill_(3.0e38)
    before = {k: v.clone() for k, v in mine.model.state_dict().items() if v.is_floating_point()}
    bufs_before = [b.clone() for b in mine.bufs]
    x, y = _batch()
    mine.step(x, y)
    c = mine.counters()
    assert c["overflow_steps"] == 1
    assert c["loss_scale_final"] == pytest.approx(1.5e38)
    for p, name in zip(mine.params, [n for n, q in mine.model.named_parameters() if q.requires_grad]):
        assert torch.equal(p.detach(), before[name]), f"{name} changed on an overflowed step"
    assert all(torch.equal(a, b) for a, b in zip(mine.bufs, bufs_before))
    # a sane scale: the next step updates the weights
    mine.scale.fill_(1024.0)
    mine.step(x, y)
    assert mine.counters()["overflow_steps"] == 1
    assert any(not torch.equal(p.detach(), before[n]) for p, n in
               zip(mine.params, [n for n, q in mine.model.named_parameters() if q.requires_grad]))


@pytest.mark.skipif(not HAS_FUSED_SGD, reason="torch has no _fused_sgd_")
def test_fused_and_foreach_updates_agree_through_an_overflowed_fp16_step():
    """Fixed float64 gradients, scaled as the fp16 step scales them, one of them overflowing
    on the second step: the fused kernel and the foreach form leave the same weights,
    momentum buffers, scale and overflow count after every step."""
    cfg = _cfg("amp-fp16")
    g = torch.Generator().manual_seed(5)
    shapes = [(4, 3), (7,), (2, 2, 3)]
    start = [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
    steps = [[torch.randn(s, generator=g, dtype=torch.float64) for s in shapes] for _ in range(4)]
    steps[1][2][0, 1, 2] = float("inf")
    trainers = []
    for fused in (True, False):
        t = GraphedTrainer(cfg, len(steps), lambda s: 0.1, capture=False)
        t.fused_sgd = fused
        t.params = [p.clone().requires_grad_(True) for p in start]
        t.bufs = [torch.zeros_like(p) for p in start]
        t.lr_sched = torch.tensor([0.1 * (s + 1) for s in range(len(steps) + 1)], dtype=torch.float64)
        t.scale.fill_(1024.0)
        trainers.append(t)
    for k, grads in enumerate(steps):
        for t in trainers:
            for p, gr in zip(t.params, grads):
                p.grad = gr * t.scale.to(torch.float64)
            t._sgd()
        fused, foreach = trainers
        for a, b in zip(fused.params + fused.bufs, foreach.params + foreach.bufs):
            assert torch.allclose(a.detach(), b.detach(), rtol=1e-12, atol=1e-14), f"step {k}"
        assert float(fused.scale) == float(foreach.scale)
        assert fused.counters()["overflow_steps"] == foreach.counters()["overflow_steps"] == (1 if k >= 1 else 0)
    assert not any(torch.equal(a.detach(), b) for a, b in zip(trainers[0].params, start))  # they moved


class _TinyNet(torch.nn.Module):
    """Conv, batch norm (running statistics: buffers the compiled step must update too),
    ReLU, pooling and a linear head: the ResNet's kinds of layer at a size Inductor
    compiles in seconds on a CPU."""

    def __init__(self, num_classes: int = 100):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, num_classes)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


def test_the_step_with_the_model_compiled_by_inductor_trains_like_the_eager_step(monkeypatch):
    """The cuda-graph-inductor step's body on the CPU (no capture): Inductor really compiles
    the model (C++ kernels here, Triton on a GPU), and three SGD steps with it leave the
    same weights, buffers and losses as the same step with eager kernels."""
    from kit.bench.cifar import models

    monkeypatch.setattr(models, "build", lambda name, num_classes=100: _TinyNet(num_classes))
    torch._dynamo.reset()
    cfg, total = _cfg(), 3
    lr_of_step = lambda s: 0.05 * one_cycle_factor(s, total)  # noqa: E731
    eager = GraphedTrainer(cfg, total, lr_of_step, capture=False)
    compiled = GraphedTrainer(cfg, total, lr_of_step, capture=False, inductor=True)
    compiled.model.load_state_dict(eager.model.state_dict())
    start = {k: v.clone() for k, v in eager.model.state_dict().items()}
    from torch._dynamo.utils import counters

    counters.clear()
    x, y = _batch()
    for _ in range(total):
        l_eager, l_compiled = eager.step(x, y), compiled.step(x, y)
        assert float(l_compiled) == pytest.approx(float(l_eager), rel=1e-4)
    assert counters["stats"]["unique_graphs"] >= 1, dict(counters["stats"])
    assert not counters["graph_break"], dict(counters["graph_break"])  # one graph: Inductor ran all of it
    moved = 0
    for (name, a), b in zip(eager.model.state_dict().items(), compiled.model.state_dict().values()):
        # float32, a different order of summation in Inductor's fused kernels: close, not equal
        assert torch.allclose(a.float(), b.float(), rtol=1e-3, atol=1e-5), name
        moved += int(a.is_floating_point() and not torch.equal(a, start[name]))
    assert moved >= 4  # conv, batch norm weight/bias/running statistics, head: the steps did train
    assert "compiled by Inductor" in compiled.describe()["step"]
    assert "Inductor" not in eager.describe()["step"]
    torch._dynamo.reset()


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16"])
@pytest.mark.parametrize("inductor", [False, True], ids=["eager-kernels", "inductor"])
def test_the_step_converting_the_uint8_batch_inside_trains_like_converting_it_before(monkeypatch, inductor, precision):
    """prepare= (what the torch engine passes): the step takes the data's uint8 batch and
    converts it (float, normalise, upsample) inside the step, so that on a GPU the conversion
    is part of the captured graph. Same losses and weights as converting before the step; with
    Inductor, the conversion and the model compile as one graph (no graph break)."""
    from kit.bench.cifar import models
    from kit.bench.cifar.gpu_data import DeviceData
    from kit.data.synthetic import cifar100_like

    monkeypatch.setattr(models, "build", lambda name, num_classes=100: _TinyNet(num_classes))
    torch._dynamo.reset()
    arrays = cifar100_like(0, n_train=100, n_test=100)
    data = DeviceData.upload(arrays.train_x, arrays.train_y, arrays.test_x, arrays.test_y, "cpu")
    x_u8, y = data.train_x[:8], data.train_y[:8]
    assert x_u8.dtype == torch.uint8
    cfg, total = _cfg(precision), 3  # amp-bf16: the conversion now runs inside the step's autocast
    lr_of_step = lambda s: 0.05 * one_cycle_factor(s, total)  # noqa: E731
    before = GraphedTrainer(cfg, total, lr_of_step, capture=False)
    inside = GraphedTrainer(cfg, total, lr_of_step, capture=False, inductor=inductor,
                            prepare=lambda u8: data.to_input(u8, 40))  # upsampled: 32 -> 40 px
    inside.model.load_state_dict(before.model.state_dict())
    from torch._dynamo.utils import counters

    counters.clear()
    for _ in range(total):
        l_before = before.step(data.to_input(x_u8, 40), y)
        l_inside = inside.step(x_u8, y)
        if inductor:
            assert float(l_inside) == pytest.approx(float(l_before), rel=1e-4)
        else:
            assert torch.equal(l_inside, l_before)
    assert inside.static_x.dtype == torch.uint8  # what the step keeps (and a GPU graph reads) is the raw batch
    for (name, a), b in zip(before.model.state_dict().items(), inside.model.state_dict().values()):
        if inductor:  # Inductor's own kernels round differently (in bf16: to bf16's 8 bits)
            tol = dict(rtol=1e-3, atol=1e-5) if precision == "fp32" else dict(rtol=2e-2, atol=1e-3)
            assert torch.allclose(a.float(), b.float(), **tol), name
        else:
            assert torch.equal(a, b), name
    if inductor:
        assert not counters["graph_break"], dict(counters["graph_break"])
    assert "inside the captured step" in inside.describe()["input"]
    assert "input" not in before.describe()
    torch._dynamo.reset()
