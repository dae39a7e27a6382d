"""On a GPU: fastai's fp16-master with the article's static loss scale makes no host sync of its own.

torch's sync debug mode ("warn") reports every synchronising call; a callback turns it on for each
training batch (data loading excluded) and counts the reports. fastai itself syncs in every
mode (its Recorder moves the smoothed loss to the CPU each batch), so the check compares against
the same Learner in fp32: the static 512 scale (NonNativeMixedPrecision, dynamic=False) must add
none, while the dynamic scale (its overflow check reads a flag back each step) adds at least one —
which shows the count can see a scheme's syncs. Measured on an H200 (fastai 2.8.12, torch 2.11):
fp32 1, static 1, dynamic 2 per training batch. (fastai 1.0.61's dynamic check read every
parameter's gradient, one sync each; that engine runs only in the cuda10 image.)
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("fastai")

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():  # pragma: no cover - CI has no GPU
    pytest.skip("needs an NVIDIA GPU", allow_module_level=True)

from kit.bench.cifar.train_config import TrainConfig  # noqa: E402

from test_cifar_engines import tiny_arrays  # noqa: E402

BATCHES = 6


def _syncs_per_batch(precision: str, dynamic: bool = False) -> float:
    from fastai.callback.core import Callback

    from kit.bench.cifar.fastai_engine import build_learner

    state = {"catch": None, "seen": None, "counts": []}

    class OpenWindow(Callback):
        order = -1000  # its before_batch runs before every other callback's

        def before_batch(self):
            if self.training:
                state["catch"] = warnings.catch_warnings(record=True)
                state["seen"] = state["catch"].__enter__()
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")

    class CloseWindow(Callback):
        order = 1000  # its after_batch runs after every other callback's

        def after_batch(self):
            if state["catch"] is not None:
                torch.cuda.set_sync_debug_mode("default")
                state["counts"].append(sum("synchroniz" in str(w.message) for w in state["seen"]))
                state["catch"].__exit__(None, None, None)
                state["catch"] = None

    # the plain Learner: the dynamic check reads one gradient per trained parameter tensor, 62 for the whole
    # ResNet-18 (the default create_cnn learner trains 46: the head and the body's BatchNorm layers)
    cfg = TrainConfig("resnet18", precision, "cuda", batch_size=16, steps=BATCHES, dynamic_loss_scale=dynamic,
                      learner="scratch")
    learn = build_learner(cfg, tiny_arrays(n_train=16 * BATCHES, n_test=16), num_workers=0)
    learn.add_cbs([OpenWindow(), CloseWindow()])
    learn.fit(1, lr=1e-3)
    steady = state["counts"][2:]  # the first batches allocate and autotune
    assert steady, state["counts"]
    return sum(steady) / len(steady)


def test_static_512_fp16_master_adds_no_host_sync_to_fastai_fp32_but_dynamic_does():
    fp32 = _syncs_per_batch("fp32")
    static = _syncs_per_batch("fp16-master", dynamic=False)
    dynamic = _syncs_per_batch("fp16-master", dynamic=True)
    print(f"host syncs per training batch: fp32 {fp32}, fp16-master static {static}, dynamic {dynamic}")
    assert static == fp32
    assert dynamic > fp32
