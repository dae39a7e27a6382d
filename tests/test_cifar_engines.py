"""The two engines: same architecture, same data, same schedule shape, honest compile fallback."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from kit.bench.cifar import torch_engine  # noqa: E402
from kit.bench.cifar.gpu_data import PAD, DeviceData  # noqa: E402
from kit.bench.cifar.schedule import one_cycle_factor  # noqa: E402
from kit.bench.cifar.torch_engine import compile_candidates  # noqa: E402
from kit.bench.cifar.train_config import TrainConfig  # noqa: E402
from kit.bench.cifar.trainer import Trainer  # noqa: E402
from kit.bench.context import CellContext  # noqa: E402


@dataclass
class TinyArrays:
    """A made-up, CIFAR-shaped fixture (random pixels): not CIFAR, only the layout."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    info: dict = field(default_factory=lambda: {"source": "synthetic", "fixture": True})


def tiny_arrays(n_train: int = 48, n_test: int = 16, seed: int = 0) -> TinyArrays:
    rng = np.random.default_rng(seed)
    return TinyArrays(
        rng.integers(0, 256, (n_train, 32, 32, 3), dtype=np.uint8), rng.integers(0, 100, n_train).astype(np.int64),
        rng.integers(0, 256, (n_test, 32, 32, 3), dtype=np.uint8), rng.integers(0, 100, n_test).astype(np.int64),
    )


def ctx(repeats: int = 1, mode: str = "throughput") -> CellContext:
    return CellContext(device="cpu", data_dir=Path("unused"), data_source="synthetic", repeats=repeats, mode=mode)


def test_engines_build_the_same_architecture():
    pytest.importorskip("fastai")
    from kit.bench.cifar.fastai_engine import build_learner

    arrays = tiny_arrays()
    # the plain Learner (--learner scratch); create_cnn puts fastai's head on the body (tests/test_cifar_learner.py)
    cfg = TrainConfig("resnet18", "fp32", "cpu", batch_size=8, steps=1, learner="scratch")
    torch_model = Trainer(cfg, total_steps=1).model
    learn = build_learner(cfg, arrays, num_workers=0)
    a, b = torch_model.state_dict(), learn.model.state_dict()
    assert list(a) == list(b)
    assert all(a[k].shape == b[k].shape for k in a)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(torch_model) == count(learn.model) == 11_227_812  # torchvision resnet18, 100 classes
    assert a["fc.weight"].shape == (100, 512)


def test_engines_feed_the_same_normalised_test_images():
    pytest.importorskip("fastai")
    from kit.bench.cifar.fastai_engine import make_dls

    arrays = tiny_arrays()
    cfg = TrainConfig("resnet18", "fp32", "cpu", batch_size=8, steps=2)
    dls = make_dls(cfg, arrays, num_workers=0)
    xb, yb = dls.valid.one_batch()
    data = DeviceData.upload(arrays.train_x, arrays.train_y, arrays.test_x, arrays.test_y, "cpu")
    ref = data.to_input(data.test_x[:8], 32)
    assert torch.allclose(torch.as_tensor(xb).float(), ref, atol=1e-5)
    assert torch.equal(torch.as_tensor(yb).long(), torch.from_numpy(arrays.test_y[:8]))
    assert len(dls.train) == 2  # steps per epoch honoured


def test_fastai_training_batches_are_augmented_crops_of_the_training_images():
    pytest.importorskip("fastai")
    from kit.bench.cifar.fastai_engine import make_dls

    arrays = tiny_arrays(n_train=8)
    arrays.train_y = np.arange(8, dtype=np.int64)  # label = image index, to find each source
    cfg = TrainConfig("resnet18", "fp32", "cpu", batch_size=8, steps=1)
    dls = make_dls(cfg, arrays, num_workers=0)
    xb, yb = dls.train.one_batch()
    data = DeviceData.upload(arrays.train_x, arrays.train_y, arrays.test_x, arrays.test_y, "cpu")
    pixels = (torch.as_tensor(xb).float() * data.std + data.mean).mul(255).round().to(torch.uint8)
    changed = 0
    for img, label in zip(pixels, torch.as_tensor(yb).tolist()):
        src = arrays.train_x[label]
        padded = np.pad(src, ((PAD, PAD), (PAD, PAD), (0, 0)), mode="reflect")
        got = img.permute(1, 2, 0).numpy()
        crops = [padded[dy:dy + 32, dx:dx + 32][:, ::f] for dy in range(9) for dx in range(9) for f in (1, -1)]
        assert any(np.array_equal(got, c) for c in crops)
        changed += not np.array_equal(got, src)
    assert changed >= 1


def test_one_cycle_schedule_has_fastais_shape():
    total = 1000
    f = [one_cycle_factor(s, total) for s in range(total + 1)]
    assert f[0] == pytest.approx(1 / 25)
    assert max(f) == pytest.approx(1.0) and f.index(max(f)) == 250
    assert f[-1] == pytest.approx(1e-5)
    assert all(b >= a for a, b in zip(f[:250], f[1:251])) and all(b <= a for a, b in zip(f[250:], f[251:]))
    assert all(math.isfinite(one_cycle_factor(s, 2)) for s in range(3))  # tiny runs are fine


def test_compile_auto_is_eager_on_cpu_and_tries_cuda_graphs_first_on_cuda():
    assert compile_candidates("auto", "cpu") == [None]
    assert compile_candidates("off", "cuda:0") == [None]
    assert compile_candidates("auto", "cuda:0") == ["reduce-overhead", "default", None]
    assert compile_candidates("auto", "cuda:0", "amp-bf16") == [
        "cuda-graph-inductor", "cuda-graph", "reduce-overhead", "default", None]
    assert compile_candidates("on", "cuda:0", "amp-fp16")[:2] == ["cuda-graph-inductor", "cuda-graph"]
    # off: no Inductor, the captured step with eager kernels (to compare with); eager: neither
    assert compile_candidates("off", "cuda:0", "amp-bf16") == ["cuda-graph", None]
    assert compile_candidates("off", "cuda:0", "fp16-master") == [None]
    assert compile_candidates("off", "cpu", "fp32") == [None]
    assert compile_candidates("eager", "cuda:0", "amp-bf16") == [None]
    assert compile_candidates("auto", "cuda:0", "fp16-master")[0] == "reduce-overhead"
    assert compile_candidates("on", "cpu") == ["default", None]


def test_failed_compile_falls_back_to_eager_and_says_why(monkeypatch):
    def broken_compile(model, mode=None):
        def fail(*a, **k):
            raise RuntimeError("inductor exploded (test)")

        return fail

    monkeypatch.setattr(torch, "compile", broken_compile)
    arrays = tiny_arrays()
    data = DeviceData.upload(arrays.train_x, arrays.train_y, arrays.test_x, arrays.test_y, "cpu")
    cfg = TrainConfig("resnet18", "fp32", "cpu", batch_size=2, steps=1, compile="on")
    repeats, notes = torch_engine.run_repeats(cfg, data, ctx(repeats=2), repeats=2)
    assert [r["compile_mode"] for r in repeats] == ["eager", "eager"]
    assert len(notes) == 1 and "fell back to eager" in notes[0] and "inductor exploded" in notes[0]
    assert [r["seed"] for r in repeats] == [0, 1]


def test_an_untimed_warm_up_runs_before_the_first_repeat_and_is_in_no_repeat():
    """The warm-up (auto on CUDA; asked for here on the CPU) trains a throwaway model for
    a few steps before repeat 0: it is recorded in the cell's metrics, writes no journal
    events, and leaves the repeats, their seeds and their step counts as they were."""
    arrays = tiny_arrays()
    data = DeviceData.upload(arrays.train_x, arrays.train_y, arrays.test_x, arrays.test_y, "cpu")
    events: list[tuple] = []
    c = ctx(repeats=2)
    c.event = lambda kind, **f: events.append((kind, f.get("repeat")))
    metrics: dict = {}
    cfg = TrainConfig("resnet18", "fp32", "cpu", batch_size=4, steps=3, seed=7, untimed_warmup_steps=2)
    repeats, _ = torch_engine.run_repeats(cfg, data, c, repeats=2, metrics=metrics)
    assert metrics["untimed_warmup_steps"] == 2 and metrics["untimed_warmup_s"] > 0
    assert [r["seed"] for r in repeats] == [7, 8] and [r["steps"] for r in repeats] == [3, 3]
    assert events and all(rep in (0, 1) for _kind, rep in events)  # nothing from the warm-up


def test_the_untimed_warm_up_is_on_for_cuda_and_off_for_the_cpu_by_default():
    from kit.bench.cifar.graphed import WARMUP_BEFORE_CAPTURE

    steps = torch_engine.untimed_warmup_steps
    assert steps(TrainConfig("resnet18", "fp32", "cpu", steps=100), 100, None) == 0
    assert steps(TrainConfig("resnet18", "fp32", "cuda:1", steps=100), 100, None) == torch_engine.WARMUP_STEPS + 1
    assert steps(TrainConfig("resnet18", "fp32", "cuda", steps=100), 100, "reduce-overhead") == torch_engine.WARMUP_STEPS + 1
    assert steps(TrainConfig("resnet18", "fp32", "cuda", steps=100), 100, "cuda-graph") >= WARMUP_BEFORE_CAPTURE + 2
    assert 1 <= steps(TrainConfig("resnet18", "fp32", "cuda", steps=3), 3, None) <= 3  # never more than the run
    assert steps(TrainConfig("resnet18", "fp32", "cuda", untimed_warmup_steps=0), 100, None) == 0


def test_each_repeat_starts_from_a_fresh_model_seeded_by_repeat():
    cfg = TrainConfig("resnet18", "fp32", "cpu", batch_size=4, steps=1, seed=5)
    a = Trainer(cfg, 1).model.state_dict()["fc.weight"]
    b = Trainer(cfg, 1).model.state_dict()["fc.weight"]
    c = Trainer(TrainConfig("resnet18", "fp32", "cpu", batch_size=4, steps=1, seed=6), 1).model.state_dict()["fc.weight"]
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("dynamic", [False, True])
def test_fastai_fp16_master_is_the_articles_static_512_unless_dynamic_is_asked(dynamic):
    """The 2019 article's to_fp16() (fastai 1.0.38-1.0.42): a static scale of 512, never checked;
    --dynamic-loss-scale gives fastai's dynamic scaling. fastai's NonNativeMixedPrecision checks
    for overflow (a host read of every gradient) only when dynamic."""
    pytest.importorskip("fastai")
    from kit.bench.cifar.fastai_engine import build_learner

    cfg = TrainConfig("resnet18", "fp16-master", "cpu", batch_size=8, steps=1, dynamic_loss_scale=dynamic)
    learn = build_learner(cfg, tiny_arrays(), num_workers=0)
    (mp,) = [cb for cb in learn.cbs if type(cb).__name__ == "NonNativeMixedPrecision"]
    assert mp.dynamic is dynamic
    assert mp.loss_scale == (2.0**24 if dynamic else 512.0)


def test_the_loss_scale_options_reach_the_cifar_cells_only_when_given():
    from kit.results.schema import RunConfig
    from kit.runner.plan import build_plan

    plain = build_plan(RunConfig.of(suite="cifar", models=["resnet18"], precisions=["fp16-master"], engines=["fastai"]))
    assert "dynamic_loss_scale" not in plain.cells[0].params
    dyn = build_plan(RunConfig.of(suite="cifar", models=["resnet18"], precisions=["fp16-master"], engines=["fastai"],
                               dynamic_loss_scale=True))
    assert dyn.cells[0].params["dynamic_loss_scale"] is True
