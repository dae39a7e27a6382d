"""Batching for truncated BPTT: column layout, shifted targets, detached hidden state."""

from __future__ import annotations

import string

import pytest

torch = pytest.importorskip("torch")

from kit.bench.lstm.batching import batchify, chunk_starts, get_batch, repackage_hidden  # noqa: E402
from kit.bench.lstm.model import LSTMModel  # noqa: E402

LETTERS = string.ascii_lowercase  # token id i is the letter LETTERS[i]


def as_letters(t: torch.Tensor) -> list[str]:
    return [" ".join(LETTERS[i] for i in row) for row in t.tolist()]


def test_batchify_lays_out_26_letters_in_4_columns_and_drops_the_remainder():
    source = batchify(list(range(26)), 4)
    assert source.shape == (6, 4)
    assert source.dtype == torch.int64
    assert as_letters(source) == [
        "a g m s",
        "b h n t",
        "c i o u",
        "d j p v",
        "e k q w",
        "f l r x",
    ]  # y and z do not fill a row and are dropped


def test_get_batch_targets_are_the_next_row_and_the_last_chunk_is_shorter():
    source = batchify(list(range(26)), 4)
    assert chunk_starts(source, 2) == [0, 2, 4]
    data, target = get_batch(source, 0, 2)
    assert as_letters(data) == ["a g m s", "b h n t"]
    assert as_letters(target) == ["b h n t", "c i o u"]
    data, target = get_batch(source, 4, 2)
    assert as_letters(data) == ["e k q w"]
    assert as_letters(target) == ["f l r x"]


def test_max_batches_caps_the_chunks_of_a_pass():
    source = batchify(list(range(26)), 4)
    assert chunk_starts(source, 2, max_batches=2) == [0, 2]


def test_batchify_refuses_a_stream_too_short_for_one_chunk():
    with pytest.raises(ValueError):
        batchify([1, 2, 3], 4)


def _graph_nodes(t: torch.Tensor) -> int:
    seen, stack = set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return len(seen)


def _chunk_graph_sizes(detach: bool, chunks: int = 6) -> tuple[list[int], object]:
    torch.manual_seed(0)
    model = LSTMModel(ntoken=26, emsize=8, nhid=8, nlayers=2, dropout=0.0)
    source = batchify(list(range(26)) * 4, 4)
    hidden = model.init_hidden(4)
    sizes = []
    for i in chunk_starts(source, 2)[:chunks]:
        data, target = get_batch(source, i, 2)
        if detach:
            hidden = repackage_hidden(hidden)
        logits, hidden = model(data, hidden)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 26), target.reshape(-1))
        sizes.append(_graph_nodes(loss))
        if detach:
            loss.backward()
    return sizes, hidden


def test_repackaged_hidden_state_keeps_values_but_has_no_history():
    torch.manual_seed(0)
    model = LSTMModel(ntoken=26, emsize=8, nhid=8, nlayers=2, dropout=0.0)
    _, hidden = model(batchify(list(range(26)), 4)[:3], model.init_hidden(4))
    assert all(h.grad_fn is not None for h in hidden)
    detached = repackage_hidden(hidden)
    assert all(h.grad_fn is None and not h.requires_grad for h in detached)
    assert all(torch.equal(a, b) for a, b in zip(hidden, detached))


def test_graph_does_not_grow_across_chunks_when_the_hidden_state_is_repackaged():
    sizes, _ = _chunk_graph_sizes(detach=True)
    assert len(set(sizes)) == 1, sizes
    # the control: without repackaging, every chunk drags all earlier ones along
    grown, _ = _chunk_graph_sizes(detach=False)
    assert all(b > a for a, b in zip(grown, grown[1:])), grown
