"""Measured FLOPs of one training step, counted by PyTorch itself.

``torch.utils.flop_counter.FlopCounterMode`` counts the floating-point
operations of every matmul/convolution dispatched (forward and backward) - the
same ops the GPU runs, whatever the precision. We count on the ``meta`` device
(shapes only, no arithmetic: milliseconds even for ResNet-152 at 224 px), for a
batch of 2 (BatchNorm refuses a batch of 1 in training mode once the feature
map is 1x1), and scale linearly: convolutions and matmuls are linear in the
batch size. Element-wise ops (BatchNorm, ReLU, the optimizer) are not counted,
as in every published FLOP figure.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

import torch
from torch import nn

_COUNT_BATCH = 2


def train_step_flops_per_item(build_model: Callable[[], nn.Module], sample_shape: tuple[int, ...], num_classes: int) -> int:
    """FLOPs of forward + backward for one item of shape ``sample_shape`` (C, H, W)."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = build_model()
        x = torch.randn((_COUNT_BATCH, *sample_shape))
        y = torch.randint(0, num_classes, (_COUNT_BATCH,))
    model.train()
    counter = FlopCounterMode(display=False)
    with counter:
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
    return int(counter.get_total_flops()) // _COUNT_BATCH


@lru_cache(maxsize=32)
def resnet_train_flops_per_image(model_name: str, image_size: int, num_classes: int = 100) -> int:
    """Forward + backward FLOPs per image of a torchvision ResNet at ``image_size``."""
    from kit.bench.cifar.models import build

    return train_step_flops_per_item(lambda: build(model_name, num_classes), (3, image_size, image_size), num_classes)


def achieved_tflops(flops_per_item: float | None, items_per_s: float | None) -> float | None:
    """Achieved rate in TFLOP/s (useful work only: counted FLOPs x measured items/s)."""
    if not flops_per_item or not items_per_s:
        return None
    return flops_per_item * items_per_s / 1e12
