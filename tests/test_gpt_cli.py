"""`kit run --suite gpt` from the command line: the CPU smoke run's cells, bad input (one
line, exit 2, nothing written), and the suite's place among the others."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.originals import WIKITEXT_VALID_TEST, missing_wikitext

ROOT = Path(__file__).resolve().parents[1]


def kit(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kit", *args], capture_output=True, text=True, env=env)


def _refused(out: subprocess.CompletedProcess, workdir: Path, needle: str) -> None:
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr and "Traceback" not in out.stderr
    assert not (workdir / "results").exists(), "a run folder was made for a run that could not start"


def test_a_width_not_divisible_by_the_head_count_exits_2_and_writes_nothing(workdir):
    out = kit("run", "--suite", "gpt", "--smoke", "--device", "cpu", "--d-model", "96", "--n-heads", "5", "--skip-checks")
    _refused(out, workdir, "--d-model 96 is not divisible by --n-heads 5")


def test_a_sequence_longer_than_the_corpus_exits_2_and_writes_nothing(workdir):
    out = kit("run", "--suite", "gpt", "--gpt-presets", "tiny", "--data", "synthetic", "--device", "cpu",
              "--seq-len", "3000000", "--skip-checks")
    _refused(out, workdir, "longer than WikiText-2's train split allows")


def test_a_gpt_option_for_another_suite_exits_2_and_writes_nothing(workdir):
    out = kit("run", "--suite", "cifar", "--smoke", "--device", "cpu", "--d-model", "64", "--skip-checks")
    _refused(out, workdir, "error: --d-model is an option of the gpt suite; --suite cifar has no cell that reads it.")
    assert "Leave --d-model out, or use it with --suite gpt." in out.stderr and len(out.stderr.splitlines()) == 2


def test_fp8_for_another_suite_and_a_2019_scheme_for_gpt_are_refused(workdir):
    _refused(kit("run", "--suite", "cifar", "-p", "fp8-tensorwise", "--data", "synthetic", "--skip-checks"),
             workdir, "not a precision of the cifar suite (measured by the gpt suite only)")
    _refused(kit("run", "--suite", "gpt", "-p", "fp16-master", "--data", "synthetic", "--skip-checks"),
             workdir, "not a precision of the gpt suite")
    _refused(kit("run", "--suite", "gpt", "--gpt-presets", "gpt-3b", "--data", "synthetic", "--skip-checks"),
             workdir, "unknown GPT preset 'gpt-3b'")


def test_the_gpt_suite_plans_three_presets_by_six_precisions_and_is_not_in_all(workdir):
    out = kit("run", "--dry-run", "--suite", "gpt", "--data", "synthetic")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "Plan: 18 cells x 3 repeats" in text
    for name in ("gpt2-small", "gpt-1b", "gpt-2b", "fp8-tensorwise", "fp8-rowwise"):
        assert name in text
    every = kit("run", "--dry-run", "--suite", "all", "--data", "synthetic")
    assert every.returncode == 0 and "gpt" not in every.stdout.replace("gpt-", "")


def test_the_cpu_smoke_run_measures_fp32_and_bf16_tiny_cells(workdir):
    out = kit("run", "--suite", "gpt", "--smoke", "--device", "cpu", "-p", "fp32,amp-bf16")
    assert out.returncode == 0, out.stderr
    bundle = Path(out.stdout.strip().splitlines()[-1])
    assert bundle.is_file() and bundle.name.endswith(".tar.gz")
    (results,) = (workdir / "results").glob("*/results.json")
    r = json.loads(results.read_text())
    assert [(c["cell_id"], c["status"]) for c in r["cells"]] == [("gpt/tiny/fp32/kit", "ok"), ("gpt/tiny/amp-bf16/kit", "ok")]
    for c in r["cells"]:
        assert c["throughput_unit"] == "tokens" and c["data"]["source"] == "synthetic"
        assert c["data"]["model_vocab_size"] % 64 == 0 and c["data"]["model_vocab_size"] == 33280
        assert c["summary"]["throughput_items_per_s"]["median"] > 0
    assert r["environment"]["data_provenance"]["wikitext2"]["source"] == "synthetic"
    assert "torchao" in r["environment"]["packages"]
    (row,) = r["derived"]["performance_ratios"]
    assert row["precision"] == "amp-bf16" and row["speedup_over_fp32"] > 0
    assert r["derived"]["bf16_ratios"][0]["precision"] == "fp32"


@pytest.mark.skipif(not WIKITEXT_VALID_TEST.is_dir(), reason=missing_wikitext())
def test_a_convergence_run_on_the_real_valid_and_test_splits_alone_trains_on_valid_without_fetching(workdir):
    """The GPU machine's case: the real valid and test splits placed by hand, no train split, no
    network. `--train-split valid` runs on them (a fetch would fail: the mirror is a closed port);
    without it the run says which file is missing."""
    import shutil

    shutil.copytree(WIKITEXT_VALID_TEST, workdir / "data" / "wikitext-2", ignore=shutil.ignore_patterns("README*"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), KIT_DATA_MIRRORS="http://127.0.0.1:9/")
    args = ["-m", "kit", "run", "--suite", "gpt", "--gpt-presets", "tiny", "-p", "fp32", "--device", "cpu",
            "--mode", "convergence", "--steps", "3", "--repeats", "1", "--skip-checks"]
    out = subprocess.run([sys.executable, *args, "--train-split", "valid"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    (results,) = (workdir / "results").glob("*/results.json")
    r = json.loads(results.read_text())
    (cell,) = r["cells"]
    assert cell["status"] == "ok" and cell["data"]["source"] == "real"
    assert cell["data"]["tokens"] == {"train": 0, "valid": 217_646, "test": 245_569}  # the published counts, checked
    assert (cell["data"]["train_split"], cell["data"]["heldout_split"]) == ("valid", "test")
    assert r["environment"]["data_provenance"]["wikitext2"]["placed_by_hand"] is True
    assert cell["repeats"][0]["final_metric"] > 0
    shutil.rmtree(workdir / "results")
    refused = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env)
    assert refused.returncode == 3 and "Traceback" not in refused.stderr, refused.stderr


@pytest.mark.parametrize("flag", ["--seq-len", "--d-model", "--n-layers", "--n-heads", "--gpt-presets", "--train-split"])
def test_the_gpt_options_have_help(flag):
    out = kit("run", "--help")
    assert flag in out.stdout
