"""The CIFAR-100 ResNet suite: two engines over the same data and architectures.

- ``torch_engine``: GPU-bound PyTorch (data set resident on the device, augmentation
  on the device, channels_last, torch.compile / CUDA graphs).
- ``fastai_engine``: what a fastai user runs (DataLoaders with CPU workers,
  ``Learner.fit_one_cycle``, ``to_fp16()`` / ``to_bf16()`` / ``to_non_native_fp16()``).
- ``suite.run_cell``: the runner's entry; picks the engine, repeats, summarises.
"""

from kit.bench.cifar import plan
from kit.bench.cifar.options import CifarOptions
from kit.results.suites import Parity, Suite

SUITE = Suite(
    options=CifarOptions,
    name="cifar", help="CIFAR-100 ResNets", title="CIFAR-100 ResNets, {engine} engine",
    models=plan.MODELS, model_option="models", engines=plan.ENGINES,
    plan=plan.cells, work=plan.work, needs=plan.needs, runner="kit.bench.cifar.suite",
    #: a reduced-precision run matches fp32 when its final test accuracy is at most 1.0 point lower
    parity=Parity("test accuracy", noun="accuracy", tolerance=0.01, gap="points"),
    datasets=("cifar100",), sized=True, unit="images", in_all=True, order=1, data_parallel=("torch",),
    smoke={"models": ["resnet18"], "engines": list(plan.ENGINES), "steps": 4, "epochs": 1},
    revisions={
        "torch": (7, (
            (1, "eager steps or torch.compile; torch.optim.SGD"),
            (2, "the whole step (forward, loss, backward, SGD, fp16 loss scale on the device) captured as one CUDA graph"),
            (3, "an untimed warm-up before each cell's first repeat (cuDNN autotuning and compilation no longer in repeat 0)"),
            (4, "the model compiled by Inductor inside the captured step, the default on CUDA (cuda-graph-inductor)"),
            (5, "the captured step updates with torch's fused SGD kernel"),
            (6, "the input's conversion (float, normalise, upsample, layout) inside the captured step; "
                "11 warm-up steps excluded in every step mode (past a fresh DDP's 10 statistics iterations)"),
            (7, "AOTAutograd's on-disk cache off under autocast: an amp-bf16 cell no longer reuses the step an amp-fp16 "
                "cell compiled (PyTorch 2.11's cache key lacks the autocast dtype)"),
        )),
        "fastai": (1, ((1, "fastai 2 Learner.fit_one_cycle, to_fp16()/to_bf16(), fastai's CPU data loader"),)),
        "fastai-v1": (1, ((1, "fastai 1 Learner.fit_one_cycle, to_fp16(), fastai 1's DataBunch (the cuda10 image)"),)),
    },
    host_paced=("fastai", "fastai-v1"),
)
