r"""Training and held-out batches from one token stream, made on the device.

The corpus (kit.data.wikitext: real WikiText-2 or its synthetic stand-in) is one long
stream of ids per split. A training batch is ``batch`` windows of ``T + 1`` tokens at
random offsets (nanoGPT's ``get_batch``); the input is the first T, the target the last T
(the next token of each)::

    stream   ... w0 w1 w2 w3 w4 w5 w6 w7 ...
    offset i=1, T=4:  x = w1 w2 w3 w4
                      y = w2 w3 w4 w5

The whole split lives on the device (2.1M int64 ids = 17 MB) and the offsets are drawn
there from a seeded generator, so making a batch is two gathers: no host work, no copy,
no sync, nothing of data loading in the measured time.

Held-out batches (convergence mode) are the valid split's first consecutive,
non-overlapping windows: the same tokens for every precision and repeat.
"""

from __future__ import annotations

import torch


class TokenBatches:
    def __init__(self, ids, seq_len: int, batch_size: int, device: str, seed: int):
        self.data = torch.as_tensor(ids, dtype=torch.int64).reshape(-1).to(device)
        if self.data.numel() < seq_len + 1:
            raise ValueError(f"{self.data.numel()} tokens cannot make a window of {seq_len} + 1")
        self.seq_len, self.batch_size = seq_len, batch_size
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self._arange = torch.arange(seq_len + 1, device=device)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y), both (batch, seq_len) int64 on the device; y is x shifted by one token."""
        high = self.data.numel() - self.seq_len  # an offset leaves seq_len + 1 tokens
        offsets = torch.randint(0, high, (self.batch_size,), device=self.data.device, generator=self.generator)
        windows = self.data[offsets[:, None] + self._arange]
        return windows[:, :-1], windows[:, 1:]


def heldout_batches(ids, seq_len: int, batch_size: int, n_batches: int, device: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Up to ``n_batches`` (x, y) batches of consecutive windows from the start of ``ids``."""
    data = torch.as_tensor(ids, dtype=torch.int64).reshape(-1)
    n_windows = min(batch_size * n_batches, (data.numel() - 1) // seq_len)
    if n_windows < 1:
        raise ValueError(f"{data.numel()} tokens cannot make a window of {seq_len} + 1")
    out = []
    for start in range(0, n_windows, batch_size):
        rows = range(start, min(start + batch_size, n_windows))
        w = torch.stack([data[r * seq_len: r * seq_len + seq_len + 1] for r in rows]).to(device)
        out.append((w[:, :-1], w[:, 1:]))
    return out
