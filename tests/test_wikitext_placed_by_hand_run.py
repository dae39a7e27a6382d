"""A corrupt WikiText-2 folder placed by hand (three .tokens files, no zip, with the wrong token
counts) stops `kit run --suite lstm` with exit 3 and one line naming the file, before any run
folder exists (as for CIFAR-100). The files are tiny fixtures, not WikiText-2; the benchmark is
the fake of tests/fixtures/fake_bench.py, so nothing trains."""

from __future__ import annotations

import subprocess
import sys

from test_exit_codes_run import _env


def test_a_corrupt_hand_placed_wikitext_stops_the_run_before_its_folder_is_made(tmp_path):
    token_dir = tmp_path / "data" / "wikitext-2"
    token_dir.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (token_dir / f"wiki.{split}.tokens").write_text(" = fixture = \n not the real corpus \n")
    results = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "kit", "run", "--suite", "lstm", "--device", "cpu", "--data", "real",
                           "-p", "fp32", "--skip-checks"], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "wiki.train.tokens" in errors[0] and "tokens" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not results.exists() or list(results.iterdir()) == []
