"""Precision modes, shared by the CIFAR and LSTM suites.

One code path for every mode (as in nanoGPT): the mode decides the autocast
context, whether a loss scaler runs, and what dtype the model's weights have.

    mode          weights   compute under autocast   loss scaling          TF32
    fp32          fp32      -                        -                     off (strict)
    tf32          fp32      -                        -                     on
    amp-fp16      fp32      fp16                     torch GradScaler      off
    amp-bf16      fp32      bf16                     - (bf16 has fp32's range)  off
    fp16-master   fp16 (BatchNorm fp32) + fp32 master copies, static or dynamic
                  loss scale: the 2018 scheme of fastai v1 to_fp16() and Apex
                  FP16_Optimizer, implemented here with FP16_Optimizer's rules
                  (static: no overflow check, no host sync; dynamic: start 2**32,
                  halve and skip on overflow, double after 1000 clean steps)  off
    apex-o1/o2    Apex amp (only where `apex.amp` still exists: deleted in Apex 25.07)
    fp8-tensorwise  fp32     bf16, and the model's Linear layers  -            off
    fp8-rowwise              swapped for torchao Float8Linear (fp8 GEMMs,
                             dynamic scales per tensor / per row) by the suite
                             (kit.bench.gpt.fp8); GPUs of compute capability 8.9+

A mode the device or the installed software cannot run is *skipped with the
reason* (see :func:`unavailable_reason`); it is never silently replaced.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Iterable

import torch
from torch import nn

from kit.bench import caps
from kit.results import precisions as precision_modes

#: fp8 training modes (kit.results.precisions: peak_dtype fp8) -> torchao's recipe name
#: (``Float8LinearConfig.from_recipe_name``), the mode's name after "fp8-"
FP8_RECIPES = {m.name: m.name[len("fp8-"):] for m in precision_modes.MODES if m.peak_dtype == "fp8"}
#: fp8 GEMMs (torch._scaled_mm) need Ada / Hopper / Blackwell: compute capability 8.9+
FP8_MIN_CAPABILITY = precision_modes.mode("fp8-tensorwise").min_capability


# --------------------------------------------------------------------------- availability
def _cuda_capability(device: str) -> tuple[int, int] | None:
    if not device.startswith("cuda"):
        return None
    return torch.cuda.get_device_capability(torch.device(device))


def apex_amp_status() -> tuple[bool, str]:
    """(usable, explanation) for Apex's amp."""
    try:
        import apex  # noqa: F401
    except ImportError:
        return False, "NVIDIA Apex is not installed in this environment"
    try:
        from apex import amp  # noqa: F401
    except ImportError:
        return False, "this Apex has no amp (apex.amp was deprecated in 2022 and deleted in release 25.07)"
    except Exception as exc:  # noqa: BLE001 -- an old amp can fail on import against a newer torch
        return False, f"this Apex's amp does not import with torch {torch.__version__} ({type(exc).__name__}: {exc})"
    if not hasattr(amp, "initialize"):
        # Apex before Feb 2019 (e.g. 241dd6c4, the cuda10 stack's): amp.init() only, no opt levels;
        # the 2019 article's Apex fp16 was --fp16 (FP16_Optimizer), the kit's fp16-master
        return False, ("this Apex's amp predates opt levels (amp.initialize with O1/O2 arrived in Feb 2019; "
                       "Dec 2018's amp has only amp.init): the article-era Apex fp16 is fp16-master (FP16_Optimizer)")
    return True, "apex.amp available"


def torchao_float8_status() -> tuple[bool, str]:
    """(usable, explanation) for torchao's float8 training (``torchao.float8``)."""
    try:
        import torchao  # noqa: F401
    except ImportError:
        return False, "torchao is not installed in this environment (pip install '.[bench]' in the kit's clone brings it)"
    except Exception as exc:  # a torchao built for another torch can fail in other ways
        return False, f"torchao does not import here ({exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    try:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # noqa: F401
    except Exception as exc:
        return False, f"this torchao ({getattr(torchao, '__version__', '?')}) has no usable torchao.float8 ({exc.__class__.__name__})"
    if not hasattr(Float8LinearConfig, "from_recipe_name"):
        return False, f"this torchao ({getattr(torchao, '__version__', '?')}) has no Float8LinearConfig.from_recipe_name (torchao 0.8+)"
    return True, f"torchao {getattr(torchao, '__version__', '?')} float8"


#: why a number format cannot run where a mode needs it, by the mode's peak dtype (kit.results.precisions):
#: on the CPU, and on a GPU older than the mode's min_capability ({cap}: the GPU's, {need}: the mode's)
_NO_CPU = {
    "tf32": "TF32 is a tensor-core format of NVIDIA GPUs (Ampere or newer); the CPU has none",
    "fp16": "fp16 training on the CPU has no fast kernels and measures nothing useful; run it on a GPU",
    "fp8": "fp8 training needs an NVIDIA GPU with fp8 tensor cores (compute capability {need}+: Ada, Hopper, Blackwell); "
           "the CPU has none",
}
_TOO_OLD = {
    "tf32": "TF32 needs an Ampere or newer GPU (compute capability {need}+); this GPU is {cap}",
    "bf16": "bf16 needs an Ampere or newer GPU (compute capability {need}+); this GPU is {cap}",
    "fp8": "fp8 training needs compute capability {need}+ (Ada, Hopper, Blackwell); this GPU is {cap}",
}


def unavailable_reason(mode: str, device: str) -> str | None:
    """None when `mode` can run on `device` here; otherwise why not, in words. Read from the mode's row
    (kit.results.precisions): the autocast it needs, whether it trains on a CPU, the oldest GPU that
    has its number format, the package it needs."""
    row = precision_modes.BY_NAME.get(mode)
    if row is None:
        return f"unknown precision mode {mode!r}"
    cap = _cuda_capability(device)
    need = "{}.{}".format(*row.min_capability) if row.min_capability else ""
    if row.autocast and row.needs is None and not caps.HAS_AUTOCAST:
        return caps.no_autocast_reason()
    if row.peak_dtype == "tf32" and not caps.HAS_TF32_SWITCH:
        return f"torch {torch.__version__} has no TF32 switch (TF32 arrived with Ampere and torch 1.7)"
    if cap is None:  # the CPU
        if row.on_cpu:
            return None  # CPU autocast supports bfloat16
        if row.needs == "apex":
            return "Apex amp needs a CUDA GPU"
        return _NO_CPU.get(row.peak_dtype, f"{mode} runs on NVIDIA GPUs only").format(need=need)
    too_old = row.min_capability is not None and cap < row.min_capability
    if too_old or (row.peak_dtype == "bf16" and not torch.cuda.is_bf16_supported()):
        return _TOO_OLD.get(row.peak_dtype, "{mode} needs compute capability {need}+; this GPU is {cap}").format(
            mode=mode, need=need, cap="{}.{}".format(*cap))
    if row.needs == "apex":
        ok, why = apex_amp_status()
        return None if ok else why
    if row.needs == "torchao":
        if not caps.HAS_AUTOCAST or not hasattr(torch, "_scaled_mm"):
            return f"torch {torch.__version__} has no fp8 matmul (torch._scaled_mm)"
        ok, why = torchao_float8_status()
        return None if ok else why
    return None


def configure_backends(mode: str) -> dict:
    """Set TF32 switches for the mode; returns what was set (recorded in results).

    "fp32" is strict: on Ampere+ PyTorch's cuDNN convolutions default to TF32,
    which would make an "fp32" run a TF32 run without saying so.
    """
    allow = precision_modes.mode(mode).peak_dtype == "tf32"  # kit.results.precisions
    if not caps.HAS_TF32_SWITCH:
        return {"tf32": f"no switch in torch {torch.__version__} (TF32 did not exist)"}
    torch.backends.cuda.matmul.allow_tf32 = allow
    torch.backends.cudnn.allow_tf32 = allow
    return {"matmul_allow_tf32": allow, "cudnn_allow_tf32": allow}


# --------------------------------------------------------------------------- loss scaling
#: Apex FP16_Optimizer's DynamicLossScaler (apex/fp16_utils/loss_scaler.py, Dec 2018):
#: start at 2**32, halve on overflow (never below 1), double after 1000 clean steps.
DYNAMIC_INIT_SCALE = 2.0**32
DYNAMIC_GROWTH_INTERVAL = 1000
#: torch.amp.GradScaler's own default start (amp-fp16).
GRADSCALER_INIT_SCALE = 2.0**16


@dataclass
class LossScaler:
    """Static or dynamic loss scale, by the rules of Apex's FP16_Optimizer.

    Static (``LossScaler``): the scale never changes and nothing is checked: its
    ``has_overflow`` returns False, so a step is never skipped. Dynamic
    (``DynamicLossScaler``): start at 2**32, halve and skip the step on
    overflow, double after ``growth_interval`` clean steps.
    """

    scale: float = DYNAMIC_INIT_SCALE
    dynamic: bool = True
    growth_interval: int = DYNAMIC_GROWTH_INTERVAL
    backoff: float = 0.5
    growth: float = 2.0
    min_scale: float = 1.0
    clean_steps: int = 0
    overflows: int = 0

    def update(self, overflow: bool) -> None:
        if overflow:
            self.overflows += 1
            if self.dynamic:
                self.scale = max(self.min_scale, self.scale * self.backoff)
            self.clean_steps = 0
            return
        self.clean_steps += 1
        if self.dynamic and self.clean_steps >= self.growth_interval:
            self.scale *= self.growth
            self.clean_steps = 0


def to_half_keep_norm_fp32(model: nn.Module) -> nn.Module:
    """Halve the model except normalisation layers (fastai v1's `model2half`)."""
    model.half()
    for m in model.modules():
        if isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)):
            m.float()
    return model


class _CastInput(nn.Module):
    """Casts floating inputs to half for a halved model; BatchNorm layers run in fp32
    through cuDNN's mixed-precision batch norm (half input, fp32 parameters)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x, *args, **kwargs):
        if torch.is_tensor(x) and x.is_floating_point():
            x = x.half()
        return self.model(x, *args, **kwargs)


class MasterWeights:
    """fp32 master copies of a half model's parameters (FP16_Optimizer's scheme)."""

    def __init__(self, model_params: Iterable[nn.Parameter]):
        self.model_params = [p for p in model_params if p.requires_grad]
        self.master_params = []
        for p in self.model_params:
            mp = p.detach().clone().float()
            mp.requires_grad_(True)
            self.master_params.append(mp)
        device = self.master_params[0].device if self.master_params else "cpu"
        #: 1.0 when the last step's gradients held an inf or NaN (on the device)
        self.found_inf = torch.zeros((), dtype=torch.float32, device=device)
        #: steps whose gradients held an inf or NaN, counted on the device (no sync)
        self.nonfinite_steps = torch.zeros((), dtype=torch.float32, device=device)
        self._inv_scale: tuple = (None, None)

    def _inv(self, scale: float) -> torch.Tensor:
        if self._inv_scale[0] != scale:  # a new tensor only when the scale changes
            self._inv_scale = (scale, torch.full((), 1.0 / scale, dtype=torch.float32, device=self.found_inf.device))
        return self._inv_scale[1]

    def grads_to_master(self, scale: float) -> torch.Tensor:
        """Copy model grads into fp32 master grads, unscaled (FP16_Optimizer's
        ``update_master_grads``), and check them for inf/NaN on the device.

        Returns ``found_inf``, a device tensor (1.0 = overflow): reading it is the
        caller's choice, because reading it is a device-to-host sync. Apex's static
        scaler never reads it; its dynamic scaler must, to decide on the skip."""
        grads = []
        for p, mp in zip(self.model_params, self.master_params):
            if p.grad is None:
                mp.grad = None
                continue
            mp.grad = p.grad.detach().float()
            grads.append(mp.grad)
        self.found_inf.zero_()
        if grads:
            if caps.HAS_FOREACH_UNSCALE:
                # one fused kernel: unscale every grad and flag any inf/NaN (GradScaler's own)
                torch._amp_foreach_non_finite_check_and_unscale_(grads, self.found_inf, self._inv(scale))
            else:  # torch < 1.6 (the cuda10 stack)
                inv = 1.0 / scale
                for g in grads:
                    self.found_inf += (~torch.isfinite(g)).any().float()
                    g.mul_(inv)
                self.found_inf.clamp_(max=1.0)
        self.nonfinite_steps += self.found_inf
        return self.found_inf

    def master_to_model(self) -> None:
        with torch.no_grad():
            for p, mp in zip(self.model_params, self.master_params):
                p.copy_(mp)

    def zero_model_grads(self) -> None:
        for p in self.model_params:
            p.grad = None


# --------------------------------------------------------------------------- the one code path
@dataclass
class StepResult:
    skipped: bool = False


@dataclass
class Precision:
    """Everything a training loop needs to run one precision mode.

    Usage (same for every mode)::

        prec = Precision(mode, device)
        model = prec.prepare_model(model)
        opt = make_optimizer(prec.optimizer_params(model))
        model, opt = prec.wrap(model, opt)           # apex only; identity otherwise
        with prec.autocast():
            loss = loss_fn(model(x), y)
        prec.backward_step(loss, opt, clip=0.25)     # scaling, unscaling, skip on overflow
    """

    mode: str
    device: str
    static_loss_scale: float | None = None
    dynamic_loss_scale: bool = True
    #: first dynamic loss scale; None = the original's default (GradScaler 2**16 for
    #: amp-fp16, DynamicLossScaler 2**32 for fp16-master)
    init_scale: float | None = None
    backends: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: False only in tests that exercise the fp16 bookkeeping on the CPU
    check_available: bool = True

    def __post_init__(self) -> None:
        reason = unavailable_reason(self.mode, self.device) if self.check_available else None
        if reason:
            raise ValueError(reason)
        self.device_type = "cuda" if self.device.startswith("cuda") else "cpu"
        row = precision_modes.mode(self.mode)  # what the mode is (kit.results.precisions), read once
        how = precision_modes.scheme(self.mode)
        #: torch's GradScaler scales the loss (amp-fp16)
        self.grad_scaler = how == precision_modes.SCALED_AUTOCAST
        #: the 2018 scheme: half model, fp32 master weights, the kit's LossScaler (fp16-master)
        self.two_copies = how == precision_modes.TWO_COPIES
        #: Apex amp's opt level (apex-o1, apex-o2), or None
        self.apex_level = ("O2" if row.master_weights else "O1") if how == precision_modes.APEX else None
        self._autocast = getattr(torch, row.autocast) if row.autocast else None
        self.backends = configure_backends(self.mode)
        self.master: MasterWeights | None = None
        self.scaler = None
        self.loss_scaler: LossScaler | None = None
        self._apex_amp = None
        self._scale_history: list[torch.Tensor] = []
        self._nan_count = torch.zeros((), dtype=torch.int64, device=self.device)
        self._steps = 0
        if self.grad_scaler:
            if self.init_scale is None:
                self.init_scale = GRADSCALER_INIT_SCALE
            self.scaler = torch.amp.GradScaler(self.device_type, init_scale=self.init_scale)
        if self.two_copies:
            if self.static_loss_scale is not None and not self.dynamic_loss_scale:
                self.loss_scaler = LossScaler(scale=float(self.static_loss_scale), dynamic=False)
            else:
                if self.init_scale is None:
                    self.init_scale = DYNAMIC_INIT_SCALE
                self.loss_scaler = LossScaler(scale=self.init_scale, dynamic=True)

    # -- model and optimizer
    @property
    def autocast_dtype(self) -> torch.dtype | None:
        # the row's autocast dtype; the fp8 modes' is bf16, for everything that is not an fp8 GEMM
        # (torchao's Float8Linear casts its input to the autocast dtype, then to fp8)
        return self._autocast

    def prepare_model(self, model: nn.Module) -> nn.Module:
        if self.two_copies:
            model = _CastInput(to_half_keep_norm_fp32(model))
            self.master = MasterWeights(model.parameters())
        return model

    def optimizer_params(self, model: nn.Module):
        """The parameters the optimizer should own: fp32 masters for fp16-master."""
        if self.master is not None:
            return self.master.master_params
        return [p for p in model.parameters() if p.requires_grad]

    def wrap(self, model: nn.Module, optimizer):
        if self.apex_level:
            from apex import amp

            self._apex_amp = amp
            opt_level = self.apex_level
            kwargs = {}
            if self.static_loss_scale is not None and not self.dynamic_loss_scale:
                kwargs["loss_scale"] = float(self.static_loss_scale)
            model, optimizer = amp.initialize(model, optimizer, opt_level=opt_level, verbosity=0, **kwargs)
        from kit.bench.distributed import state as data_parallel

        return data_parallel.wrap_model(model), optimizer  # DDP in a rank of a data-parallel cell, else as is

    def autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.autocast_dtype)

    # -- the step
    def backward_step(self, loss: torch.Tensor, optimizer, clip: float | None = None, params=None) -> StepResult:
        """Backward, (un)scale, clip, step. `params` is what to clip for non-master modes."""
        self._steps += 1
        self._nan_count += (~torch.isfinite(loss.detach())).to(torch.int64)
        if self.grad_scaler:
            self.scaler.scale(loss).backward()
            if clip is not None:
                self.scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(params if params is not None else _opt_params(optimizer), clip)
            self.scaler.step(optimizer)
            self.scaler.update()
            # keep the scale on the device (no sync); overflows are counted at the end
            self._scale_history.append(self.scaler._scale.detach().clone())
            caps.zero_grad(optimizer)
            return StepResult()
        if self.two_copies:
            ls = self.loss_scaler
            (loss.float() * ls.scale).backward()  # FP16_Optimizer.backward: the scaled loss in fp32
            found_inf = self.master.grads_to_master(ls.scale)
            self.master.zero_model_grads()
            if ls.dynamic:
                # DynamicLossScaler decides on the host whether to skip: one sync per step
                # (Apex's own check read every gradient's sum back, one sync per parameter)
                overflow = bool(found_inf.item())
                ls.update(overflow)
                if overflow:
                    caps.zero_grad(optimizer)
                    return StepResult(skipped=True)
            # static scale: Apex's LossScaler.has_overflow is False, so the step is always
            # taken and nothing is read back; inf/NaN steps are still counted on the device
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(self.master.master_params, clip)
            optimizer.step()
            caps.zero_grad(optimizer)
            self.master.master_to_model()
            return StepResult()
        if self._apex_amp is not None:
            with self._apex_amp.scale_loss(loss, optimizer) as scaled:
                scaled.backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(self._apex_amp.master_params(optimizer), clip)
            optimizer.step()
            caps.zero_grad(optimizer)
            return StepResult()
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(params if params is not None else _opt_params(optimizer), clip)
        optimizer.step()
        caps.zero_grad(optimizer)
        return StepResult()

    # -- accounting
    def counters(self) -> dict:
        """Overflow / skipped steps and NaN losses so far (syncs the device once)."""
        overflow = 0
        scale = None
        if self.grad_scaler and self._scale_history:
            hist = torch.stack(self._scale_history).float().cpu().tolist()
            prev = self.init_scale
            for s in hist:
                if s < prev:  # GradScaler halves the scale exactly when it skips a step
                    overflow += 1
                prev = s
            scale = hist[-1]
        elif self.loss_scaler is not None:
            # dynamic: the host saw every overflow (and skipped the step); static: counted on the device
            overflow = self.loss_scaler.overflows if self.loss_scaler.dynamic else int(self.master.nonfinite_steps.item())
            scale = self.loss_scaler.scale
        elif self._apex_amp is not None:
            try:
                from apex.amp import _amp_state

                scale = float(_amp_state.loss_scalers[0].loss_scale())
            except Exception:
                scale = None
        return {
            "overflow_steps": overflow,
            "nan_losses": int(self._nan_count.item()),
            "loss_scale_final": scale,
            "steps": self._steps,
        }

    def describe(self) -> dict:
        d = {"mode": self.mode, "autocast_dtype": str(self.autocast_dtype) if self.autocast_dtype else None, **self.backends}
        if self.loss_scaler is not None:
            d["loss_scale"] = "dynamic" if self.loss_scaler.dynamic else self.loss_scaler.scale
        if self.scaler is not None:
            d["loss_scale"] = "dynamic (torch.amp.GradScaler)"
        if self.mode in FP8_RECIPES:
            d["fp8_recipe"] = FP8_RECIPES[self.mode]
        return d


def _opt_params(optimizer) -> list:
    return [p for g in optimizer.param_groups for p in g["params"]]
