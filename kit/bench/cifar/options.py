"""The CIFAR suite's own options of `kit run` (its descriptor's ``options``): each field is one
option, with its flag, help, type, default and check (kit.results.option_fields). `kit run`, the
cuda10 front end, `kit launch`, `kit fleet`, the run's config (RunConfig.options_of("cifar")), the
plan (kit.bench.cifar.plan) and the resume check read them from here.

Torch-free and Python 3.7 syntax (the cuda10 image reads it).
"""

from dataclasses import dataclass
from typing import List, Optional

from kit.errors import UsageError
from kit.results.option_fields import at_least, one_of, option
from kit.results.schema_names import DEFAULT_FASTAI_LEARNER, FASTAI_LEARNERS, LEARNER_BEFORE_THE_OPTION

#: the image sizes a cell may train at: CIFAR's own 32 px, or upsampled on the device
IMAGE_SIZES = (32, 64, 128, 224)


def check_batch_sizes(sizes: Optional[List[int]], flag: str) -> None:
    """A batch curve's sizes are each at least 1 (the plan measures them smallest first)."""
    bad = [n for n in sizes or () if n < 1]
    if bad:
        raise UsageError(f"{flag} {','.join(map(str, sizes))}: {bad[0]} is not a batch size; each must be at least 1.",
                         remedy=f"List batch sizes of 1 or more, e.g. {flag} 256,512,1024")


@dataclass
class CifarOptions:
    """`kit run`'s options that only the CIFAR cells read."""

    models: Optional[List[str]] = option(None, "CIFAR: ResNets to run (repeat or comma-separate): resnet18, resnet34, resnet50, resnet101, resnet152. Default: all five.", names=("--models", "-m"))
    epochs: Optional[int] = option(None, "CIFAR: epochs per repeat (default 1 in throughput mode, 10 in convergence mode).", check=at_least(1))
    batch_sizes: Optional[List[int]] = option(None, "CIFAR: a batch curve: measure each cell at each of these batch sizes (comma-separated, e.g. 256,512,1024; instead of --batch-size); reports throughput per batch size, the knee and the speedup over fp32 at each size.", check=check_batch_sizes, replaces=("batch_size",))
    image_size: int = option(32, "CIFAR image size: 32 (native), or 64/128/224 upsampled on the device.", check=one_of(*IMAGE_SIZES))
    find_max_batch: bool = option(False, "CIFAR: also find the largest batch that fits, per model and precision.")
    # a run recorded before --learner existed trained its fastai cells with the plain Learner (a
    # resumed run keeps that, so its cells stay alike)
    learner: str = option(DEFAULT_FASTAI_LEARNER, "CIFAR fastai engines: create_cnn (fastai's create_cnn learner: its head on the torchvision body, the body frozen; random weights) or scratch (a plain Learner on the whole ResNet). The torch engine ignores it.", check=one_of(*FASTAI_LEARNERS), absent=LEARNER_BEFORE_THE_OPTION)
    # the fastai engines' fp16-master: the article's static 512 unless given (kit runs before suites
    # owned their options kept these two with the LSTM preset's overrides)
    static_loss_scale: Optional[float] = option(None, "fp16-master: static loss scale (the example's --static-loss-scale).", recorded_in="lstm")
    dynamic_loss_scale: Optional[bool] = option(None, "fp16-master: dynamic loss scaling.", off="--no-dynamic-loss-scale", recorded_in="lstm")
