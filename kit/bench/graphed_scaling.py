"""Loss scaling that lives on the device, for training steps captured as one CUDA graph.

A captured step cannot read anything back to the host: whether a step overflowed, the scale and
the count of skipped steps all stay in device tensors, and the optimizer reads the overflow flag on
the device (torch's fused SGD kernel takes it as ``found_inf`` and leaves every weight unchanged
when it is 1). The CIFAR graphed step (kit.bench.cifar.graphed) and the LSTM graphed engine
(kit.bench.lstm.graphed) both use this one class::

    loss_for_backward = scaler.scale_loss(loss)        (loss x scale)
    backward
    scaler.unscale_and_check(grads)                    grads / scale in place, found_inf = any inf/NaN
    ... clip, update masked by scaler.found_inf ...
    scaler.update()                                    dynamic: halve on overflow, grow after N clean steps

The kernels are GradScaler's own (``torch._amp_foreach_non_finite_check_and_unscale_``,
``torch._amp_update_scale_``), so the rule is torch.amp.GradScaler's; with ``min_scale`` (Apex's
DynamicLossScaler never goes below 1) the scale is clamped after each update. A static scale
(``dynamic=False``) still checks and counts inf/NaN steps on the device, but never changes; whether
such a step is skipped is the caller's choice (Apex's static LossScaler never skips).
"""

from __future__ import annotations

import torch


class DeviceLossScale:
    """A loss scale, its overflow flag and counters as device tensors (no host read per step)."""

    def __init__(self, device: str | torch.device, init_scale: float, dynamic: bool = True,
                 growth_interval: int = 2000, backoff: float = 0.5, growth: float = 2.0,
                 min_scale: float | None = None):
        self.dynamic = dynamic
        self.growth_interval = int(growth_interval)
        self.backoff = float(backoff)
        self.growth = float(growth)
        self.min_scale = min_scale
        self.init_scale = float(init_scale)
        #: the current scale (fp32 scalar)
        self.scale = torch.full((), self.init_scale, dtype=torch.float32, device=device)
        #: clean steps since the last growth or overflow (GradScaler's growth tracker)
        self.growth_tracker = torch.zeros((), dtype=torch.int32, device=device)
        #: 1.0 when the last checked gradients held an inf or NaN
        self.found_inf = torch.zeros((), dtype=torch.float32, device=device)
        #: steps whose gradients held an inf or NaN, counted on the device
        self.overflows = torch.zeros((), dtype=torch.float32, device=device)

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.scale

    def unscale_and_check(self, grads: list) -> torch.Tensor:
        """Divide ``grads`` by the scale in place and set ``found_inf`` (one fused kernel per device and
        dtype, GradScaler's); counts the step in ``overflows`` when it overflowed. Returns found_inf."""
        self.found_inf.zero_()
        if grads:
            torch._amp_foreach_non_finite_check_and_unscale_(grads, self.found_inf, self.scale.reciprocal())
        self.overflows += self.found_inf
        return self.found_inf

    def keep(self) -> torch.Tensor:
        """0.0 on an overflowed step, else 1.0: a mask for updates that cannot take ``found_inf``."""
        return 1.0 - self.found_inf

    def update(self) -> None:
        """After the step: a dynamic scale halves on overflow and grows after ``growth_interval`` clean steps."""
        if not self.dynamic:
            return
        torch._amp_update_scale_(self.scale, self.growth_tracker, self.found_inf, self.growth, self.backoff,
                                 self.growth_interval)
        if self.min_scale is not None:
            self.scale.clamp_(min=self.min_scale)

    def counters(self) -> dict:
        """The device counters read once (a sync): overflowed steps and the final scale."""
        return {"overflow_steps": int(self.overflows.item()), "loss_scale_final": float(self.scale.item())}
