"""The torch engine's model, precision, optimizer and one training step (eager or
torch.compile'd); kit.bench.cifar.graphed is its drop-in when the whole step is captured."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from kit.bench import caps
from kit.bench.cifar import models
from kit.bench.cifar.evaluation import evaluate_model
from kit.bench.cifar.gpu_data import DeviceData
from kit.bench.cifar.schedule import one_cycle_factor
from kit.bench.cifar.train_config import TrainConfig
from kit.bench.precision import Precision


def memory_format(device: str) -> torch.memory_format:
    """channels_last on CUDA (Tensor Core convolutions want NHWC); the default
    layout on the CPU, where channels_last training was slower in our runs."""
    return torch.channels_last if device.startswith("cuda") and caps.HAS_CHANNELS_LAST else torch.contiguous_format


@dataclass
class Trainer:
    """A fresh model, its precision and optimizer, and the one training step."""

    cfg: TrainConfig
    total_steps: int
    compile_mode: str | None = None
    model: nn.Module = field(init=False)
    step_model: Callable = field(init=False)
    prec: Precision = field(init=False)

    def __post_init__(self) -> None:
        cfg = self.cfg
        torch.manual_seed(cfg.seed)
        model = models.build(cfg.model, cfg.num_classes).to(cfg.device, memory_format=memory_format(cfg.device))
        self.prec = Precision(cfg.precision, cfg.device)
        model = self.prec.prepare_model(model)
        opt = torch.optim.SGD(
            self.prec.optimizer_params(model), lr=cfg.max_lr(), momentum=cfg.momentum,
            nesterov=True, weight_decay=cfg.weight_decay,
        )
        model, opt = self.prec.wrap(model, opt)
        self.model, self.opt = model, opt
        self.sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: one_cycle_factor(step, self.total_steps))
        self.loss_fn = caps.cross_entropy(cfg.label_smoothing)
        if self.compile_mode is not None:
            torch._dynamo.reset()  # a fresh compile per repeat; never hit the recompile limit
            self.step_model = torch.compile(model, mode=None if self.compile_mode == "default" else self.compile_mode)
        else:
            self.step_model = model

    def counters(self) -> dict:
        return self.prec.counters()

    def describe(self) -> dict:
        return self.prec.describe()

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.model.train()
        with self.prec.autocast():
            out = self.step_model(x)
        # the loss in fp32 whatever the logits' dtype (fp16-master returns half logits)
        loss = self.loss_fn(out.float(), y)
        self.prec.backward_step(loss, self.opt)
        with warnings.catch_warnings():
            # a step skipped by GradScaler makes the scheduler warn; the skip is counted elsewhere
            warnings.simplefilter("ignore", UserWarning)
            self.sched.step()
        return loss.detach()

    def evaluate(self, data: DeviceData, image_size: int, batch_size: int) -> tuple[float, float]:
        """(test accuracy, test loss) with the eager model (no recompiles for a ragged last batch)."""
        return evaluate_model(self.model, self.prec, self.cfg.device, data, image_size, batch_size)
