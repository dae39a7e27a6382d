"""A cell's compilation starts fresh: Dynamo's compilations of the cells before it dropped, and no
on-disk cache that could serve it a step compiled under another precision (kit.bench's engines that
compile their step: the CIFAR `torch` engine and the GPT suite)."""

from __future__ import annotations

import importlib

from kit.results import precisions as precision_modes


#: why a cell that compiles its step under autocast turns AOTAutograd's on-disk cache off
AUTOGRAD_CACHE_OFF = (
    "AOTAutograd's on-disk cache off: in PyTorch 2.11 its key lacks the autocast dtype, so a step compiled "
    "under fp16 autocast was reused under bf16 (an H100's amp-bf16 cells ran fp16 kernels, "
    "references/h100/explain/); 2.14's key has it. Inductor's own cache keys on the graph after autocast's "
    "casts and stays on")


def reset_compiler() -> bool:
    """Drop Dynamo's compilations in this process (``torch._dynamo.reset``): before a cell compiles, and
    after a compilation that failed. False where this PyTorch has no compiler stack."""
    try:
        dynamo = importlib.import_module("torch._dynamo")
    except ImportError:
        return False
    try:
        dynamo.reset()
    except Exception:  # nothing compiled yet, or a failed compilation's half state: nothing left to drop
        pass
    return True


def fresh_compilation(precision: str) -> str | None:
    """Before a cell compiles its step: Dynamo's compilations of earlier cells dropped
    (``torch._dynamo.reset``), and where the precision runs under autocast, AOTAutograd's on-disk cache
    turned off for the rest of the process (:data:`AUTOGRAD_CACHE_OFF`: a cache hit across autocast
    dtypes measures one precision under another's name). Returns the note the cell records for it, or
    None where nothing was turned off."""
    if not reset_compiler():  # a PyTorch without the compiler stack compiles nothing
        return None
    try:
        functorch = importlib.import_module("torch._functorch.config")
    except ImportError:
        return None
    mode = precision_modes.BY_NAME.get(precision)
    if mode is None or not mode.autocast or not hasattr(functorch, "enable_autograd_cache"):
        return None
    functorch.enable_autograd_cache = False
    return AUTOGRAD_CACHE_OFF
