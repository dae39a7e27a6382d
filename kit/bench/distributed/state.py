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
#: six dispatched operations per parameter per step; with torch's own all-reduce hook it copies
#: (copy_ into the bucket's view of the gradient) and divides once per bucket in the hook, two per
#: parameter. Counted with torch.profiler on a one-rank gloo DDP of ResNet-50 (161 parameters), kit
#: options, set_to_none: 976 extra operations per step without the hook, 357 with it (plain: 3,508). In
#: an eager step that the host paces (ResNet-50 at 224 px on an H200: references/h200/ddp), every
#: dispatched operation is host time. The averaging is the same up to rounding: the reducer multiplies
#: by 1 / N, the hook divides by N, which agree bit for bit where N is a power of two (1, 2, 4, 8 GPUs;
#: a one-rank DDP trains the plain model's weights exactly, tests/test_ddp_cells.py) and can differ in
#: the last bit otherwise; every rank does the same, so the ranks stay in step either way.
COMM_HOOK = "torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook"

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
    #: and its communication hook ("comm_hook": COMM_HOOK, or None where torch has no hooks or comm_hook is off)
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
                            comm_hook=COMM_HOOK if hook else None)
    kwargs = {}
    if info.device.startswith("cuda"):
        import torch

        index = torch.device(info.device).index or 0
        kwargs = {"device_ids": [index], "output_device": index}
    trained = [p for p in model.parameters() if p.requires_grad]
    info.grad_bytes = int(sum(p.numel() * p.element_size() for p in trained))
    info.grad_dtypes = sorted({str(p.dtype).replace("torch.", "") for p in trained})
    return build_ddp(DistributedDataParallel, model, comm_hook=hook, **kwargs)


def build_ddp(ddp_class: Any, model: Any, comm_hook: bool = True, **kwargs: Any) -> Any:
    """``ddp_class(model, **kwargs)`` with the kit's DDP options (ddp_options), torch's all-reduce
    communication hook (COMM_HOOK, torch 1.8+; not with ``comm_hook=False``) and no runtime statistics
    after DDP's first 10 iterations (LATER_STATS_EVERY); wrap_model and scripts/probe_ddp_h200.py."""
    ddp = ddp_class(model, **{**ddp_options(ddp_class), **kwargs})
    if comm_hook and hasattr(ddp, "register_comm_hook"):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        ddp.register_comm_hook(None, default_hooks.allreduce_hook)  # None: the default process group
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
