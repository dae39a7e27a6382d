"""`kit fidelity apex`: bad input is one line and exit 2, before anything runs (the run itself needs a GPU)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _kit(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    temp = cwd / "tmpdir"  # the command's temporary folders, to see that it leaves none behind
    temp.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "TMPDIR": str(temp)}
    return subprocess.run([sys.executable, "-m", "kit", "fidelity", "apex", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _apex_without_example(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as t:
        for name, data in (("apex-x/setup.py", b""), ("apex-x/apex/fp16_utils/__init__.py", b"")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("case, expect", [
    ("no-source", "needs --apex-src"),
    ("not-a-source", "not an Apex source folder or tar archive"),
    ("no-fp16-utils", "--fp16-utils"),
    ("no-example", "no examples/word_language_model"),
    ("bad-preset", "--presets nope: choose from apex-2018, tensor-core"),
    ("max-runs-below-runs", "--max-runs 3 is below --runs 4"),
])
def test_bad_input_names_the_option_and_runs_nothing(tmp_path, case, expect):
    utils = tmp_path / "apex-25.01"
    (utils / "apex" / "fp16_utils").mkdir(parents=True)
    archive = _apex_without_example(tmp_path / "apex.tar.gz")
    argv = {
        "no-source": ["--fp16-utils", str(utils)],
        "not-a-source": ["--apex-src", str(tmp_path / "nothing-here"), "--fp16-utils", str(utils)],
        "no-fp16-utils": ["--apex-src", str(archive)],
        "no-example": ["--apex-src", str(archive), "--fp16-utils", str(utils)],
        "bad-preset": ["--apex-src", str(archive), "--fp16-utils", str(utils), "--presets", "nope"],
        "max-runs-below-runs": ["--apex-src", str(archive), "--fp16-utils", str(utils), "--runs", "4", "--max-runs", "3"],
    }[case]
    proc = _kit(*argv, "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert expect in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "fidelity.json").exists()
    assert not list((tmp_path / "tmpdir").glob("kit-fidelity-*")), "a failed start removes its work folder"
