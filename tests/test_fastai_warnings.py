"""A fastai run does not print torch's `torch.jit.script is deprecated` warning to users.

fastai's modules call torch.jit.script while they are imported; torch 2.x warns for
each call. The engine hides that one message while it imports fastai, and nothing else.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytest.importorskip("fastai")

REPO = Path(__file__).resolve().parents[1]

# A fresh process (fastai not imported yet), warnings shown as Python shows them to users,
# then one tiny fastai training step through the engine.
TINY_FASTAI_STEP = """
import numpy as np
from types import SimpleNamespace
from kit.bench.cifar.fastai_engine import build_learner, fastai_missing_reason
from kit.bench.cifar.torch_engine import TrainConfig

assert fastai_missing_reason() is None
rng = np.random.default_rng(0)
arrays = SimpleNamespace(
    train_x=rng.integers(0, 256, (16, 32, 32, 3), dtype=np.uint8), train_y=rng.integers(0, 100, 16).astype(np.int64),
    test_x=rng.integers(0, 256, (8, 32, 32, 3), dtype=np.uint8), test_y=rng.integers(0, 100, 8).astype(np.int64))
cfg = TrainConfig("resnet18", "fp32", "cpu", batch_size=8, steps=1)
learn = build_learner(cfg, arrays, num_workers=0)
learn.fit_one_cycle(1, lr_max=cfg.lr)
print("trained")
"""


def test_a_fastai_step_does_not_print_the_jit_script_warning():
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="default", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", TINY_FASTAI_STEP], capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "trained" in out.stdout
    assert "torch.jit.script" not in out.stderr, out.stderr[-2000:]


def test_the_filter_hides_only_that_message_and_only_inside_the_block():
    from kit.bench.cifar.fastai_engine import fastai_imports

    message = "`torch.jit.script` is deprecated. Please switch to `torch.compile` or `torch.export`."
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with fastai_imports():
            warnings.warn(message, FutureWarning)          # hidden
            warnings.warn("something else", FutureWarning)  # another message: shown
            warnings.warn(message, UserWarning)             # another category: shown
        warnings.warn(message, FutureWarning)              # outside the block: shown
    assert [(str(w.message), w.category) for w in seen] == [
        ("something else", FutureWarning), (message, UserWarning), (message, FutureWarning)]
