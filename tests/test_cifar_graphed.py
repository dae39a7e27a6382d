"""The CUDA-graph step's hand-written optimizer and device-side loss scaling,
checked on the CPU by running the same step body eagerly (capture=False)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from kit.bench.cifar.graphed import GraphedTrainer  # noqa: E402
from kit.bench.cifar.torch_engine import Trainer, TrainConfig, one_cycle_factor  # noqa: E402


def _cfg(precision="fp32"):
    return TrainConfig(model="resnet18", precision=precision, device="cpu", batch_size=8, steps=3, compile="off", seed=3)


def _batch():
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 3, 32, 32, generator=g), torch.randint(0, 100, (8,), generator=g)


def test_graphed_sgd_matches_torch_sgd_step_for_step():
    cfg = _cfg()
    total = 3
    ref = Trainer(cfg, total)  # torch.optim.SGD(nesterov, weight decay) + LambdaLR one-cycle
    lr_max = cfg.max_lr()
    mine = GraphedTrainer(cfg, total, lambda s: lr_max * one_cycle_factor(s, total), capture=False)
    mine.model.load_state_dict(ref.model.state_dict())
    x, y = _batch()
    for _ in range(total):
        l_ref = ref.step(x, y)
        l_mine = mine.step(x, y)
        assert float(l_mine) == pytest.approx(float(l_ref), rel=1e-4)
    for (name, a), b in zip(ref.model.state_dict().items(), mine.model.state_dict().values()):
        assert torch.allclose(a.float(), b.float(), rtol=1e-4, atol=1e-5), name
    assert mine.counters()["steps"] == total


def test_graphed_fp16_step_is_masked_out_on_overflow_and_the_scale_backs_off():
    cfg = _cfg("amp-fp16")
    mine = GraphedTrainer(cfg, 4, lambda s: 0.1, capture=False)
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
