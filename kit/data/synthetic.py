"""Synthetic stand-ins with the exact shapes of CIFAR-100 and WikiText-2.

For machines that cannot download the real data (the GPU machine has no network).
They make throughput measurements honest (same tensor shapes, same vocabulary size,
same number of steps per epoch) and nothing else: accuracy and perplexity on them
mean nothing. Every object they return says ``info["source"] == "synthetic"``.

Both generators are deterministic for a given seed, need no network and run in
well under two seconds.

CIFAR-100-shaped: 50,000 + 10,000 uint8 images [32, 32, 3], labels 0..99, exactly
balanced (500 / 100 per class), shuffled. Each class has its own smooth colour
pattern (4x4 blocks of colour blown up to 32x32) under uniform noise, so a model can
learn *something* and the loss curve is not flat, but the images are not pictures.

WikiText-2-shaped: exactly 2,088,628 / 217,646 / 245,569 tokens and a vocabulary of
exactly 33,278, word ids drawn from a Zipf(1) distribution (natural text is close to
Zipf), every word appearing at least once in train, and ``<eos>`` closing lines whose
count per split matches WikiText-2's (so the mean line length is realistic). Ids are
then renumbered in order of first appearance, exactly as the real reader numbers them.
"""

from __future__ import annotations

from typing import Any

from kit.facts.datasets import CIFAR100, CIFAR_IMAGE_SHAPE, WIKITEXT2, WIKITEXT2_LINES

SYNTHETIC_NOTE = "Synthetic data with the published shapes: good for throughput only; accuracy and perplexity on it mean nothing."
#: Bumped whenever the generators change what they produce for a given seed.
GENERATOR_VERSION = 1


def cifar100_like(seed: int = 0, *, n_train: int | None = None, n_test: int | None = None, n_classes: int | None = None):
    """CIFAR-100-shaped synthetic data (a :class:`kit.data.forms.CifarData`).

    ``n_train``/``n_test``/``n_classes`` shrink it for tests; the defaults are the published sizes."""
    import numpy as np

    from kit.data.forms import CifarData

    sizes = CIFAR100.sizes or {}
    n_train = sizes["train"] if n_train is None else n_train
    n_test = sizes["test"] if n_test is None else n_test
    k = sizes["classes"] if n_classes is None else n_classes
    if n_train % k or n_test % k:
        raise ValueError("n_train and n_test must be multiples of n_classes (balanced labels)")
    h, w, c = CIFAR_IMAGE_SHAPE
    rng = np.random.default_rng(seed)

    # One smooth pattern per class: 4x4 cells of random colour, each cell 8x8 pixels.
    cells = rng.integers(0, 128, size=(k, 4, 4, c), dtype=np.uint8)
    templates = cells.repeat(h // 4, axis=1).repeat(w // 4, axis=2).reshape(k, -1)

    def split(n: int) -> tuple[Any, Any]:
        y = np.repeat(np.arange(k, dtype=np.int64), n // k)
        rng.shuffle(y)
        # Uniform noise in 0..127: raw generator words viewed as bytes (several times
        # faster than rng.integers for 150 MB), halved so that noise + pattern (0..127)
        # stays within uint8 and can be added in place.
        x = rng.bit_generator.random_raw((n * h * w * c + 7) // 8).view(np.uint8)[: n * h * w * c].reshape(n, -1)
        x >>= 1
        order = np.argsort(y, kind="stable")
        per = n // k
        for cls in range(k):
            x[order[cls * per : (cls + 1) * per]] += templates[cls]
        return x.reshape(n, h, w, c), y

    train_x, train_y = split(n_train)
    test_x, test_y = split(n_test)
    classes = [f"synthetic_class_{i:02d}" for i in range(k)]
    info = {
        "dataset": CIFAR100.name,
        "source": "synthetic",
        "generator": f"kit.data.synthetic.cifar100_like v{GENERATOR_VERSION}",
        "seed": seed,
        "file": None,
        "checksum_verified": None,
        "sizes": {"train": n_train, "test": n_test, "classes": k},
        "note": SYNTHETIC_NOTE,
    }
    return CifarData(train_x, train_y, test_x, test_y, classes, info)


def wikitext2_like(
    seed: int = 0,
    *,
    pad_vocab_to: int = 1,
    tokens: dict[str, int] | None = None,
    vocab: int | None = None,
    lines: dict[str, int] | None = None,
):
    """WikiText-2-shaped synthetic corpus (a :class:`kit.data.forms.Corpus`).

    ``tokens``/``vocab``/``lines`` shrink it for tests; the defaults are the published sizes."""
    import numpy as np

    from kit.data.forms import Corpus, Dictionary, pad_vocabulary

    sizes = WIKITEXT2.sizes or {}
    tokens = tokens or {s: sizes[s] for s in ("train", "valid", "test")}
    vocab = sizes["vocab"] if vocab is None else vocab
    lines = lines or {s: max(1, round(WIKITEXT2_LINES[s] * tokens[s] / sizes[s])) for s in tokens}
    n_words = vocab - 1  # every id except <eos>
    if tokens["train"] - lines["train"] < n_words:
        raise ValueError("the train split is too short to hold every word once")
    rng = np.random.default_rng(seed)

    # Zipf(1) over word ids 1..n_words: p(rank r) proportional to 1/r.
    p = 1.0 / np.arange(1, n_words + 1, dtype=np.float64)
    cdf = np.cumsum(p)
    cdf /= cdf[-1]

    EOS = 0
    out: dict[str, Any] = {}
    for name in ("train", "valid", "test"):
        n, n_lines = tokens[name], lines[name]
        ids = np.searchsorted(cdf, rng.random(n), side="right").astype(np.int64) + 1
        np.minimum(ids, n_words, out=ids)  # guard the float edge at cdf[-1]
        # Line ends: the last token, plus n_lines-1 other random positions.
        ends = rng.choice(n - 1, size=n_lines - 1, replace=False)
        ids[ends] = EOS
        ids[n - 1] = EOS
        if name == "train":
            # Every word at least once: write a permutation of all ids over random word slots.
            slots = np.flatnonzero(ids != EOS)
            chosen = rng.choice(slots, size=n_words, replace=False)
            ids[chosen] = rng.permutation(np.arange(1, n_words + 1, dtype=np.int64))
        out[name] = ids

    # Renumber by first appearance over train, valid, test (the real reader's numbering).
    allids = np.concatenate([out["train"], out["valid"], out["test"]])
    first = np.full(vocab, len(allids), dtype=np.int64)
    np.minimum.at(first, allids, np.arange(len(allids), dtype=np.int64))  # first position of each id
    by_first = np.argsort(first, kind="stable")[: int((first < len(allids)).sum())]
    remap = np.empty(vocab, dtype=np.int64)
    remap[by_first] = np.arange(len(by_first), dtype=np.int64)
    for name in out:
        out[name] = remap[out[name]]
    idx2word = ["<eos>" if old == EOS else f"synthetic_word_{old:05d}" for old in by_first.tolist()]
    dictionary = Dictionary(idx2word, {w: i for i, w in enumerate(idx2word)})
    vocab_size = pad_vocabulary(dictionary, pad_vocab_to)
    info = {
        "dataset": WIKITEXT2.name,
        "source": "synthetic",
        "generator": f"kit.data.synthetic.wikitext2_like v{GENERATOR_VERSION}",
        "seed": seed,
        "file": None,
        "checksum_verified": None,
        "tokens": {s: int(len(out[s])) for s in out},
        "vocab": len(by_first),
        "vocab_size": vocab_size,
        "pad_vocab_to": pad_vocab_to,
        "note": SYNTHETIC_NOTE,
    }
    return Corpus(dictionary, out["train"], out["valid"], out["test"], vocab_size, info)
