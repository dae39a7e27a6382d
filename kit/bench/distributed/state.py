"""The data-parallel state of this process, and the engines' hooks (no-ops in a plain cell).

The rank worker (kit.bench.distributed.worker) activates it; the CIFAR torch engine and the
LSTM call the hooks, so one code path trains a plain cell and every rank of a data-parallel one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

#: offset between the data seeds of two ranks (a prime, so ranks never share a repeat's seed)
RANK_SEED_STRIDE = 7919


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

    kwargs = {}
    if info.device.startswith("cuda"):
        import torch

        index = torch.device(info.device).index or 0
        kwargs.update(device_ids=[index], output_device=index)
    trained = [p for p in model.parameters() if p.requires_grad]
    info.grad_bytes = int(sum(p.numel() * p.element_size() for p in trained))
    info.grad_dtypes = sorted({str(p.dtype).replace("torch.", "") for p in trained})
    return DistributedDataParallel(model, **kwargs)


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
