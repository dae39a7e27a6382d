"""What the installed PyTorch can do, asked once, so the benchmark runs what the
stack offers and skips the rest with a reason.

The cuda10 image (the 2019 stack: torch 1.4, torchvision 0.5, fastai v1) runs
the same runner as today's images; features that arrived later are switched off
here instead of failing mid-cell. Each flag is feature-tested, not read from the
version number, except where a feature exists earlier in a form the kit cannot use
(noted beside it).
"""

from __future__ import annotations

import re

import torch
from torch import nn

#: (major, minor) of the installed torch, e.g. (2, 11) or (1, 4).
TORCH: tuple = tuple(int(x) for x in re.findall(r"\d+", torch.__version__)[:2])

#: torch.autocast (1.10; torch.cuda.amp arrived in 1.6). Without it there is no
#: amp-fp16 / amp-bf16: the 2019 stack's mixed precision is fp16-master or Apex.
HAS_AUTOCAST = hasattr(torch, "autocast")
#: torch.backends.cuda.matmul.allow_tf32 (1.7, with Ampere).
HAS_TF32_SWITCH = hasattr(getattr(torch.backends, "cuda", None), "matmul")
#: torch.channels_last memory format (1.5).
HAS_CHANNELS_LAST = hasattr(torch, "channels_last")
#: torch.compile (2.0).
HAS_COMPILE = hasattr(torch, "compile")
#: The whole-step CUDA graph (kit/bench/cifar/graphed.py) needs torch.cuda.graph and
#: the _foreach ops and GradScaler kernels of torch 2.x.
HAS_GRAPHED_STEP = TORCH >= (2, 0) and hasattr(torch.cuda, "graph")
#: torch._amp_foreach_non_finite_check_and_unscale_ (1.6, GradScaler's fused kernel).
HAS_FOREACH_UNSCALE = hasattr(torch, "_amp_foreach_non_finite_check_and_unscale_")
#: torch.optim's foreach switch (torch 1.12+; before it every optimizer updated parameter by parameter)
HAS_OPTIM_FOREACH = "foreach" in torch.optim.SGD.__init__.__code__.co_varnames
#: torch's fused SGD kernel (torch.optim.SGD(fused=True)) taking the learning rate as a device
#: tensor and an overflow flag (its tensor_lr overload, torch 2.4+): the captured step's update.
HAS_FUSED_SGD = hasattr(torch, "_fused_sgd_") and "tensor_lr" in torch.ops.aten._fused_sgd_.overloads()
#: CrossEntropyLoss(label_smoothing=...) (1.10).
HAS_LABEL_SMOOTHING = "label_smoothing" in nn.CrossEntropyLoss.__init__.__code__.co_varnames


def no_autocast_reason() -> str:
    return (f"torch {torch.__version__} has no autocast (torch.cuda.amp arrived in 1.6, torch.autocast in 1.10); "
            "this stack's mixed precision is fp16-master (fastai v1's to_fp16) or apex-o1/o2")


def cross_entropy(label_smoothing: float = 0.0) -> nn.Module:
    """CrossEntropyLoss; label smoothing only where torch has it (asking for it
    on an older torch is an error, never silently dropped)."""
    if not label_smoothing:
        return nn.CrossEntropyLoss()
    if not HAS_LABEL_SMOOTHING:
        raise RuntimeError(f"label smoothing needs torch 1.10 or newer; this is {torch.__version__}")
    return nn.CrossEntropyLoss(label_smoothing=label_smoothing)


def zero_grad(optimizer) -> None:
    """optimizer.zero_grad(set_to_none=True) where torch has it (1.7), else zeroing."""
    try:
        optimizer.zero_grad(set_to_none=True)
    except TypeError:
        optimizer.zero_grad()
