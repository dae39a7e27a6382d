"""The word-level language model of Apex's examples/word_language_model.

    token ids (seq, bsz) -> Embedding(ntoken, emsize) -> Dropout
      -> LSTM(emsize, nhid, nlayers, dropout between layers)   (cuDNN on a GPU)
      -> Dropout -> Linear(nhid, ntoken) -> logits (seq, bsz, ntoken)

Weights of the embedding and decoder start uniform in [-0.1, 0.1] and the
decoder bias at zero, drawn in the example's order (tied: the shared matrix is
drawn twice, as there); the LSTM keeps PyTorch's own init.
With ``tied`` the decoder reuses the embedding matrix (needs emsize == nhid).
"""

from __future__ import annotations

import torch
from torch import nn

from kit.errors import UsageError

INIT_RANGE = 0.1


def pad_vocab(n: int, multiple: int) -> int:
    """Round a vocabulary size up to a multiple (33,278 -> 33,280 for 8).

    The extra ids are never produced by the data, so they only add rows to the
    embedding and decoder that Tensor Core GEMMs can tile evenly."""
    if multiple < 1:
        raise ValueError("multiple must be at least 1")
    return -(-n // multiple) * multiple


class LSTMModel(nn.Module):
    def __init__(self, ntoken: int, emsize: int, nhid: int, nlayers: int, dropout: float = 0.5, tied: bool = False):
        super().__init__()
        if tied and emsize != nhid:
            raise UsageError(
                f"tied weights need emsize == nhid; got emsize={emsize}, nhid={nhid}",
                remedy="Pass --nhid equal to --emsize, or drop --tied.",
            )
        self.ntoken, self.nhid, self.nlayers = ntoken, nhid, nlayers
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, emsize)
        self.rnn = nn.LSTM(emsize, nhid, nlayers, dropout=dropout if nlayers > 1 else 0.0)
        self.decoder = nn.Linear(nhid, ntoken)
        if tied:
            self.decoder.weight = self.encoder.weight
        self.init_weights()

    def init_weights(self) -> None:
        # the example's order and draws: with tied weights the shared matrix is drawn
        # twice and keeps the second draw, so the random stream matches the example's
        nn.init.uniform_(self.encoder.weight, -INIT_RANGE, INIT_RANGE)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -INIT_RANGE, INIT_RANGE)

    def forward(self, tokens: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]):
        emb = self.drop(self.encoder(tokens))
        output, hidden = self.rnn(emb, hidden)
        return self.decoder(self.drop(output)), hidden

    def init_hidden(self, bsz: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Zero (h, c) in the weights' dtype and device (half for a halved model)."""
        w = self.decoder.weight
        shape = (self.nlayers, bsz, self.nhid)
        return (w.new_zeros(shape), w.new_zeros(shape))
