"""Data-parallel cells (kit run --gpus N): real 2-process gloo cells on the CPU, a killed rank, and the
checks that stop a bad --gpus before anything is written. No fixed port: the ranks meet through a
FileStore in the run folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kit.bench.context import CellContext
from kit.errors import UsageError
from kit.results.schema import CellResult, CellSpec, RunConfig
from kit.runner import isolate
from kit.runner.execute import execute
from kit.runner.isolate import CellProcessDied, check_data_parallel, run_data_parallel, scaling_efficiency
from kit.runner.plan import build_plan

ROOT = Path(__file__).resolve().parents[1]
#: a tiny LSTM: 8 units, one layer, 4 batches of 2 x 8 tokens per epoch
TINY_LSTM = {"nhid": 8, "emsize": 8, "nlayers": 1, "bptt": 8}


def _config(tmp_path, **kw):
    base = dict(suite="lstm", device="cpu", data="synthetic", data_dir=str(tmp_path / "data"), presets=["apex-2018"],
                precisions=["fp32"], max_batches=4, batch_size=2, repeats=2, **TINY_LSTM, gpus=2)
    base.update(kw)
    return RunConfig.of(**base)


def _spec():
    return CellSpec("lstm", "apex-2018", "fp32", "kit", {"preset": "apex-2018", "world_size": 2})


def _ctx(tmp_path, **kw):
    return CellContext(device="cpu", data_dir=tmp_path, data_source="synthetic", seed=3, **kw)


# ----------------------------------------------------------------------------- real gloo cells
def test_two_gloo_ranks_stay_in_step_and_the_results_name_the_world_size(tmp_path):
    out = execute(_config(tmp_path), tmp_path / "results", make_bundle=False)
    (cell,) = out.results.cells
    assert cell.status == "ok", cell.reason
    dp = cell.metrics["data_parallel"]
    assert dp["world_size"] == 2 and dp["backend"] == "gloo" and cell.params["world_size"] == 2
    # identical weights on both ranks after every repeat
    digests = dp["weights_sha256_by_rank"]
    assert len(digests) == 2 and len(digests[0]) == 2 and digests[0] == digests[1]
    assert dp["ranks_in_step"] is True
    # the group's throughput is the sum of the ranks'
    for rec in cell.repeats:
        assert rec["throughput_items_per_s"] == pytest.approx(sum(rec["throughput_by_rank_items_per_s"]))
        assert rec["throughput_per_gpu_items_per_s"] == pytest.approx(rec["throughput_items_per_s"] / 2)
    assert dp["per_rank_batch_size"] == 2 and dp["global_batch_size"] == 4
    assert dp["allreduce"]["seconds_per_step"] > 0 and dp["allreduce"]["bytes_per_step"] > 0
    assert "gradient_as_bucket_view" in dp["ddp_options"]
    # only the runner wrote the run folder: results.json names the world size
    saved = json.loads((out.run_dir / "results.json").read_text())
    assert saved["config"]["gpus"] == 2 and saved["cells"][0]["metrics"]["data_parallel"]["world_size"] == 2
    assert not list(out.run_dir.glob("kit-ddp-*")), "the rendezvous store is removed after the cell"


def test_two_gloo_ranks_of_a_resnet_with_batchnorm_stay_in_step_without_syncing_buffers(tmp_path):
    """The CIFAR torch engine's ResNet (BatchNorm buffers) over two ranks, with the kit's DDP options:
    buffers not synced before each forward, gradients as bucket views; the weights stay identical."""
    pytest.importorskip("torchvision")
    config = RunConfig.of(suite="cifar", data="synthetic", data_dir=str(tmp_path / "data"), device="cpu",
                       models=["resnet18"], precisions=["fp32"], engines=["torch"], repeats=2, steps=2,
                       batch_size=4, gpus=2)
    out = execute(config, tmp_path / "results", make_bundle=False)
    (cell,) = out.results.cells
    assert cell.status == "ok", cell.reason
    dp = cell.metrics["data_parallel"]
    assert dp["ranks_in_step"] is True and len(dp["weights_sha256_by_rank"][0]) == 2
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from kit.bench.distributed import state

    assert dp["ddp_options"] == dict(state.ddp_options(DistributedDataParallel), comm_hook=state.COMM_HOOK)
    assert dp["ddp_options"].get("gradient_as_bucket_view") is True, torch.__version__
    assert False in (dp["ddp_options"].get("forward_sync_buffers"), dp["ddp_options"].get("broadcast_buffers"))


def test_two_gloo_ranks_of_the_gpt_suite_stay_in_step(tmp_path):
    """The GPT suite's cell over two ranks: each rank draws its own token windows, DDP (around the whole
    loss: the step calls the model through hidden/logits, not forward) averages the gradients, and the
    weights stay identical; each repeat leaves DDP's 11 statistics steps out of its timed steps."""
    config = RunConfig.of(suite="gpt", data="synthetic", data_dir=str(tmp_path / "data"), device="cpu",
                       gpt_presets=["tiny"], precisions=["fp32"], repeats=2, gpus=2, compile="off")
    out = execute(config, tmp_path / "results", make_bundle=False)
    (cell,) = out.results.cells
    assert cell.status == "ok", cell.reason
    dp = cell.metrics["data_parallel"]
    assert dp["world_size"] == 2 and dp["backend"] == "gloo" and dp["ranks_in_step"] is True
    digests = dp["weights_sha256_by_rank"]
    assert len(digests[0]) == 2 and digests[0] == digests[1] and digests[0][0] != digests[0][1]  # two seeds
    assert dp["per_rank_batch_size"] == 4 and dp["global_batch_size"] == 8
    assert all(rec["warmup_steps"] >= 11 for rec in cell.repeats)
    assert dp["allreduce"]["bytes_per_step"] > 0


def test_the_ddp_options_are_those_the_installed_ddp_takes():
    from kit.bench.distributed.state import ddp_options

    class Torch214:
        def __init__(self, module, device_ids=None, broadcast_buffers=True, gradient_as_bucket_view=False,
                     forward_sync_buffers=True):
            pass

    class Torch111:
        def __init__(self, module, device_ids=None, broadcast_buffers=True, gradient_as_bucket_view=False):
            pass

    class Torch14:  # the cuda10 image: no gradient_as_bucket_view yet
        def __init__(self, module, device_ids=None, broadcast_buffers=True, bucket_cap_mb=25):
            pass

    assert ddp_options(Torch214) == {"forward_sync_buffers": False, "gradient_as_bucket_view": True}
    assert ddp_options(Torch111) == {"broadcast_buffers": False, "gradient_as_bucket_view": True}
    assert ddp_options(Torch14) == {"broadcast_buffers": False}


DDP_STATS_CHECK = r"""
import sys, tempfile
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from kit.bench.distributed import state
dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
state.activate(state.RankInfo(0, 1, "gloo", "cpu"))
for name, model in (("kit", state.wrap_model(torch.nn.Linear(3, 2))), ("defaults", DistributedDataParallel(torch.nn.Linear(3, 2)))):
    seen = set()
    for _ in range(205):
        model(torch.randn(4, 3)).sum().backward()
        seen.add(model._get_ddp_logging_data().get("iteration"))
    print(name, max(seen))
dist.destroy_process_group()
"""


def test_a_ranks_ddp_collects_its_runtime_statistics_only_in_the_warm_up():
    """A fresh DDP records its runtime statistics (on CUDA: a host sync each time) at its first 10
    iterations and then every 100; the kit's DDP only at the first 10, which every data-parallel repeat
    leaves out of its steady state. Real DDP, one gloo rank, in a process of its own."""
    out = subprocess.run([sys.executable, "-c", DDP_STATS_CHECK], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    last = dict(line.split() for line in out.stdout.split("\n") if line.strip())
    assert last == {"kit": "10", "defaults": "200"}


DDP_OPS_CHECK = r"""
import collections, json, tempfile
import torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from kit.bench.distributed import state
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)

def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.Flatten(),
                         nn.Linear(8 * 4 * 4, 10))

x = torch.randn(4, 3, 8, 8); y = torch.randint(0, 10, (4,))
def train(model, profile):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    def step():
        opt.zero_grad(set_to_none=True); nn.functional.cross_entropy(model(x), y).backward(); opt.step()
    for _ in range(3):
        step()
    ops = None
    if profile:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            step()
        ops = sum(e.name.startswith("aten::") for e in prof.events())
    return ops, [p.detach().clone() for p in model.parameters()]

plain_ops, plain_w = train(net(), True)
kit_ops, kit_w = train(state.build_ddp(DistributedDataParallel, net()), True)
default_ops, _ = train(DistributedDataParallel(net()), True)
n = len(list(net().parameters()))
print(json.dumps({"params": n, "plain": plain_ops, "kit": kit_ops, "defaults": default_ops,
                  "same_weights": all(torch.equal(a, b) for a, b in zip(plain_w, kit_w))}))
dist.destroy_process_group()
"""


def test_the_kits_ddp_adds_two_operations_per_parameter_and_trains_the_same_weights():
    """DDP's reducer costs host time per parameter per step, which an eager step paced by the host pays
    in full (references/h200/ddp). The kit's DDP (torch's all-reduce hook, bucket views) adds at most two
    dispatched operations per parameter per step (DDP's defaults: six); a one-rank DDP of it trains the
    same weights as the plain model, bit for bit. Real DDP, one gloo rank, in a process of its own."""
    out = subprocess.run([sys.executable, "-c", DDP_OPS_CHECK], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    n = got["params"]
    assert got["same_weights"], got
    assert got["kit"] - got["plain"] <= 2 * n + 10, got  # + a few per bucket (the hook's division, the all-reduce)
    assert got["defaults"] - got["plain"] >= 5 * n, got  # the reducer's multiply-while-copying path


GRAPHED_DDP_CHECK = r"""
import json, tempfile
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from kit.bench.cifar.graphed import GraphedTrainer
from kit.bench.cifar.train_config import TrainConfig
from kit.bench.distributed import state
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
g = torch.Generator().manual_seed(0)
x, y = torch.randn(4, 3, 32, 32, generator=g), torch.randint(0, 100, (4,), generator=g)
out = {}
for precision in ("fp32", "amp-fp16"):
    cfg = TrainConfig(model="resnet18", precision=precision, device="cpu", batch_size=4, steps=3, compile="off", seed=3)
    plain = GraphedTrainer(cfg, 3, lambda s: 0.05, capture=False)
    info = state.activate(state.RankInfo(0, 1, "gloo", "cpu"))
    try:
        ranked = GraphedTrainer(cfg, 3, lambda s: 0.05, capture=False)
    finally:
        state.deactivate()
    for t in (plain, ranked):
        t.scale.fill_(8.0)  # amp-fp16: a scale this batch does not overflow at, so the steps move the weights
    start = [p.detach().clone() for p in plain.model.parameters()]
    for _ in range(3):
        plain.step(x, y), ranked.step(x, y)
    grads_in_buckets = all(p.grad is not None for p in ranked.params)
    out[precision] = {
        "wrapped": isinstance(ranked.net, DistributedDataParallel) and ranked.net.module is ranked.model,
        "plain_unwrapped": plain.net is plain.model and not plain.data_parallel,
        "same_weights": all(torch.equal(a, b) for a, b in zip(plain.model.parameters(), ranked.model.parameters())),
        "moved": any(not torch.equal(a, b) for a, b in zip(start, plain.model.parameters())),
        "capture_after": [plain.capture_after, ranked.capture_after],
        "step": ranked.describe()["step"], "ddp_options": info.ddp_options, "grads": grads_in_buckets,
        "counters": [plain.counters(), ranked.counters()],
    }
# DDP checks a hook's signature when it is registered (its annotations too): the NCCL ranks' hook must pass
probe = DistributedDataParallel(torch.nn.Linear(2, 2))
probe.register_comm_hook(None, state.average_hook)
out["average_hook_registers"] = True
print(json.dumps(out))
dist.destroy_process_group()
"""


def test_the_captured_steps_body_in_a_rank_trains_through_ddp_the_plain_weights():
    """The CUDA-graph step (kit.bench.cifar.graphed) in a data-parallel rank runs its model inside DDP, so
    the all-reduce is part of the captured step; its body (capture=False on the CPU: the same code a GPU
    captures) through a one-rank DDP trains the plain step's weights bit for bit, fp32 and with the
    device-side loss scaling, and waits 11 eager steps before a capture (PyTorch's minimum for DDP). Real
    DDP, one gloo rank, in a process of its own."""
    pytest.importorskip("torchvision")
    out = subprocess.run([sys.executable, "-c", GRAPHED_DDP_CHECK], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got.pop("average_hook_registers") is True
    for precision, r in got.items():
        assert r["wrapped"] and r["plain_unwrapped"] and r["grads"], (precision, r)
        assert r["moved"] and r["same_weights"], (precision, r)
        assert r["counters"][0] == r["counters"][1], r  # the same overflows, losses and final scale
        assert r["capture_after"] == [3, 11], r
        assert "DistributedDataParallel" in r["step"] and r["ddp_options"]["comm_hook"], r


def test_a_rank_captures_its_step_only_where_nccl_can_record_the_all_reduce(monkeypatch):
    """The step modes of a data-parallel rank: the captured step on NCCL 2.9.6+ (its all-reduce recorded in
    the graph), eager on older NCCL; a plain cell is unchanged; a rank's steady state starts after its later
    capture (11 eager steps, then the capture, then the first replay)."""
    import torch

    from kit.bench import caps
    from kit.bench.cifar.graphed import EAGER_GRAPH, INDUCTOR_GRAPH
    from kit.bench.cifar.torch_engine import compile_candidates, steady_state_warmup
    from kit.bench.cifar.train_config import TrainConfig
    from kit.bench.distributed import state

    monkeypatch.setattr(caps, "HAS_GRAPHED_STEP", True)
    plain = compile_candidates("off", "cuda:0", "amp-bf16")
    assert plain == [EAGER_GRAPH, None]
    for version, graphed in (((2, 27, 3), True), ((2, 9, 6), True), ((2, 9, 5), False), (2708, False)):
        monkeypatch.setattr(torch.cuda.nccl, "version", lambda v=version: v)
        state.activate(state.RankInfo(0, 2, "nccl", "cuda:0"))
        try:
            assert state.capturable() is graphed, version
            assert compile_candidates("off", "cuda:0", "amp-bf16") == ([EAGER_GRAPH, None] if graphed else [None])
            assert (INDUCTOR_GRAPH in compile_candidates("auto", "cuda:0", "amp-bf16")) is (graphed and caps.HAS_COMPILE)
            assert compile_candidates("off", "cuda:0", "fp16-master") == [None]  # decided on the host: never captured
        finally:
            state.deactivate()
    state.activate(state.RankInfo(0, 2, "gloo", "cpu"))
    try:
        assert state.capturable() is False  # gloo runs on the host
        cfg = TrainConfig(model="resnet18", precision="amp-bf16", device="cuda:0", batch_size=8, steps=40)
        assert steady_state_warmup(cfg, 40, EAGER_GRAPH) == state.DDP_STATS_WARMUP + 1 == 12
    finally:
        state.deactivate()
    assert state.capturable() is True
    assert steady_state_warmup(cfg, 40, EAGER_GRAPH) == state.DDP_STATS_WARMUP == 11


def test_the_hook_averages_in_nccls_collective_and_falls_back_to_torchs_on_gloo():
    """NCCL ranks average each bucket inside the all-reduce (ReduceOp.AVG: no separate division pass over
    the gradients); gloo has no average, so its ranks keep torch's all-reduce hook (divide, then sum)."""
    import torch.distributed as dist

    from kit.bench.distributed import state

    assert state.hook_name("gloo") == state.COMM_HOOK
    assert state.hook_name("nccl") == (state.AVERAGE_HOOK if hasattr(dist.ReduceOp, "AVG") else state.COMM_HOOK)
    module, name = state.AVERAGE_HOOK.rsplit(".", 1)
    assert module == state.__name__ and callable(getattr(state, name))


def test_the_average_hook_sums_in_a_group_of_one_and_averages_in_larger_ones(tmp_path, monkeypatch):
    """A one-rank average is the bucket itself: the hook asks for an in-place SUM there (NCCL then runs no
    kernel; its one-rank AVG would scale every gradient by 1), and for AVG in a larger group. A real
    one-rank gloo group; the all-reduce is recorded (gloo has no AVG to run)."""
    import torch
    import torch.distributed as dist

    from kit.bench.distributed import state

    class Bucket:
        def __init__(self):
            self.t = torch.arange(4.0)

        def buffer(self):
            return self.t

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        bucket = Bucket()
        assert torch.equal(state.average_hook(None, bucket).wait(), torch.arange(4.0))  # real gloo SUM of one
        ops = []

        def record(tensor, op=None, group=None, async_op=False):
            ops.append(op)
            fut = torch.futures.Future()
            fut.set_result([tensor])
            return type("Work", (), {"get_future": lambda self: fut})()

        monkeypatch.setattr(dist, "all_reduce", record)
        for world in (1, 2, 8):
            monkeypatch.setattr(dist, "get_world_size", lambda group=None, w=world: w)
            assert state.average_hook(None, bucket).wait() is bucket.t
        assert ops == [dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.AVG]
    finally:
        dist.destroy_process_group()


def test_plain_and_data_parallel_repeats_warm_up_past_ddps_statistics_iterations():
    """Both leave out the same steps, at least the 11 where a fresh DDP syncs (forwards 2-11), so the
    one-GPU check compares the same window of the same steps."""
    from kit.bench.cifar.torch_engine import steady_state_warmup
    from kit.bench.cifar.train_config import TrainConfig
    from kit.bench.distributed import state
    from kit.bench.lstm import train as lstm_train

    cfg = TrainConfig(model="resnet18", precision="amp-bf16", device="cpu", batch_size=8, steps=40, compile="eager")
    plain = steady_state_warmup(cfg, 40, None)
    state.activate(state.RankInfo(0, 1, "gloo", "cpu"))
    try:
        ranked = steady_state_warmup(cfg, 40, None)
    finally:
        state.deactivate()
    assert plain == ranked == state.DDP_STATS_WARMUP == 11
    assert steady_state_warmup(cfg, 40, "default") >= 11
    assert lstm_train.WARMUP_BATCHES >= state.DDP_STATS_WARMUP


def test_a_killed_rank_fails_the_cell_and_keeps_the_finished_cells(tmp_path, monkeypatch):
    monkeypatch.setattr(isolate, "DDP_CALL", "ddp_cells:kill_rank_1_in_tensor_core")
    config = _config(tmp_path, presets=["apex-2018", "tensor-core"], repeats=1)
    out = execute(config, tmp_path / "results", make_bundle=False)
    first, second = out.results.cells
    assert first.status == "ok" and first.metrics["data_parallel"]["ranks_in_step"] is True
    assert second.status == "failed"
    assert "rank 1 of 2" in second.reason and "exit code -9" in second.reason
    saved = json.loads((out.run_dir / "results.json").read_text())
    assert [c["status"] for c in saved["cells"]] == ["ok", "failed"]


# ----------------------------------------------------------------------------- the parent's side (no torch)
def test_a_rank_that_dies_is_named_and_the_others_are_stopped(tmp_path):
    with pytest.raises(CellProcessDied, match=r"rank 1 of 2 \(pid \d+\) ended with exit code 9"):
        run_data_parallel(_spec(), _ctx(tmp_path), 2, store_dir=tmp_path, call="ddp_cells:rank_1_exits")


def test_a_rank_that_raises_fails_the_cell_with_its_rank(tmp_path):
    with pytest.raises(RuntimeError, match="rank 1 of 2: MemoryError: rank 1 ran out of memory"):
        run_data_parallel(_spec(), _ctx(tmp_path), 2, store_dir=tmp_path, call="ddp_cells:rank_1_raises")


def test_only_rank_0_talks_and_its_result_is_the_cells(tmp_path):
    events = []
    ctx = _ctx(tmp_path, event=lambda kind, **f: events.append(f.get("message")))
    result = run_data_parallel(_spec(), ctx, 2, store_dir=tmp_path, call="ddp_cells:report_rank")
    assert result.metrics["rank"] == 0 and result.metrics["world_size"] == 2
    assert events == ["from rank 0"]
    assert result.metrics["threads"] == max(1, (os.cpu_count() or 1) // 2)
    assert Path(result.metrics["store"]).parent.parent == tmp_path  # the store lives where it was told, no port


def test_scaling_efficiency_is_total_over_world_times_one_rank():
    def cell(median):
        return CellResult("cifar", "resnet18", "fp32", "torch", "ok", summary={"throughput_items_per_s": {"median": median}})

    assert scaling_efficiency(cell(180.0), cell(100.0), 2)["efficiency"] == pytest.approx(0.9)
    failed = CellResult("cifar", "resnet18", "fp32", "torch", "failed", reason="boom")
    assert scaling_efficiency(cell(180.0), failed, 2)["efficiency"] is None


# ----------------------------------------------------------------------------- options
def test_gpus_beyond_the_visible_gpus_is_refused_before_anything_runs(monkeypatch):
    from kit.bench.distributed import worker

    monkeypatch.setattr(worker, "visible_gpu_count", lambda: 2)
    with pytest.raises(UsageError, match=r"--gpus 3: only 2 GPU\(s\) are visible") as err:
        check_data_parallel(RunConfig.of(device="cuda", gpus=3, data="synthetic"))
    assert "--gpus 2 or fewer" in err.value.remedy
    check_data_parallel(RunConfig.of(device="cuda", gpus=2, data="synthetic"))  # fits
    monkeypatch.setattr(worker, "visible_gpu_count", lambda: 0)
    with pytest.raises(UsageError, match="no CUDA GPU is visible") as err:
        check_data_parallel(RunConfig.of(device="auto", gpus=2, data="synthetic"))
    assert "--device cpu" in err.value.remedy
    with pytest.raises(UsageError, match="cannot be combined with --device cuda:1"):
        check_data_parallel(RunConfig.of(device="cuda:1", gpus=2, data="synthetic"))


@pytest.mark.parametrize("kw, words", [
    ({"gpus": 0}, "--gpus 0: must be at least 1"),
    ({"gpus": 3, "global_batch_size": 256}, "does not split evenly over --gpus 3"),
    ({"gpus": 2, "find_max_batch": True}, "--find-max-batch"),
    ({"scaling": True}, "data-parallel cells only"),
    ({"global_batch_size": 256}, "data-parallel cells only"),
])
def test_bad_data_parallel_options_are_usage_errors(kw, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        build_plan(RunConfig.of(data="synthetic", **kw))  # a suite's own setting (--find-max-batch): as planned


def test_a_batch_per_gpu_and_a_global_batch_together_are_refused():
    from kit.runner.option_checks import config_from_options
    from kit.runner.options import RunOptions

    with pytest.raises(UsageError, match="not both"):
        config_from_options(RunOptions(gpus=2, global_batch_size=256, batch_size=64))


def test_the_batch_is_per_gpu_unless_a_global_batch_is_given():
    weak = build_plan(RunConfig.of(data="synthetic", models=["resnet18"], engines=["torch"], precisions=["fp32"],
                                batch_size=64, gpus=4)).cells[0]
    assert weak.params["batch_size"] == 64 and weak.params["world_size"] == 4
    strong = build_plan(RunConfig.of(data="synthetic", models=["resnet18"], engines=["torch"], precisions=["fp32"],
                                  global_batch_size=256, gpus=4, scaling=True)).cells[0]
    assert strong.params["batch_size"] == 64 and strong.params["global_batch_size"] == 256
    assert strong.params["scaling_baseline"] is True
    lstm = build_plan(RunConfig.of(suite="lstm", data="synthetic", global_batch_size=48, gpus=2)).cells[0]
    assert lstm.params["batch_size"] == 24 and lstm.params["world_size"] == 2
    gpt = build_plan(RunConfig.of(suite="gpt", data="synthetic", gpt_presets=["tiny"], global_batch_size=8, gpus=2)).cells[0]
    assert gpt.params["batch_size"] == 4 and gpt.params["world_size"] == 2 and gpt.params["global_batch_size"] == 8
    plain = build_plan(RunConfig.of(data="synthetic", models=["resnet18"], engines=["torch"], precisions=["fp32"])).cells[0]
    assert "world_size" not in plain.params  # the plain path's cells keep their params


def test_kit_run_gpus_on_a_host_without_gpus_is_one_line_and_exit_2(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--gpus", "3", "--data", "synthetic", "--skip-checks",
                          "--results-dir", str(tmp_path / "r")], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 2, out.stderr
    assert "--gpus 3: no CUDA GPU is visible here" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


# ----------------------------------------------------------------------------- launch and NVML
def test_kit_launch_with_several_gpus_runs_the_cells_data_parallel():
    from kit.launch.launcher import container_command

    assert container_command("cuda12", ["--suite", "cifar"], False, 2) == ["run", "--suite", "cifar", "--gpus", "2", "--device", "cuda"]
    assert container_command("cuda12", [], False, 4) == ["run", "--suite", "all", "--gpus", "4", "--device", "cuda"]
    assert container_command("cuda12", ["--gpus", "1"], False, 2) == ["run", "--gpus", "1", "--device", "cuda:0"]
    assert container_command("cuda12", ["--suite", "cifar"], False, 1) == ["run", "--suite", "cifar", "--device", "cuda:0"]


class _FakeNVML:
    """Two or three GPUs: 0-1 joined by NVLink, 2 on PCIe under another host bridge."""

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetP2PStatus(self, a, b, caps):
        assert caps == 3  # NVML_P2P_CAPS_INDEX_NVLINK
        return 0 if {a, b} == {0, 1} else 2  # OK / NOT_SUPPORTED

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return 10 if {a, b} == {0, 1} else 30


def test_the_interconnect_comes_from_nvml_per_pair_of_gpus():
    from kit.env.nvml import interconnect

    nv = interconnect([0, 1], nvml=_FakeNVML())
    assert nv["kind"] == "nvlink" and nv["pairs"] == [{"gpus": [0, 1], "pcie_path": "one PCIe switch", "link": "nvlink"}]
    mixed = interconnect([0, 1, 2], nvml=_FakeNVML())
    assert mixed["kind"] == "mixed"
    assert {tuple(p["gpus"]): p["link"] for p in mixed["pairs"]} == {(0, 1): "nvlink", (0, 2): "pcie", (1, 2): "pcie"}
    assert interconnect([0])["kind"] == "none"


def test_a_fastai_cell_is_skipped_with_the_reason_before_any_rank_starts(tmp_path, monkeypatch):
    from kit.runner.isolate import run_parallel_cell

    monkeypatch.setattr(isolate, "_run_children", lambda *a, **k: pytest.fail("no rank may start"))
    spec = CellSpec("cifar", "resnet18", "fp32", "fastai", {"world_size": 2})
    result = run_parallel_cell(spec, _ctx(tmp_path))
    assert result.status == "skipped" and "cifar fastai engine has no data-parallel path" in result.reason


def test_the_ranks_records_are_gathered_without_all_gather_object_too(tmp_path, monkeypatch):
    """torch 1.4 (the cuda10 image) has no all_gather_object: the fallback gathers pickled bytes."""
    import torch.distributed as dist

    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")  # as the rank worker sets it: one host
    from kit.bench.distributed.worker import gather_objects

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        record = {"rank": 0, "digests": ["ab" * 32], "throughput": [1.5, None]}
        assert gather_objects(record, 1, "cpu", builtin=False) == [record]
        assert gather_objects(record, 1, "cpu") == [record]
    finally:
        dist.destroy_process_group()


def test_the_ddp_cell_probe_runs_all_three_ways_on_the_cpu(tmp_path):
    """scripts/probe_ddp_cell.py (the H200 check's in-process split) runs the kit's cell plain, in the
    kit's data-parallel step and in that step without the communication hook, and records which DDP
    options and hook each way ran with. gloo, a tiny ResNet-18 at 32 px, fp32 (a CPU without bf16
    instructions skips amp-bf16 cells): the figures mean nothing here."""
    out = subprocess.run([sys.executable, "scripts/probe_ddp_cell.py", str(tmp_path), "--device", "cpu", "--steps", "3",
                          "--precision", "fp32",
                          "--model", "resnet18", "--image-size", "32", "--batch-size", "2", "--rounds", "1"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads((tmp_path / "ddp_cell_probe.json").read_text())
    assert set(got["medians_by_round"]) == {"plain", "data-parallel-in-process", "data-parallel-no-hook"}
    assert all(len(v) == 1 and v[0] > 0 for v in got["medians_by_round"].values())
    assert got["ddp_options"]["data-parallel-in-process"]["comm_hook"].endswith("allreduce_hook")
    assert got["ddp_options"]["data-parallel-no-hook"]["comm_hook"] is None
    assert got["step_modes"] == {way: ["eager"] for way in got["medians_by_round"]}  # the CPU captures nothing
    assert "without the communication hook" in out.stdout
