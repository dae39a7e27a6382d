"""``--train-split valid`` for the LSTM suite: a machine with only WikiText-2's real valid and test splits
trains on the valid split (its last tenth standing in for the validation split) and tests on test, and a
run that asks for the train split there says so in one line instead of trying to download."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from kit.bench.lstm import config as lstm_config
from kit.errors import UsageError
from kit.results.schema import RunConfig
from kit.runner import service
from kit.runner.plan import dataset_splits

ROOT = Path(__file__).resolve().parents[1]


def _valid_test_only(folder: Path) -> Path:
    """A data folder with only wiki.valid.tokens and wiki.test.tokens (small files in the real format)."""
    d = folder / "wikitext-2"
    d.mkdir(parents=True)
    (d / "wiki.valid.tokens").write_text(" = Valkyria = \n the cat sat on the mat \n")
    (d / "wiki.test.tokens").write_text(" the dog sat \n")
    return folder


def test_the_valid_split_trains_its_last_tenth_validates_and_test_stays_held_out():
    corpus = SimpleNamespace(train=list(range(0)), valid=list(range(100)), test=list(range(100, 130)))
    train, valid = lstm_config.split_roles(corpus, "valid")
    assert train == list(range(90)) and valid == list(range(90, 100))
    assert lstm_config.split_roles(corpus, "train") == (corpus.train, corpus.valid)
    assert lstm_config.splits_read("valid") == ("valid", "test") and lstm_config.splits_read(None) is None


def test_a_run_reads_only_the_splits_it_trains_and_tests_on():
    assert dataset_splits(RunConfig.of(suite="lstm", train_split="valid"), "wikitext2") == ("valid", "test")
    assert dataset_splits(RunConfig.of(suite="lstm"), "wikitext2") is None


def test_an_unknown_train_split_is_refused():
    with pytest.raises(UsageError, match="--train-split test"):
        lstm_config.resolve({"preset": "apex-2018", "train_split": "test"})


def test_with_only_valid_and_test_the_run_says_what_it_will_train_on(tmp_path, monkeypatch):
    import kit.data.service

    data = _valid_test_only(tmp_path / "data")
    # the folder's few lines are not the published token counts, which the run checks before it starts
    # (tests/test_wikitext_placed_by_hand_run.py); here only what the run says matters
    monkeypatch.setattr(kit.data.service, "check_placed", lambda *a, **k: None)
    printed = []
    console = SimpleNamespace(print=lambda text: printed.append(text))
    config = RunConfig.of(suite="lstm", mode="convergence", data="real", data_dir=str(data), train_split="valid")
    service.ensure_real_data(config, console, progress=False)
    assert len(printed) == 1
    assert "first 90% of WikiText-2's valid split" in printed[0] and "tested on the test split" in printed[0]


def test_asking_for_the_train_split_where_only_valid_and_test_lie_is_one_line_naming_the_option(tmp_path):
    data = _valid_test_only(tmp_path / "data")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "kit", "run", "--suite", "lstm", "--data", "real", "--data-dir", str(data),
                           "--device", "cpu", "--skip-checks", "--results-dir", str(tmp_path / "r")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "train split is not in" in out and "--train-split valid" in out and "Traceback" not in out
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
