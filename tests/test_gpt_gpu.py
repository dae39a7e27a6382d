"""The GPT suite on a real GPU (`make test-gpu`; CI has none and skips them): each precision's cell
compiles, trains and records what ran in which precision, fp8 through torchao where the GPU has it
(compute capability 8.9+), skipped with the reason elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

from kit.bench.context import CellContext  # noqa: E402
from kit.bench.gpt import suite  # noqa: E402
from kit.bench.precision import unavailable_reason  # noqa: E402
from kit.results.schema import CellSpec  # noqa: E402

#: the tiny preset, widened so that every GEMM dimension is a multiple of 16 (torch._scaled_mm)
SMALL = {"preset": "tiny", "d_model": 128, "n_heads": 4, "seq_len": 64, "batch_size": 8, "steps": 12}


@pytest.mark.parametrize("mode", ["amp-bf16", "amp-fp16", "fp8-tensorwise", "fp8-rowwise"])
def test_a_compiled_gpt_cell_trains_on_cuda_and_records_its_precision(mode):
    device = "cuda:0"
    spec = CellSpec("gpt", "tiny", mode, "kit", dict(SMALL))
    # convergence mode: its learning-rate schedule is complete in the 12 steps (throughput mode's warms up
    # over 2,000), so the loss falls measurably; the cell reads its corpus as a throughput cell does
    ctx = CellContext(device=device, data_dir=Path("unused"), data_source="synthetic", seed=0, repeats=1, mode="convergence")
    reason = unavailable_reason(mode, device)
    result = suite.run_cell(spec, ctx)
    if reason:  # fp8 before Ada, or without torchao: the cell says why, and nothing ran
        assert result.status == "skipped" and result.reason == reason
        return
    assert result.status == "ok", result.reason
    rep = result.repeats[0]
    assert result.metrics["compile"]["used"] is True and not result.metrics["compile"].get("recompile_warnings")
    assert rep["nan_losses"] == 0 and rep["throughput_items_per_s"] > 0 and rep["peak_memory_bytes"] > 0
    losses = rep["metrics"]["train_loss"]
    assert losses[-1] < losses[0] - 0.2, losses  # 12 steps of a fresh model lower the loss (by 0.65 in fp32 on a CPU)
    assert rep["final_metric"] == rep["metrics"]["heldout_loss"] < losses[0]
    layers = result.metrics["layers_high_precision"]
    if mode.startswith("fp8"):
        fp8 = result.metrics["fp8"]
        assert fp8["fp8_linear_layers"] == 4 * 2  # qkv, proj, fc, fc2 in each of the 2 blocks
        assert "lm_head" in layers and "bf16" in layers["lm_head"]
    else:
        assert "all Linear layers" in layers
