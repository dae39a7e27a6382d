"""Synthetic data: the published shapes exactly, deterministic, fast, and always labelled synthetic."""

from __future__ import annotations

import numpy as np
import pytest

from kit.data.cifar import load_cifar100
from kit.data.wikitext import load_wikitext2
from kit.data.synthetic import cifar100_like, wikitext2_like
from kit.facts.datasets import CIFAR100, WIKITEXT2, WIKITEXT2_LINES


@pytest.fixture(scope="module")
def cifar():
    return load_cifar100(None, "synthetic", seed=0)


@pytest.fixture(scope="module")
def corpus():
    return load_wikitext2(None, "synthetic", seed=0, pad_vocab_to=8)


def test_synthetic_cifar_has_the_published_shapes_and_balanced_labels(cifar):
    assert cifar.train_x.shape == (CIFAR100.sizes["train"], 32, 32, 3) == (50_000, 32, 32, 3)
    assert cifar.test_x.shape == (10_000, 32, 32, 3)
    assert cifar.train_x.dtype == np.uint8 and cifar.train_y.dtype == np.int64
    assert np.bincount(cifar.train_y, minlength=100).tolist() == [500] * 100
    assert np.bincount(cifar.test_y, minlength=100).tolist() == [100] * 100
    assert len(cifar.classes) == 100 and all(c.startswith("synthetic") for c in cifar.classes)
    assert cifar.info["source"] == "synthetic" and cifar.info["sizes"] == {"train": 50_000, "test": 10_000, "classes": 100}
    assert "throughput only" in cifar.info["note"]


def test_synthetic_cifar_images_depend_on_the_class(cifar):
    # Mean image per class differs far more between classes than the noise would allow by chance.
    x = cifar.train_x[:5000].reshape(5000, -1).astype(np.float32)
    y = cifar.train_y[:5000]
    means = np.stack([x[y == c].mean(0) for c in range(3)])
    assert np.abs(means[0] - means[1]).mean() > 10


def test_synthetic_cifar_is_deterministic_per_seed():
    a = cifar100_like(seed=3, n_train=1000, n_test=200)
    b = cifar100_like(seed=3, n_train=1000, n_test=200)
    c = cifar100_like(seed=4, n_train=1000, n_test=200)
    assert np.array_equal(a.train_x, b.train_x) and np.array_equal(a.train_y, b.train_y)
    assert not np.array_equal(a.train_x, c.train_x)


def test_synthetic_corpus_has_the_exact_token_counts_and_vocabulary(corpus):
    sizes = WIKITEXT2.sizes
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (2_088_628, 217_646, 245_569)
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (sizes["train"], sizes["valid"], sizes["test"])
    used = np.unique(np.concatenate([corpus.train, corpus.valid, corpus.test]))
    assert len(used) == 33_278 == corpus.info["vocab"]
    assert used.tolist() == list(range(33_278))  # every id appears, numbered without gaps
    assert corpus.vocab_size == 33_280 == len(corpus.dictionary)  # Apex's padding to a multiple of 8
    assert corpus.train.dtype == np.int64
    assert corpus.info["source"] == "synthetic"


def test_synthetic_corpus_looks_like_text(corpus):
    eos = corpus.dictionary.word2idx["<eos>"]
    assert (corpus.train == eos).sum() == WIKITEXT2_LINES["train"]  # as many lines as the real file
    assert corpus.train[-1] == eos
    counts = np.bincount(corpus.train[corpus.train != eos])
    top = np.sort(counts)[::-1]
    assert top[0] > 50 * np.median(counts[counts > 0])  # Zipf: a few words very common, most rare
    # numbered by first appearance, like the real reader
    first_new = np.maximum.accumulate(corpus.train)
    assert (np.diff(first_new) <= 1).all() and corpus.train[0] == 0


def test_synthetic_corpus_is_deterministic_per_seed():
    kw = dict(tokens={"train": 5000, "valid": 500, "test": 500}, vocab=1000)
    a, b, c = wikitext2_like(1, **kw), wikitext2_like(1, **kw), wikitext2_like(2, **kw)
    assert np.array_equal(a.train, b.train) and a.dictionary.idx2word == b.dictionary.idx2word
    assert not np.array_equal(a.train, c.train)
