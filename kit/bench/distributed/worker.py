"""One rank of a data-parallel cell (runs in a child process the runner started; see this package's docstring).

What a data-parallel cell records (``metrics["data_parallel"]`` and each repeat):

- ``throughput_items_per_s``: the whole group's steady-state throughput, the sum of every
  rank's own (each rank times its steps as a plain cell does; DDP keeps them in lockstep);
  ``throughput_per_gpu_items_per_s`` = that sum / world size; ``throughput_by_rank_items_per_s``.
- ``allreduce``: the time to all-reduce one step's gradients, measured after training on
  buffers of the gradients' size in DDP's 25 MiB buckets, synchronised, median of
  ``ALLREDUCE_TRIES`` (an estimate without a profiler: it is the communication's cost when
  nothing overlaps it; DDP overlaps it with backward, so the time a step loses is at most this).
- ``ranks_in_step``: every rank's trained weights have the same sha256 after every repeat.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any, List

from kit.bench.context import CellContext, _noop
from kit.bench.distributed import state
from kit.results import suites
from kit.results.schema import CellResult, CellSpec
from kit.results.stats import summarise_repeats

#: DDP's default bucket size (torch.nn.parallel.DistributedDataParallel, bucket_cap_mb=25)
DDP_BUCKET_BYTES = 25 * 1024 * 1024
ALLREDUCE_TRIES = 10
#: seconds a collective waits for a missing rank before it fails (the runner notices a dead
#: rank within a second and stops the others; this bounds a hang the runner cannot see)
COLLECTIVE_TIMEOUT_S = 600



def visible_gpu_count() -> int:
    """CUDA GPUs PyTorch sees here (after CUDA_VISIBLE_DEVICES)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def per_rank_batch(result: CellResult) -> "int | None":
    """The batch each rank trained: as given, else the one the cell resolved and recorded in its method."""
    if result.params.get("batch_size"):
        return int(result.params["batch_size"])
    resolved = ((result.method or {}).get("settings") or {}).get("batch_size")
    return int(resolved) if resolved else None


def unsupported_reason(spec: CellSpec) -> "str | None":
    # the engines whose training calls the hooks of kit.bench.distributed.state (each suite's descriptor
    # names them); any other (the fastai engines train through fastai's Learner) would train N
    # unsynchronised copies, so it is skipped with the reason instead
    if spec.engine not in suites.suite(spec.workload).data_parallel:
        has = ", ".join(f"{s.name} {'/'.join(s.data_parallel)}" for s in suites.all_suites() if s.data_parallel)
        return (f"the {spec.workload} {spec.engine} engine has no data-parallel path (--gpus runs {has}); "
                "run it without --gpus")
    return None


def run_rank(spec: CellSpec, ctx: CellContext) -> CellResult:
    """Join the group, run the plain cell with the hooks on, combine the ranks' records on rank 0."""
    import torch
    import torch.distributed as dist

    dp = ctx.extra["ddp"]
    rank, world = int(dp["rank"]), int(dp["world_size"])
    device = ctx.device
    if device.startswith("cuda"):
        from kit.bench.api import resolve_device

        device = resolve_device(device)  # this rank's GPU becomes the current device
        backend = "nccl"
    else:
        backend = "gloo"
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # one host: the loopback interface
        if dp.get("threads"):
            torch.set_num_threads(int(dp["threads"]))
    dist.init_process_group(backend, init_method="file://" + str(dp["store"]), rank=rank, world_size=world,
                            timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    info = state.activate(state.RankInfo(rank, world, backend, device))
    rank_ctx = replace(ctx, device=device)
    if rank != 0:  # only rank 0 talks to the runner's journal and progress display
        rank_ctx = replace(rank_ctx, event=_noop, progress=_noop)
    try:
        reason = unsupported_reason(spec)
        if reason:
            return CellResult.skipped(spec, reason, throughput_unit=suites.unit(spec.workload))
        from kit.bench.api import run_cell

        result = run_cell(spec, rank_ctx)
        comm = time_allreduce(info) if result.status == "ok" and info.grad_bytes else None
        record = {"rank": rank, "status": result.status, "digests": list(info.digests),
                  "throughput": [r.get("throughput_items_per_s") for r in result.repeats]}
        gathered = gather_objects(record, world, device)
        if rank == 0 and result.status == "ok":
            combine(result, gathered, comm, info, dp)
        return result
    finally:
        state.deactivate()
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - the group may already be broken by a dead rank
            pass


def gather_objects(obj: Any, world: int, device: str, builtin: bool = True) -> List[Any]:
    """Every rank's ``obj``, in rank order: ``all_gather_object`` where torch has it (1.8+), else the
    same with pickled bytes in uint8 tensors (torch 1.4 in the cuda10 image)."""
    import pickle

    import torch
    import torch.distributed as dist

    if builtin and hasattr(dist, "all_gather_object"):
        out = [None] * world  # type: List[Any]
        dist.all_gather_object(out, obj)
        return out
    dev = device if device.startswith("cuda") else "cpu"  # NCCL gathers device tensors only
    data = torch.tensor(list(pickle.dumps(obj)), dtype=torch.uint8, device=dev)
    size = torch.tensor([data.numel()], dtype=torch.int64, device=dev)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    longest = max(int(s.item()) for s in sizes)
    padded = torch.zeros(longest, dtype=torch.uint8, device=dev)
    padded[: data.numel()] = data
    bufs = [torch.zeros_like(padded) for _ in range(world)]
    dist.all_gather(bufs, padded)
    return [pickle.loads(bytes(b[: int(s.item())].cpu().tolist())) for b, s in zip(bufs, sizes)]


def time_allreduce(info: state.RankInfo) -> dict:
    """One step's gradient all-reduce, alone (see the module docstring)."""
    import torch
    import torch.distributed as dist

    n = info.grad_bytes
    sizes = [DDP_BUCKET_BYTES] * (n // DDP_BUCKET_BYTES) + ([n % DDP_BUCKET_BYTES] if n % DDP_BUCKET_BYTES else [])
    bufs = [torch.zeros(max(1, s // 4), dtype=torch.float32, device=info.device) for s in sizes]

    def sync() -> None:
        if info.device.startswith("cuda"):
            torch.cuda.synchronize(info.device)

    def once() -> float:
        sync()
        t0 = time.perf_counter()
        for b in bufs:
            dist.all_reduce(b)
        sync()
        return time.perf_counter() - t0

    once()  # the first collective sets up the connections
    times = [once() for _ in range(ALLREDUCE_TRIES)]
    return {
        "seconds_per_step": statistics.median(times),
        "bytes_per_step": n,
        "gradient_dtypes": info.grad_dtypes,
        "buckets": len(sizes),
        "method": (f"after training, all_reduce of buffers as large as one step's gradients in DDP's 25 MiB buckets, "
                   f"synchronised, median of {ALLREDUCE_TRIES} (rank 0's clock); the cost with nothing overlapping it"),
    }


def combine(result: CellResult, gathered: list, comm: "dict | None", info: state.RankInfo, dp: dict) -> None:
    """Rank 0: the group's throughput per repeat, the ranks' agreement, the all-reduce estimate."""
    world = len(gathered)
    for i, rec in enumerate(result.repeats):
        by_rank = [g["throughput"][i] if i < len(g["throughput"]) else None for g in gathered]
        if all(isinstance(x, (int, float)) for x in by_rank):
            total = float(sum(by_rank))
            rec["throughput_by_rank_items_per_s"] = by_rank
            rec["throughput_per_gpu_items_per_s"] = total / world
            rec["throughput_items_per_s"] = total
    result.summary = summarise_repeats(result.repeats)
    digests = [g["digests"] for g in gathered]
    in_step = bool(digests[0]) and all(d == digests[0] for d in digests)
    per_gpu = [r.get("throughput_per_gpu_items_per_s") for r in result.repeats]
    per_gpu = [x for x in per_gpu if x is not None]
    dp_metrics = {
        "world_size": world,
        "backend": info.backend,
        "launcher": f"kit.runner.isolate (multiprocessing {dp.get('start_method', 'spawn')}, one process per rank; FileStore rendezvous)",
        "per_rank_batch_size": per_rank_batch(result),
        "global_batch_size": (per_rank_batch(result) or 0) * world or None,
        "throughput_per_gpu_items_per_s_median": statistics.median(per_gpu) if per_gpu else None,
        "ranks_in_step": in_step,
        "weights_sha256_by_rank": digests,
        "allreduce": comm,
        "cpu_threads_per_rank": dp.get("threads"),
        "ddp_options": dict(info.ddp_options),
    }
    result.metrics["data_parallel"] = dp_metrics
    result.notes.append(
        f"data-parallel over {world} rank(s) (DistributedDataParallel, {info.backend}): throughput_items_per_s is "
        "the sum of the ranks' steady-state throughput; achieved_tflops and peak memory are rank 0's (one GPU)")
    if not in_step:
        result.notes.append("the ranks' trained weights differ (weights_sha256_by_rank): they did not stay in step")
    own = suites.suite(result.workload).data_parallel_note
    if own:
        result.notes.append(own)
