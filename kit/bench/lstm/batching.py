r"""From one long token stream to the chunks truncated BPTT trains on.

``batchify`` cuts the stream into ``bsz`` equal columns, each a contiguous run
of text, and drops the remainder that does not fill a whole row. With the 26
tokens a..z and ``bsz = 4`` (y and z are dropped)::

    stream  a b c d e f | g h i j k l | m n o p q r | s t u v w x | y z
            '--column 0-' '--column 1-' '--column 2-' '--column 3-'  dropped

    batchify(stream, 4) -> shape (nbatch=6, bsz=4), one text per column:

        row 0   a g m s
        row 1   b h n t
        row 2   c i o u
        row 3   d j p v
        row 4   e k q w
        row 5   f l r x

``get_batch(source, i, bptt)`` takes ``bptt`` rows starting at row ``i`` as the
input and the same rows shifted down by one as the target (the next word of
each column). With ``bptt = 2``::

    i = 0:  data   a g m s      target  b h n t
                   b h n t              c i o u

    i = 2:  data   c i o u      target  d j p v
                   d j p v              e k q w

    i = 4:  data   e k q w      target  f l r x     (only 1 row left: the last
                                                     chunk is shorter)

The columns are independent streams, so the LSTM's hidden state at the end of
one chunk is the right starting state for the next chunk of the same column.
``repackage_hidden`` keeps those values but cuts the autograd history, so
back-propagation stops at the chunk boundary (truncated BPTT) and the graph
does not grow with every chunk.
"""

from __future__ import annotations

from typing import Union

import torch

Hidden = Union[torch.Tensor, tuple]


def batchify(ids, bsz: int, device: str | torch.device = "cpu") -> torch.Tensor:
    """A 1-D token sequence (tensor or numpy int array) -> (nbatch, bsz) int64 tensor."""
    data = torch.as_tensor(ids, dtype=torch.int64).reshape(-1)
    nbatch = data.numel() // bsz
    if nbatch < 2:
        raise ValueError(f"{data.numel()} tokens cannot make batches of {bsz} columns with at least 2 rows")
    data = data[: nbatch * bsz]
    # row-major (bsz, nbatch) holds one contiguous text per row; transposing makes
    # them columns, so a chunk of rows is `bsz` parallel pieces of text.
    return data.view(bsz, nbatch).t().contiguous().to(device)


def get_batch(source: torch.Tensor, i: int, bptt: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(data, target), both (seq_len, bsz); target is data shifted by one row."""
    seq_len = min(bptt, source.size(0) - 1 - i)
    if seq_len < 1:
        raise IndexError(f"row {i} leaves no next-token target in a source of {source.size(0)} rows")
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len]
    return data, target


def chunk_starts(source: torch.Tensor, bptt: int, max_batches: int | None = None) -> list[int]:
    """The row indices ``get_batch`` is called with for one pass, capped at ``max_batches``."""
    starts = list(range(0, source.size(0) - 1, bptt))
    return starts[:max_batches] if max_batches else starts


def repackage_hidden(h: Hidden) -> Hidden:
    """Same values, no autograd history (recursively for the LSTM's (h, c) tuple)."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)
