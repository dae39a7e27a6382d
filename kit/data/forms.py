"""What a loaded data set is in memory: the forms that the readers (kit.data.cifar,
kit.data.wikitext) and the generator of their synthetic stand-ins (kit.data.synthetic)
both produce. It sits below all three, so the generator imitates the readers' output
without importing the readers, which import the generator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kit.errors import UsageError

EOS = "<eos>"


@dataclass
class CifarData:
    """CIFAR-100 (or its synthetic stand-in) as numpy arrays.

    ``train_x``/``test_x``: uint8 [N, 32, 32, 3] (NHWC); ``train_y``/``test_y``: int64 [N]
    fine labels; ``classes``: the 100 fine label names (synthetic names for synthetic
    data); ``info``: provenance (``source``, ``file``, checksum, sizes)."""

    train_x: Any
    train_y: Any
    test_x: Any
    test_y: Any
    classes: list[str]
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Dictionary:
    idx2word: list[str]
    word2idx: dict[str, int]

    def __len__(self) -> int:
        return len(self.idx2word)


@dataclass
class Corpus:
    """A tokenised corpus. ``train``/``valid``/``test``: int64 numpy arrays of ids.

    ``vocab_size`` is ``len(dictionary)`` after optional padding (Apex padded
    33,278 to 33,280 for Tensor Cores); padding ids never occur in the data."""

    dictionary: Dictionary
    train: Any
    valid: Any
    test: Any
    vocab_size: int
    info: dict[str, Any] = field(default_factory=dict)


def pad_vocabulary(dictionary: Dictionary, multiple: int) -> int:
    """Append dummy words ``<pad0>``, ``<pad1>``, ... until the size is a multiple of ``multiple``."""
    if multiple < 1:
        raise UsageError("pad_vocab_to must be at least 1")
    i = 0
    while len(dictionary.idx2word) % multiple:
        word = f"<pad{i}>"
        i += 1
        if word in dictionary.word2idx:
            continue
        dictionary.word2idx[word] = len(dictionary.idx2word)
        dictionary.idx2word.append(word)
    return len(dictionary.idx2word)
