"""A GPT-style decoder-only transformer (the shape of GPT-2 / nanoGPT).

    token ids (B, T) -> wte(ids) + wpe(0..T-1)                      (B, T, d)
      -> n_layers x Block:                                           pre-LayerNorm
           x = x + proj(attention(ln_1(x)))     causal scaled_dot_product_attention
           x = x + mlp(ln_2(x))                 Linear(d, 4d) -> GELU -> Linear(4d, d)
      -> ln_f -> lm_head: Linear(d, vocab), no bias                  (B, T, vocab) logits

Attention inside a block, for h heads of size d / h::

    qkv = c_attn(x)                       (B, T, 3d)
    q, k, v -> (B, h, T, d/h) each
    y = SDPA(q, k, v, is_causal=True)     position t attends to positions <= t only
    y -> (B, T, d) -> c_proj

Linear layers carry no bias (as nanoGPT's ``bias=False``: slightly faster, no worse), so
every GEMM is a plain ``x @ W.T`` that torchao's Float8Linear can take over. No dropout
(a benchmark, and nanoGPT's default for pre-training at this scale is 0).

**The LM head is untied** from the token embedding: the presets' parameter counts
(944M for d=2048 x 16, 1.9B for d=4096 x 8 at vocabulary 33,280) are those of an untied
head, and an untied head lets the fp8 recipes keep it in bf16 (module_filter_fn) without
a weight shared between an Embedding and a converted Linear. Initialisation: GPT-2's,
normal(0, 0.02), residual projections scaled by 1/sqrt(2 n_layers).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

INIT_STD = 0.02


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.n_heads = n_heads
        self.c_attn = nn.Linear(d_model, 3 * d_model, bias=False)
        self.c_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q = q.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)
        k = k.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)
        v = v.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))


class MLP(nn.Module):
    def __init__(self, d_model: int):
        super().__init__()
        self.c_fc = nn.Linear(d_model, 4 * d_model, bias=False)
        self.gelu = nn.GELU(approximate="tanh")  # GPT-2's GELU
        self.c_proj = nn.Linear(4 * d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size: int, seq_len: int, d_model: int, n_layers: int, n_heads: int):
        super().__init__()
        self.seq_len = seq_len
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_heads) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):  # GPT-2: residual projections scaled by depth
                nn.init.normal_(p, mean=0.0, std=INIT_STD / math.sqrt(2 * n_layers))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        """The residual stream after the last block (before ln_f): (B, T, d)."""
        t = ids.size(1)
        if t > self.seq_len:
            raise ValueError(f"sequence of {t} tokens is longer than the model's context of {self.seq_len}")
        pos = torch.arange(t, device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return x

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.ln_f(h))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, vocab)."""
        return self.logits(self.hidden(ids))


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy, on an fp32 view of the logits (autocast's choice for
    cross_entropy; bf16 logits would lose the loss's small differences)."""
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
