"""Test accuracy and loss of a CIFAR model, eagerly: the one evaluation both training steps
(kit.bench.cifar.torch_engine's Trainer and kit.bench.cifar.graphed's captured step) use."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from kit.bench.cifar.gpu_data import DeviceData


@torch.no_grad()
def evaluate_model(model: nn.Module, prec: Any, device: str, data: DeviceData, image_size: int,
                   batch_size: int) -> tuple:
    """(test accuracy, test loss) over the test split, with ``prec``'s autocast; the eager model
    (a captured graph or a compiled one would recompile for the ragged last batch)."""
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    n = data.test_x.shape[0]
    for i in range(0, n, batch_size):
        x = data.to_input(data.test_x[i : i + batch_size], image_size)
        y = data.test_y[i : i + batch_size]
        with prec.autocast():
            out = model(x).float()
        loss_sum += nn.functional.cross_entropy(out, y, reduction="sum").double()
        correct += (out.argmax(1) == y).sum()
    model.train()
    return correct.item() / max(1, n), loss_sum.item() / max(1, n)
