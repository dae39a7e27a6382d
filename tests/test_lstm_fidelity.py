"""The oracle: Apex's own word_language_model example (241dd6c4, from that commit's source, patched at run
time only for today's PyTorch by kit/runner/fidelity.py, `kit fidelity apex`) and the kit's fp32 loop train on
the same real-format text on the CPU; their per-batch losses must agree over a whole epoch. The text is a
slice of the real WikiText-2 validation and test splits, written as the example's train/valid/test.txt and
as the kit's wiki.*.tokens. Where the sources and the text are looked for: tests/fixtures/originals.py."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from fixtures.originals import WIKITEXT_VALID_TEST, apex_archive, missing_apex, missing_wikitext

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = apex_archive("241dd6c4")
FP16_UTILS = apex_archive("25.01")
TEXT = WIKITEXT_VALID_TEST
#: a small model, so one epoch of both takes seconds on two cores
SETTINGS = dict(emsize=32, nhid=32, nlayers=2, lr=20.0, clip=0.25, batch_size=20, bptt=35, dropout=0.2, seed=1111)


def _corpus(folder: Path) -> Path:
    valid = (TEXT / "wiki.valid.tokens").read_text(encoding="utf-8").splitlines(keepends=True)
    test = (TEXT / "wiki.test.tokens").read_text(encoding="utf-8").splitlines(keepends=True)
    splits = {"train": "".join(valid[:1000]), "valid": "".join(test[:80]), "test": "".join(test[80:160])}
    folder.mkdir()
    for name, text in splits.items():
        (folder / f"{name}.txt").write_text(text, encoding="utf-8")  # the example's names
        (folder / f"wiki.{name}.tokens").write_text(text, encoding="utf-8")  # the kit's
    return folder


def _original_losses(tmp_path: Path, corpus: Path) -> list[float]:
    from kit.runner import fidelity as fidelity_lstm

    example = fidelity_lstm.extract_example(EXAMPLE, tmp_path / "example")
    script = fidelity_lstm.patched_main(example, None)
    with tarfile.open(FP16_UTILS) as tar:  # apex.fp16_utils of Apex 25.01 (241dd6c4's apex does not import on torch 2)
        tar.extractall(tmp_path / "apex", filter="data")
    apex_root = next((tmp_path / "apex").iterdir())
    args = [f"--{k}" if k != "batch_size" else "--batch_size" for k in SETTINGS]
    cmd = [sys.executable, script.name, "--epochs", "1", "--data", str(corpus), "--save", str(tmp_path / "model.pt")]
    for flag, value in zip(args, SETTINGS.values()):
        cmd += [flag, str(value)]
    env = dict(os.environ, KIT_PRINT_LOSSES="1", PYTHONPATH=str(apex_root))
    out = subprocess.run(cmd, cwd=example, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return [float(x) for x in re.findall(r"^KIT_LOSS (\S+)$", out.stdout, flags=re.M)]


def _kit_losses(corpus: Path, monkeypatch) -> list[float]:
    import kit.bench.lstm.train as train
    from kit.bench.lstm.batching import batchify
    from kit.bench.lstm.config import LSTMConfig
    from kit.data.wikitext import read_corpus
    from kit.facts.datasets import WIKITEXT2

    dictionary, ids = read_corpus(corpus, dataclasses.replace(WIKITEXT2, sizes=None))
    data = train.SplitData(batchify(ids["train"], SETTINGS["batch_size"]), batchify(ids["valid"], 10),
                           batchify(ids["test"], 10), len(dictionary))
    cfg = LSTMConfig(preset="oracle", epochs=1, eval_batch_size=10, tied=False, pad_vocab_to=1,
                     static_loss_scale=1.0, dynamic_loss_scale=False, **SETTINGS)
    losses: list[float] = []
    real = train.lm_loss

    def recording(logits, target, reduction="mean", in_fp32=True):
        loss = real(logits, target, reduction, in_fp32)
        if reduction == "mean" and torch.is_grad_enabled():  # training batches only
            losses.append(float(loss.detach()))
        return loss

    monkeypatch.setattr(train, "lm_loss", recording)
    train.run_repeat(cfg, data, "fp32", "cpu", seed=SETTINGS["seed"])
    return losses


@pytest.mark.skipif(not (EXAMPLE.is_file() and FP16_UTILS.is_file()), reason=missing_apex("241dd6c4", "25.01"))
@pytest.mark.skipif(not TEXT.is_dir(), reason=missing_wikitext())
def test_fp32_per_batch_losses_equal_the_apex_examples_over_an_epoch(tmp_path, monkeypatch):
    corpus = _corpus(tmp_path / "corpus")
    original = _original_losses(tmp_path, corpus)
    mine = _kit_losses(corpus, monkeypatch)
    assert len(original) > 30  # a whole epoch of the slice, not a handful of batches
    assert len(mine) == len(original)
    for i, (a, b) in enumerate(zip(original, mine)):
        assert b == pytest.approx(a, rel=1e-5), f"batch {i}: original {a!r}, kit {b!r}"
