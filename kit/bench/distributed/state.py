"""The data-parallel state of this process, and the engines' hooks (no-ops in a plain cell).

The rank worker (kit.bench.distributed.worker) activates it; the CIFAR torch engine and the
LSTM call the hooks, so one code path trains a plain cell and every rank of a data-parallel one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

#: offset between the data seeds of two ranks (a prime, so ranks never share a repeat's seed)
RANK_SEED_STRIDE = 7919

#: DistributedDataParallel's options other than its defaults, and why. Measured on an H200 at world size 1
#: (references/h200/ddp/probe.json: ResNet-18 32 px batch 256 and ResNet-50 224 px batch 128, amp-bf16,
#: eager): DDP's defaults cost 2.9 and 3.5 ms per step over the plain model, by broadcasting every
#: BatchNorm buffer from rank 0 before each forward (about 1-2 ms) and copying the gradients into and
#: out of the all-reduce buckets (about 0.6-0.9 ms); without both, 1.0 and 0.7 ms remain (DDP's hooks).
#: Training is unchanged: the all-reduced gradients are the same, so the weights stay identical on every
#: rank (ranks_in_step checks it); each rank's BatchNorm running statistics come from its own batches,
#: and rank 0's (which the results report) from rank 0's. Each is passed where the installed DDP has it
#: (ddp_options in the results says what ran): buffers synced once at construction and not before each
#: forward (torch 2.14's forward_sync_buffers=False; before it, broadcast_buffers=False, which also skips
#: the sync at construction, where every rank's buffers are already equal: fresh BatchNorm statistics);
#: gradients as views of the buckets (torch 1.7+; the cuda10 image's torch 1.4 has no such option).
BUFFER_SYNC_OPTIONS = ({"forward_sync_buffers": False}, {"broadcast_buffers": False})
GRADIENT_OPTIONS = {"gradient_as_bucket_view": True}

#: DDP's own runtime statistics (its logging data, not the training): a new DDP collects them at
#: its first 10 iterations and then once every 100 (torch's kDDPRuntimeLoggingSampleRate; see
#: DistributedDataParallel._set_ddp_runtime_logging_sample_rate), and on CUDA each collection waits
#: for the previous iteration's timing events: a host sync, which empties the queue of work launched
#: ahead of the GPU. Each repeat builds a fresh DDP, so the engines' warm-up (steps left out of the
#: steady state, plain and data-parallel alike, so both time the same steps) is at least
#: DDP_STATS_WARMUP steps where the run is long enough, and the kit's DDP samples no later ones
#: within any run (LATER_STATS_EVERY).
#: How the gradients reach the all-reduce. Without a communication hook DDP's reducer copies each
#: gradient into its bucket with a multiply by 1 / world size (at::mul_out with a wrapped scalar),
#: six dispatched operations per parameter per step; with a communication hook it copies (copy_ into
#: the bucket's view of the gradient) and leaves the averaging to the hook, two per parameter. Counted
#: with torch.profiler on a one-rank gloo DDP of ResNet-50 (161 parameters), kit options, set_to_none:
#: 976 extra operations per step without a hook, 357 with torch's (plain: 3,508). In an eager step that
#: the host paces (ResNet-50 at 224 px on an H200: references/h200/ddp), every dispatched operation is
#: host time.
#: The hook: on NCCL the kit's own, AVERAGE_HOOK, which all-reduces each bucket with NCCL's average
#: (ReduceOp.AVG, NCCL 2.10+; the scaling by 1 / N happens inside the collective) and, in a group of one,
#: with an in-place SUM, for which NCCL launches nothing. torch's all-reduce hook (COMM_HOOK, used on
#: gloo, which has no average) divides every bucket by the world size before its sum: one more pass
#: over all the gradients per step. On the H200 at --gpus 1 the LSTM tensor-core preset (545 MB of fp32
#: gradients, a GPU-bound eager step) lost 1.7% with DDP's own reducer (one pass: the copy into the
#: buckets, scaled), 3.3% with torch's hook (the copy, then the division) and 3.6% with NCCL's AVG at
#: one rank (the copy, then NCCL's one-rank scaling kernel): references/h200/ddp runs 3, 6 and 7.
#: The averaging is the same up to rounding: the reducer multiplies by 1 / N, torch's hook divides by
#: N, NCCL scales by 1 / N; they agree bit for bit where N is a power of two (1, 2, 4, 8 GPUs; a
#: one-rank DDP trains the plain model's weights exactly, tests/test_ddp_cells.py, tests/test_gpu.py)
#: and can differ in the last bit otherwise; every rank does the same, so the ranks stay in step either way.
COMM_HOOK = "torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook"
AVERAGE_HOOK = "kit.bench.distributed.state.average_hook"

DDP_STATS_ITERATIONS = 10
DDP_STATS_WARMUP = DDP_STATS_ITERATIONS + 1
LATER_STATS_EVERY = 2**31 - 1


@dataclass
class RankInfo:
    rank: int
    world_size: int
    backend: str  # "nccl" | "gloo"
    device: str  # this rank's device: "cpu" or "cuda:N"
    #: sha256 of the trained weights, one per repeat (kit.bench.distributed.state.repeat_done)
    digests: List[str] = field(default_factory=list)
    #: bytes of the gradients DDP all-reduces per step, and their dtype (from the last wrapped model)
    grad_bytes: int = 0
    grad_dtypes: List[str] = field(default_factory=list)
    #: the DistributedDataParallel options the last wrapped model was built with (see ddp_options),
    #: and its communication hook ("comm_hook": AVERAGE_HOOK or COMM_HOOK, see hook_name; None where
    #: torch has no hooks or comm_hook is off)
    ddp_options: dict = field(default_factory=dict)
    #: register COMM_HOOK (the kit's rank); False leaves DDP's own reducer path (scripts/probe_ddp_cell.py
    #: runs both, to measure what the hook changes on a GPU)
    comm_hook: bool = True


_active = None  # type: Optional[RankInfo]


def active() -> Optional[RankInfo]:
    """This process's rank, when it runs one rank of a data-parallel cell; else None."""
    return _active


def activate(info: RankInfo) -> RankInfo:
    global _active
    _active = info
    return info


def deactivate() -> None:
    global _active
    _active = None


#: the NCCL that can record an all-reduce in a CUDA graph (PyTorch's "CUDA Graphs" notes, usage with
#: DistributedDataParallel: NCCL 2.9.6 or newer)
NCCL_CAPTURE_MIN = (2, 9, 6)


def capturable() -> bool:
    """Whether this process's step may be captured as one CUDA graph as far as data parallelism goes:
    always in a plain cell; in a rank, where its backend is NCCL at NCCL_CAPTURE_MIN or newer (gloo
    runs on the host, which no graph can record)."""
    info = _active
    if info is None:
        return True
    if info.backend != "nccl":
        return False
    try:
        import torch

        version = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - a torch built without NCCL
        return False
    # a tuple since torch 1.11 (before it one packed int; the captured step needs torch 2.0 anyway)
    return isinstance(version, tuple) and tuple(version)[:3] >= NCCL_CAPTURE_MIN


def wrap_model(model: Any) -> Any:
    """``model`` inside DistributedDataParallel when this process is a rank; else ``model``.

    Called after Precision.wrap (after Apex's amp.initialize too). DDP broadcasts rank 0's
    weights and buffers at construction, so every rank starts from the same model, and
    averages the gradients in buckets during backward."""
    info = _active
    if info is None:
        return model
    from torch.nn.parallel import DistributedDataParallel

    hook = info.comm_hook and hasattr(DistributedDataParallel, "register_comm_hook")  # torch 1.8+
    info.ddp_options = dict(ddp_options(DistributedDataParallel),  # what build_ddp passes and registers
                            comm_hook=hook_name(info.backend) if hook else None)
    kwargs = {}
    if info.device.startswith("cuda"):
        import torch

        index = torch.device(info.device).index or 0
        kwargs = {"device_ids": [index], "output_device": index}
    trained = [p for p in model.parameters() if p.requires_grad]
    info.grad_bytes = int(sum(p.numel() * p.element_size() for p in trained))
    info.grad_dtypes = sorted({str(p.dtype).replace("torch.", "") for p in trained})
    return build_ddp(DistributedDataParallel, model, comm_hook=hook, **kwargs)


def hook_name(backend: str) -> str:
    """The communication hook the kit registers on ``backend``: AVERAGE_HOOK on NCCL where torch has
    ReduceOp.AVG, else torch's all-reduce hook (COMM_HOOK)."""
    import torch.distributed as dist

    return AVERAGE_HOOK if backend == "nccl" and hasattr(dist.ReduceOp, "AVG") else COMM_HOOK


def average_hook(process_group, bucket):  # noqa: ANN001 - DDP refuses a hook annotated otherwise than GradBucket
    """A DDP communication hook: the bucket all-reduced as the ranks' average in one NCCL collective
    (ReduceOp.AVG), in place; DDP's gradients are views of the bucket (gradient_as_bucket_view). In a
    group of one the average is the bucket itself, and the hook asks for a SUM: NCCL runs nothing for an
    in-place one-rank sum, while its one-rank AVG of floats still scales every element by 1, a pass over
    all the gradients. No annotations: register_comm_hook refuses any but dist.GradBucket, and this
    module's are strings."""
    import torch.distributed as dist

    group = process_group if process_group is not None else dist.group.WORLD
    op = dist.ReduceOp.SUM if dist.get_world_size(group) == 1 else dist.ReduceOp.AVG
    work = dist.all_reduce(bucket.buffer(), op=op, group=group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def build_ddp(ddp_class: Any, model: Any, comm_hook: bool = True, **kwargs: Any) -> Any:
    """``ddp_class(model, **kwargs)`` with the kit's DDP options (ddp_options), the kit's communication
    hook (hook_name: NCCL's average, or torch's all-reduce hook; torch 1.8+; not with ``comm_hook=False``)
    and no runtime statistics after DDP's first 10 iterations (LATER_STATS_EVERY); wrap_model and
    scripts/probe_ddp_h200.py."""
    ddp = ddp_class(model, **{**ddp_options(ddp_class), **kwargs})
    if comm_hook and hasattr(ddp, "register_comm_hook"):
        import torch.distributed as dist
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        backend = dist.get_backend() if dist.is_initialized() else "gloo"
        hook = average_hook if hook_name(backend) == AVERAGE_HOOK else default_hooks.allreduce_hook
        ddp.register_comm_hook(None, hook)  # None: the default process group
    if hasattr(ddp, "_set_ddp_runtime_logging_sample_rate"):  # torch 1.9+
        ddp._set_ddp_runtime_logging_sample_rate(LATER_STATS_EVERY)
    return ddp


def ddp_options(ddp_class: Any) -> dict:
    """The options of BUFFER_SYNC_OPTIONS (the first the installed DDP takes) and GRADIENT_OPTIONS that
    ``ddp_class``'s constructor takes."""
    import inspect

    try:
        params = inspect.signature(ddp_class.__init__).parameters
    except (TypeError, ValueError):
        return {}
    out = next((dict(opt) for opt in BUFFER_SYNC_OPTIONS if set(opt) <= set(params)), {})
    out.update({k: v for k, v in GRADIENT_OPTIONS.items() if k in params})
    return out


def data_seed(seed: int) -> int:
    """The seed of this rank's batch order: ``seed`` on rank 0 (and in a plain cell), another per rank."""
    info = _active
    return seed if info is None else seed + RANK_SEED_STRIDE * info.rank


def repeat_done(model: Any) -> None:
    """Record a digest of ``model``'s weights after a repeat (nothing in a plain cell)."""
    info = _active
    if info is None:
        return
    info.digests.append(weights_digest(model))


def weights_digest(model: Any) -> str:
    """sha256 over every parameter's bytes, in order (fp32 on the host)."""
    import hashlib

    import torch

    h = hashlib.sha256()
    with torch.no_grad():
        for p in model.parameters():
            h.update(p.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()
