"""The GPT suite's model, data and fp8 plan on the CPU: shapes, causal masking, training
lowers the loss, the FLOP formula against PyTorch's own count, which layers fp8 converts."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kit.bench.gpt import fp8  # noqa: E402
from kit.bench.gpt.config import resolve  # noqa: E402
from kit.bench.gpt.data import TokenBatches, heldout_batches  # noqa: E402
from kit.bench.gpt.model import GPT, count_params, lm_loss  # noqa: E402
from kit.bench.gpt.train import CompileState, run_repeat  # noqa: E402
from kit.facts.models import GPT_PRESETS, gpt_matmul_params, gpt_train_flops_per_token  # noqa: E402


def tiny(vocab: int = 64, seq_len: int = 16, d: int = 32, layers: int = 2, heads: int = 4) -> GPT:
    torch.manual_seed(0)
    return GPT(vocab, seq_len, d, layers, heads)


def test_logits_have_one_row_per_token_and_one_column_per_vocabulary_entry():
    model = tiny()
    ids = torch.randint(0, 64, (3, 16))
    assert model(ids).shape == (3, 16, 64)
    assert model(ids[:, :5]).shape == (3, 5, 64)  # shorter sequences use the first positions


def test_a_sequence_longer_than_the_context_is_refused():
    with pytest.raises(ValueError, match="longer than the model's context"):
        tiny()(torch.zeros(1, 17, dtype=torch.int64))


def test_future_tokens_do_not_change_earlier_logits():
    model = tiny().eval()
    ids = torch.randint(0, 64, (2, 16))
    changed = ids.clone()
    changed[:, 10:] = (changed[:, 10:] + 7) % 64  # every token from position 10 on differs
    with torch.no_grad():
        a, b = model(ids), model(changed)
    torch.testing.assert_close(a[:, :10], b[:, :10])
    assert not torch.allclose(a[:, 10:], b[:, 10:])  # the change is visible where it may be


def test_the_lm_head_is_untied_and_the_parameter_count_matches_the_formula():
    model = tiny()
    assert model.lm_head.weight.data_ptr() != model.wte.weight.data_ptr()
    matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert matmul == gpt_matmul_params(32, 2, 64)
    # a ~1B decoder (the gpt-1b preset's shape) at vocabulary 33,280: 944M parameters
    with torch.device("meta"):
        big = GPT(33280, 1024, 2048, 16, 16)
    assert round(count_params(big) / 1e6) == 944


def test_the_flop_formula_matches_pytorchs_count_of_a_training_step():
    """6 N + 12 L d T: PyTorch's FLOP counter over a forward and backward pass, attention by
    its math kernel (plain matmuls the counter sees; the fused CPU kernel is not counted)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    model = tiny()
    ids = torch.randint(0, 64, (2, 16))
    counter = FlopCounterMode(display=False)
    with counter, sdpa_kernel(SDPBackend.MATH):
        lm_loss(model(ids), ids).backward()
    per_token = counter.get_total_flops() / ids.numel()
    assert per_token == pytest.approx(gpt_train_flops_per_token(32, 2, 16, 64), rel=1e-6)


def test_training_steps_lower_the_loss_on_a_learnable_stream():
    ids = np.tile(np.arange(16, dtype=np.int64), 300)  # 0 1 2 ... 15 0 1 2 ...: fully predictable
    cfg = resolve({"preset": "tiny", "steps": 40, "lr": 3e-3}, "convergence")
    rec = run_repeat(cfg, ids, None, 16, "fp32", "cpu", seed=0, flops_per_token=1,
                     comp=CompileState("off", False, "test"), warmup_steps=1)
    curve = rec["metrics"]["train_loss"]
    assert len(curve) == 40 and rec["steps"] == 40
    assert np.mean(curve[-5:]) < np.mean(curve[:5]) - 1.0


def test_batches_are_next_token_windows_of_the_stream():
    ids = np.arange(1000, dtype=np.int64)
    x, y = TokenBatches(ids, 8, 4, "cpu", seed=0).next()
    assert x.shape == y.shape == (4, 8)
    assert torch.equal(y[:, :-1], x[:, 1:]) and torch.equal(y[:, -1], x[:, -1] + 1)
    held = heldout_batches(ids, 8, 4, 2, "cpu")
    assert len(held) == 2 and torch.equal(held[0][0][1], torch.arange(8, 16))


def test_the_fp8_recipe_converts_every_block_linear_and_keeps_the_lm_head_in_bf16():
    plan = fp8.plan_conversion(tiny())
    assert plan["fp8_linear_layers"] == 2 * 4
    assert plan["fp8_linear_patterns"] == ["blocks.*.attn.c_attn", "blocks.*.attn.c_proj", "blocks.*.mlp.c_fc", "blocks.*.mlp.c_proj"]
    assert list(plan["kept_high_precision"]) == ["lm_head"]
    assert not fp8.module_filter_fn(tiny().lm_head, "lm_head")


def test_a_linear_fp8_cannot_tile_stays_in_bf16_with_the_reason():
    odd = torch.nn.Linear(24, 40, bias=False)
    assert not fp8.module_filter_fn(odd, "blocks.0.mlp.c_fc")
    assert "multiple of 16" in fp8.plan_conversion(torch.nn.Sequential(odd))["kept_high_precision"]["0"]


def test_every_fp8_preset_dimension_is_a_multiple_of_16():
    for name, p in GPT_PRESETS.items():
        with torch.device("meta"):
            model = GPT(33280, p["seq_len"], p["d_model"], p["n_layers"], p["n_heads"])
        assert list(fp8.plan_conversion(model)["kept_high_precision"]) == ["lm_head"], name
