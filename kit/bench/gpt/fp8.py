"""fp8 training through torchao's float8 recipes (``torchao.float8``).

``convert_to_float8_training`` swaps the chosen ``nn.Linear`` modules for
``Float8Linear``: their three GEMMs (forward, grad-input, grad-weight) run in fp8 through
``torch._scaled_mm`` with dynamic scales, per tensor ("tensorwise") or per row
("rowwise", scales rounded to powers of 2). Everything else runs as in amp-bf16 (the mode's
autocast is bf16, see kit.bench.precision): embeddings, LayerNorms, attention (SDPA), GELU,
the loss. Weights and optimizer state stay fp32.

Which Linear layers stay in higher precision (recorded per cell, :func:`plan_conversion`):

* ``lm_head``: bf16 (autocast). The vocabulary projection feeds the softmax directly, and
  torchao's and torchtitan's recipes leave it out ("output" in torchtitan's
  ``filter_fqns``).
* any Linear whose in/out features are not multiples of 16 (``torch._scaled_mm``'s rule):
  bf16. None of the presets has one.
"""

from __future__ import annotations

import re

from torch import nn

from kit.bench.precision import FP8_RECIPES

#: Linear layers never converted, by name (see the module docstring).
KEEP_HIGH_PRECISION = ("lm_head",)
#: torch._scaled_mm needs both GEMM dimensions divisible by 16.
FP8_DIM_MULTIPLE = 16


def _why_kept(fqn: str, mod: nn.Module) -> str | None:
    if not isinstance(mod, nn.Linear):
        return None
    if fqn in KEEP_HIGH_PRECISION:
        return "bf16 (autocast): the LM head is kept out of fp8"
    if mod.in_features % FP8_DIM_MULTIPLE or mod.out_features % FP8_DIM_MULTIPLE:
        return f"bf16 (autocast): {mod.in_features}x{mod.out_features} is not a multiple of {FP8_DIM_MULTIPLE} (torch._scaled_mm)"
    return None


def module_filter_fn(mod: nn.Module, fqn: str) -> bool:
    """torchao's filter: True = convert this module to Float8Linear."""
    return isinstance(mod, nn.Linear) and _why_kept(fqn, mod) is None


def _pattern(fqn: str) -> str:
    return re.sub(r"\.\d+\.", ".*.", fqn)


def plan_conversion(model: nn.Module) -> dict:
    """Which Linear layers the fp8 recipe converts and which stay in higher precision (and why)."""
    converted: list[str] = []
    kept: dict[str, str] = {}
    for fqn, mod in model.named_modules():
        if not isinstance(mod, nn.Linear):
            continue
        why = _why_kept(fqn, mod)
        if why is None:
            converted.append(fqn)
        else:
            kept[fqn] = why
    return {
        "fp8_linear_layers": len(converted),
        "fp8_linear_patterns": list(dict.fromkeys(_pattern(f) for f in converted)),
        "kept_high_precision": kept,
        "not_linear": "embeddings, LayerNorms, attention (SDPA), GELU and the loss run in bf16 (autocast) or fp32",
    }


def convert(model: nn.Module, mode: str) -> dict:
    """Convert ``model`` in place for fp8 ``mode``; returns what was done (for the cell's record)."""
    import torchao
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    recipe = FP8_RECIPES[mode]
    config = Float8LinearConfig.from_recipe_name(recipe)
    plan = plan_conversion(model)
    convert_to_float8_training(model, module_filter_fn=module_filter_fn, config=config)
    swapped = sum(type(m).__name__ == "Float8Linear" for m in model.modules())
    return {
        "recipe": recipe,
        "torchao_version": getattr(torchao, "__version__", "unknown"),
        "config": f"Float8LinearConfig.from_recipe_name({recipe!r})",
        **plan,
        "fp8_linear_layers": swapped,
    }
