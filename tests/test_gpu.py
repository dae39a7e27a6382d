"""GPU tests: run on a machine with an NVIDIA GPU (`make test-gpu`); CI has none and skips them.

They exercise every precision mode on CUDA, a *real* fp16 overflow handled by
the loss scalers, NVML telemetry on a busy GPU, and doctor on a real driver.
"""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402


def _tiny_cnn():
    return nn.Sequential(
        # enough capacity to memorise one fixed batch: every mode must drive the loss down
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Flatten(), nn.Linear(16 * 32 * 32, 10),
    )


@pytest.mark.parametrize("mode", ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-master"])
def test_every_precision_mode_trains_on_cuda(mode):
    from kit.bench.precision import Precision, unavailable_reason

    device = "cuda:0"
    reason = unavailable_reason(mode, device)
    if reason:
        pytest.skip(reason)
    torch.manual_seed(0)
    prec = Precision(mode, device)
    model = prec.prepare_model(_tiny_cnn().to(device))
    opt = torch.optim.SGD(prec.optimizer_params(model), lr=0.01, momentum=0.9)
    model, opt = prec.wrap(model, opt)
    x = torch.randn(64, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (64,), device=device)
    losses = []
    for _ in range(30):
        with prec.autocast():
            loss = nn.functional.cross_entropy(model(x).float(), y)
        prec.backward_step(loss, opt)
        losses.append(loss.item())
    counters = prec.counters()
    assert counters["nan_losses"] == 0
    assert losses[-1] < losses[0] * 0.5, f"{mode} did not learn: {[round(v, 3) for v in losses]}"
    if mode == "fp16-master":
        assert next(model.parameters()).dtype == torch.float16


def test_real_fp16_overflow_skips_the_step_and_halves_the_scale():
    """Gradients of a huge loss overflow fp16 for real; both scalers must skip and back off."""
    from kit.bench.precision import Precision

    device = "cuda:0"
    for mode in ("amp-fp16", "fp16-master"):
        torch.manual_seed(0)
        prec = Precision(mode, device)
        model = prec.prepare_model(nn.Linear(8, 8).to(device))
        opt = torch.optim.SGD(prec.optimizer_params(model), lr=0.1)
        before = [p.detach().clone() for p in model.parameters()]
        x = torch.randn(4, 8, device=device)
        with prec.autocast():
            out = model(x)
        loss = out.float().pow(2).sum() * 1e6  # x 65536 loss scale -> inf in fp16 grads
        prec.backward_step(loss, opt)
        c = prec.counters()
        assert c["overflow_steps"] == 1, (mode, c)
        # GradScaler starts at 2^16, Apex's DynamicLossScaler (fp16-master) at 2^32: both halve
        assert c["loss_scale_final"] == prec.init_scale / 2, (mode, c)
        for b, p in zip(before, model.parameters()):
            assert torch.equal(b, p.detach()), f"{mode} changed weights on an overflowed step"


def test_fp16_master_static_scale_step_makes_no_host_sync():
    """Apex's static LossScaler checks nothing, so the step never waits for the GPU:
    torch's sync debug mode turns any synchronising call into an error."""
    from kit.bench.precision import Precision

    device = "cuda:0"
    torch.manual_seed(0)
    prec = Precision("fp16-master", device, static_loss_scale=128.0, dynamic_loss_scale=False)
    model = prec.prepare_model(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to(device))
    opt = torch.optim.SGD(prec.optimizer_params(model), lr=0.1, momentum=0.9)
    x = torch.randn(32, 64, device=device)
    y = torch.randint(0, 10, (32,), device=device)
    for _ in range(2):
        out = model(x)
        loss = nn.functional.cross_entropy(out.float(), y)
        torch.cuda.set_sync_debug_mode("error")
        try:
            prec.backward_step(loss, opt, clip=0.25)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert prec.counters()["overflow_steps"] == 0


def test_telemetry_samples_a_busy_gpu():
    from kit.env import telemetry

    sampler = telemetry.start_for_device("cuda:0")
    a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
    t0 = time.time()
    while time.time() - t0 < 3:
        a @ a
    torch.cuda.synchronize()
    summary = sampler.stop()
    assert summary.get("available", True) is not False, summary
    assert summary["samples"] >= 5
    assert summary["power_mean_w"] > 0
    assert summary["energy_j"] > 0


def test_doctor_on_a_real_driver_recommends_a_gpu_stack():
    from kit.env.doctor import diagnose

    report = diagnose()
    d = report.to_dict() if hasattr(report, "to_dict") else report
    text = str(d)
    assert "no NVIDIA driver" not in text
    assert d["recommended_stack"] in ("cuda12", "cuda10"), d["recommended_stack"]


@pytest.mark.parametrize("inductor", [False, True], ids=["eager-kernels", "inductor"])
@pytest.mark.parametrize("mode", ["amp-bf16", "amp-fp16", "fp32"])
def test_the_cuda_graph_step_trains_and_counts_like_the_eager_one(mode, inductor):
    pytest.importorskip("torchvision")
    from kit.bench.cifar.graphed import GraphedTrainer
    from kit.bench.cifar.train_config import TrainConfig
    from kit.bench.precision import unavailable_reason

    if unavailable_reason(mode, "cuda:0"):
        pytest.skip(unavailable_reason(mode, "cuda:0"))
    cfg = TrainConfig(model="resnet18", precision=mode, device="cuda:0", batch_size=64, steps=40)
    tr = GraphedTrainer(cfg, 40, lambda s: 0.05, inductor=inductor)
    x = torch.randn(64, 3, 32, 32, device="cuda:0").contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 100, (64,), device="cuda:0")
    losses = [float(tr.step(x, y)) for _ in range(40)]
    assert tr.graph is not None, "the step was never captured"
    assert losses[-1] < losses[0] * 0.5, losses
    c = tr.counters()
    assert c["nan_losses"] == 0 and c["steps"] == 40
    if mode == "amp-fp16":
        assert c["loss_scale_final"] >= 1.0


def test_the_untimed_warm_up_takes_the_one_time_costs_out_of_the_first_repeat():
    """On CUDA the torch engine warms up (cuDNN autotuning for new shapes, capture) before
    repeat 0, so repeat 0 starts as fast as the others; batch 96 is a shape no other test
    in this file tunes."""
    pytest.importorskip("torchvision")
    from kit.bench.cifar import torch_engine
    from kit.bench.cifar.gpu_data import DeviceData
    from kit.bench.cifar.train_config import TrainConfig
    from kit.bench.context import CellContext
    from pathlib import Path

    torch.backends.cudnn.benchmark = True
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (960, 32, 32, 3), dtype=torch.uint8, generator=g).numpy()
    y = torch.randint(0, 100, (960,), generator=g).numpy()
    data = DeviceData.upload(x, y, x[:96], y[:96], "cuda:0")
    cfg = TrainConfig("resnet18", "amp-bf16", "cuda:0", batch_size=96, steps=10)
    ctx = CellContext(device="cuda:0", data_dir=Path("unused"), data_source="synthetic", repeats=2)
    metrics: dict = {}
    repeats, notes = torch_engine.run_repeats(cfg, data, ctx, 2, metrics=metrics)
    assert metrics["untimed_warmup_steps"] >= 5
    # auto on a GPU: the captured step with the model compiled by Inductor inside it
    assert [r["compile_mode"] for r in repeats] == ["cuda-graph-inductor", "cuda-graph-inductor"], notes
    assert "compiled by Inductor" in repeats[0]["precision"]["step"]
    assert repeats[0]["time_to_first_step_s"] < metrics["untimed_warmup_s"]


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
@pytest.mark.parametrize("current", ["cuda:1", "cuda:0"])
def test_the_cuda_graph_step_captures_on_a_second_gpu_after_a_capture_on_the_first(current):
    """A process that captured a graph on cuda:0 then trains on cuda:1, with cuda:1 made current
    (kit run, via kit.bench.api.resolve_device) or with cuda:0 still current (a script). torch's
    default capture stream belongs to the GPU of the process's first capture; capturing cuda:1's
    step on it failed with 'operation not permitted when stream is capturing' (seen in this file's
    own run on a two-GPU H200 host), so the trainer captures on a stream of its own GPU."""
    pytest.importorskip("torchvision")
    from kit.bench.api import resolve_device
    from kit.bench.cifar.graphed import GraphedTrainer
    from kit.bench.cifar.train_config import TrainConfig

    torch.cuda.set_device(0)
    first = torch.cuda.CUDAGraph()
    a = torch.ones(8, device="cuda:0")
    with torch.cuda.graph(first):  # torch's default capture stream is made now, on cuda:0
        a.mul_(2)
    first.replay()
    device = resolve_device("cuda:1") if current == "cuda:1" else "cuda:1"
    try:
        assert torch.cuda.current_device() == int(current[-1])
        cfg = TrainConfig(model="resnet18", precision="amp-bf16", device=device, batch_size=64, steps=20)
        tr = GraphedTrainer(cfg, 20, lambda s: 0.05)
        x = torch.randn(64, 3, 32, 32, device=device).contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 100, (64,), device=device)
        losses = [float(tr.step(x, y)) for _ in range(20)]
        assert tr.graph is not None and all(loss == loss for loss in losses)
        assert losses[-1] < losses[0]  # the replays train: same batch, the loss falls
        first.replay()
        assert a[0].item() == 4.0  # the first GPU's graph still replays
    finally:
        torch.cuda.set_device(0)


def test_a_one_rank_ddp_step_is_captured_with_its_all_reduce_and_trains_the_plain_weights():
    """A data-parallel rank's CUDA-graph step: the model in DDP (NCCL, a group of one), its bucket copies
    and all-reduce recorded in the graph after 11 eager steps; the replays train exactly the plain captured
    step's weights (deterministic cuDNN in both, so any step the graph left out would show)."""
    pytest.importorskip("torchvision")
    import tempfile

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from kit.bench.cifar.graphed import GraphedTrainer
    from kit.bench.cifar.train_config import TrainConfig
    from kit.bench.distributed import state

    torch.cuda.set_device(0)
    flags = torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    dist.init_process_group("nccl", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
    try:
        g = torch.Generator(device="cuda:0").manual_seed(0)
        x = torch.randn(32, 3, 32, 32, device="cuda:0", generator=g).contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 100, (32,), device="cuda:0", generator=g)
        weights, losses = {}, {}
        for way in ("plain", "rank"):
            if way == "rank":
                state.activate(state.RankInfo(0, 1, "nccl", "cuda:0"))
                assert state.capturable(), torch.cuda.nccl.version()
            try:
                cfg = TrainConfig(model="resnet18", precision="amp-fp16", device="cuda:0", batch_size=32, steps=20, seed=3)
                tr = GraphedTrainer(cfg, 20, lambda s: 0.05)
                losses[way] = [float(tr.step(x, y)) for _ in range(20)]
            finally:
                state.deactivate()
            assert tr.graph is not None and tr.data_parallel is (way == "rank")
            if way == "rank":
                assert isinstance(tr.net, DistributedDataParallel) and tr.capture_after == 11
                assert "all-reduce captured" in tr.describe()["step"]
            weights[way] = [p.detach().clone() for p in tr.model.parameters()]
        assert losses["rank"][-1] < losses["rank"][0] * 0.5, losses
        assert losses["plain"] == losses["rank"]
        assert all(torch.equal(a, b) for a, b in zip(weights["plain"], weights["rank"]))
    finally:
        dist.destroy_process_group()
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = flags


@pytest.mark.parametrize("gpus", [1, 2])
def test_kit_run_gpus_captures_each_ranks_step_and_keeps_the_ranks_in_step(tmp_path, gpus):
    """`kit run --gpus N --compile off` on CUDA: every rank runs the captured step with its all-reduce in it
    (compile_mode cuda-graph, no fallback note), and the ranks' weights agree after every repeat."""
    pytest.importorskip("torchvision")
    if torch.cuda.device_count() < gpus:
        pytest.skip(f"needs {gpus} CUDA GPUs")
    from kit.results.schema import RunConfig
    from kit.runner.execute import execute

    config = RunConfig.of(suite="cifar", data="synthetic", data_dir=str(tmp_path / "data"), device="cuda",
                       models=["resnet18"], precisions=["amp-bf16"], engines=["torch"], repeats=2, steps=30,
                       batch_size=64, gpus=gpus, compile="off")
    out = execute(config, tmp_path / "results", make_bundle=False)
    (cell,) = out.results.cells
    assert cell.status == "ok", cell.reason
    assert [r["compile_mode"] for r in cell.repeats] == ["cuda-graph", "cuda-graph"], cell.notes
    dp = cell.metrics["data_parallel"]
    assert dp["world_size"] == gpus and dp["ranks_in_step"] is True
    assert "all-reduce captured" in cell.metrics["precision"]["step"]
    assert dp["ddp_options"]["comm_hook"] == "kit.bench.distributed.state.average_hook"  # NCCL's average
