"""scripts/bench_curve_h200.sh builds the kit run it documents (KIT=echo prints each command
instead of running it, so no GPU is needed): one image size per PARTS, its knobs passed through."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path, **env):
    # the script's knobs come from this call only, never from the caller's environment
    full = {k: v for k, v in os.environ.items() if k not in ("PARTS", "PRECISIONS", "REPEATS", "COMPILE", "DEVICE")}
    full.update(KIT="echo", **env)
    out = subprocess.run(["bash", str(ROOT / "scripts" / "bench_curve_h200.sh"), str(tmp_path)], env=full,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return {p.name: p.read_text() for p in tmp_path.glob("*.bundle")}


def test_the_defaults_run_both_image_sizes_with_every_precision_and_3_repeats(tmp_path):
    runs = _run(tmp_path)
    assert sorted(runs) == ["curve-224px.bundle", "curve-32px.bundle"]
    r32, r224 = runs["curve-32px.bundle"], runs["curve-224px.bundle"]
    assert "--image-size 32" in r32 and "--batch-sizes 256,512,1024,2048,4096,8192" in r32
    assert "--image-size 224" in r224 and "--batch-sizes 64,128,256,512,1024,2048" in r224
    for r in (r32, r224):
        assert "--precisions fp32,tf32,amp-fp16,amp-bf16" in r and "--repeats 3" in r and "--compile off" in r


def test_parts_precisions_and_repeats_are_passed_through(tmp_path):
    runs = _run(tmp_path, PARTS="224", PRECISIONS="fp32,amp-bf16", REPEATS="2")
    assert list(runs) == ["curve-224px.bundle"]
    assert "--precisions fp32,amp-bf16" in runs["curve-224px.bundle"] and "--repeats 2" in runs["curve-224px.bundle"]


def test_a_part_whose_run_folder_exists_is_resumed_not_started_again(tmp_path):
    """A command cut by a time limit leaves its run folder; running the script again resumes it."""
    stopped = tmp_path / "curve-224px" / "20261201-233203-vm-cifar-5519"
    stopped.mkdir(parents=True)
    (stopped / "journal.jsonl").write_text("")
    runs = _run(tmp_path)
    assert runs["curve-224px.bundle"].split() == ["run", "--resume", str(stopped)]
    assert "--batch-sizes 256,512,1024,2048,4096,8192" in runs["curve-32px.bundle"]  # never started: a new run
