"""The whole training step as one CUDA graph: forward, loss, backward and the
optimizer (with device-side loss scaling for fp16), replayed with one call.

Why: at 32 px a ResNet-18 step at batch 256 is ~1.3 ms of GPU work on an H200
but ~3.4 ms of host work with torch.compile(mode="reduce-overhead"), because
the optimizer, gradient accumulation and graph launches stay on the host. A
launch-bound step makes every precision look the same speed. Capturing the
whole step leaves the host one copy and one replay per step, so the GPU, and
so the precision, sets the pace (measured with scripts/profile_step.py).

What is captured, per mode:
    fp32 / tf32 / amp-bf16   forward (autocast for bf16), loss, backward, SGD
    amp-fp16                 as above with the loss scaled on the device:
                             unscale + inf check (torch's own GradScaler kernels),
                             the step skipped on the device on overflow, the scale halved
                             on overflow and doubled after 2000 clean steps
fp16-master and Apex modes decide on the host whether to skip a step, by
design of the 2018 scheme, so they cannot be captured and use torch.compile.

In a data-parallel cell (kit.bench.distributed) the model runs inside
DistributedDataParallel and the gradients' all-reduce is captured with the rest of the
step, as PyTorch documents for NCCL 2.9.6+ ("CUDA Graphs", usage with
DistributedDataParallel): DDP built on the capture's side stream, at least 11 eager
iterations before the capture (its bucket rebuild after the first, its runtime
statistics at the first 10, each a host sync that capture forbids), and the capture's
error mode "thread_local" so that NCCL's watchdog thread may keep querying its events.
A replay then runs DDP's copies into the buckets, the all-reduce and the division by
the world size as recorded kernels, with none of DDP's per-step host work (its autograd
hooks cost 0.7-1.0 ms a step in an eager step on an H200, references/h200/ddp).

Two variants of the captured step (the cell's compile_mode):
    cuda-graph-inductor   the model compiled by Inductor (torch.compile, default mode:
                          fused Triton kernels for forward and backward, no CUDA graphs
                          of its own) and run inside the captured step; compilation
                          happens in the warm-up steps before capture, so it shows in
                          time to first step and never in steady throughput
    cuda-graph            the same step with the model's eager kernels (--compile off)
The loss, the scaling and the optimizer are the same code in both.

The optimizer is SGD with momentum, Nesterov and weight decay on device tensors,
so the learning rate of every step comes from a schedule tensor indexed on the
device. Where torch has it (2.4+), the update is torch's own fused SGD kernel
(torch.optim.SGD(fused=True) runs the same kernel): one pass over parameters,
gradients and momentum buffers, reading the learning rate and the overflow flag
on the device and leaving everything unchanged on an overflowed fp16 step.
Elsewhere it is the same rule in foreach ops, masked on overflow. Both match
torch.optim.SGD's update (tests check that on the CPU). Measured on an H200:
the foreach form was six passes over the weights, and for amp-fp16 also one
kernel per gradient to clear infinities and two more passes for the mask,
0.22 ms (ResNet-18) and 0.56 ms (ResNet-50) per step more than bf16.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from kit.bench import caps
from kit.bench.cifar import models
from kit.bench.cifar.evaluation import evaluate_model
from kit.bench.distributed import state as data_parallel
from kit.bench.graphed_scaling import DeviceLossScale
from kit.bench.precision import Precision
from kit.results import precisions as precision_modes

#: the modes whose every decision is made on the device (kit.results.precisions: capturable)
GRAPH_MODES = precision_modes.where(capturable=True)
#: the step modes (compile_mode) this trainer runs: with and without Inductor inside
INDUCTOR_GRAPH = "cuda-graph-inductor"
EAGER_GRAPH = "cuda-graph"
STEP_MODES = (INDUCTOR_GRAPH, EAGER_GRAPH)
#: eager steps on a side stream before capture (cuDNN autotuning, lazy allocations)
WARMUP_BEFORE_CAPTURE = 3


def warmup_before_capture() -> int:
    """Eager steps before the capture in this process: WARMUP_BEFORE_CAPTURE, or in a data-parallel
    rank DDP's DDP_STATS_WARMUP (11, PyTorch's documented minimum for capturing a DDP step)."""
    return WARMUP_BEFORE_CAPTURE if data_parallel.active() is None else max(
        WARMUP_BEFORE_CAPTURE, data_parallel.DDP_STATS_WARMUP)


class GraphedTrainer:
    """Drop-in for kit.bench.cifar.trainer.Trainer when the step can be captured."""

    def __init__(self, cfg: Any, total_steps: int, lr_of_step, capture: bool = True, inductor: bool = False,
                 prepare=None):
        if cfg.precision not in GRAPH_MODES:
            raise ValueError(f"{cfg.precision} cannot be captured as one CUDA graph")
        self.cfg = cfg
        dev = cfg.device
        torch.manual_seed(cfg.seed)
        fmt = torch.channels_last if dev.startswith("cuda") else torch.contiguous_format
        self.model = models.build(cfg.model, cfg.num_classes).to(dev, memory_format=fmt)
        self.model.train()
        self.capture = capture
        # one stream of the run's GPU for every warm-up step and the capture: torch.cuda.graph's
        # own default is one stream per process, made on whichever GPU was current when the
        # first graph was captured (a later capture on another GPU then fails with "operation
        # not permitted when stream is capturing"), and cuDNN/cuBLAS set up per-stream
        # workspaces on first use, which must happen in warm-up, not during the capture
        self.side = torch.cuda.Stream(device=dev) if capture else None
        # a data-parallel rank: the model inside DDP (a plain cell: the model itself), built on
        # the side stream, where PyTorch's recipe for capturing a DDP step builds it
        where = torch.cuda.stream(self.side) if capture else contextlib.nullcontext()
        with where:
            self.net = data_parallel.wrap_model(self.model)
        self.data_parallel = self.net is not self.model
        self.capture_after = warmup_before_capture()
        # The module the step calls: the model itself, or Inductor's compilation of it (the
        # same parameters and buffers; compiled on the first call, recompiled never: the
        # shapes are static). dynamic=False: a captured graph replays fixed shapes anyway.
        self.inductor = inductor
        # prepare (the data's uint8 batch -> model input: float, normalise, upsample, layout), when
        # given, runs inside the step: step() then takes the uint8 batch, and the conversion is
        # replayed with the graph (and compiled with the model by Inductor) instead of running as
        # a handful of eager kernels between two replays
        self.prepare = prepare
        body = self.net if prepare is None else (lambda x: self.net(prepare(x)))
        self.forward = torch.compile(body, dynamic=False) if inductor else body
        # Precision sets the TF32 switches and knows the autocast dtype; its step is not used
        self.prec = Precision(cfg.precision, dev, check_available=capture)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.bufs = [torch.zeros_like(p) for p in self.params]
        sched = [lr_of_step(s) for s in range(total_steps + 1)]
        self.lr_sched = torch.tensor(sched, dtype=torch.float32, device=dev)
        self.step_idx = torch.zeros((), dtype=torch.long, device=dev)
        self.last = len(sched) - 1
        self.loss_fn = caps.cross_entropy(cfg.label_smoothing)
        self.scaled = self.prec.grad_scaler  # a GradScaler mode (amp-fp16): its scale kept on the device
        self.init_scale = 2.0**16
        # the loss scale on the device (kit.bench.graphed_scaling, shared with the LSTM graphed engine):
        # GradScaler's rule, halved on overflow and doubled after 2000 clean steps
        self.loss_scale = DeviceLossScale(dev, self.init_scale, dynamic=True, growth_interval=2000)
        self.scale = self.loss_scale.scale
        self.growth_tracker = self.loss_scale.growth_tracker
        self.found_inf = self.loss_scale.found_inf
        self.overflows = self.loss_scale.overflows
        self.nan_count = torch.zeros((), dtype=torch.int64, device=dev)
        self.fused_sgd = caps.HAS_FUSED_SGD
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_x: torch.Tensor | None = None
        self.static_y: torch.Tensor | None = None
        self.static_loss: torch.Tensor | None = None
        self.warm_steps = 0
        self.steps = 0

    # ------------------------------------------------------------------ the step
    def _body(self) -> torch.Tensor:
        dtype = self.prec.autocast_dtype
        with torch.autocast("cuda" if self.cfg.device.startswith("cuda") else "cpu", dtype=dtype or torch.float32,
                            enabled=dtype is not None, cache_enabled=False):
            out = self.forward(self.static_x)
        loss = self.loss_fn(out.float(), self.static_y)
        self.nan_count += (~torch.isfinite(loss)).to(torch.int64)
        (self.loss_scale.scale_loss(loss) if self.scaled else loss).backward()
        self._sgd()
        return loss.detach()

    @torch.no_grad()
    def _sgd(self) -> None:
        cfg = self.cfg
        grads = [p.grad for p in self.params]
        # index_select, not lr_sched[idx]: indexing by a tensor reads it on the host (a sync
        # that capture forbids); this keeps the lookup on the device
        lr = self.lr_sched.index_select(0, self.step_idx.clamp(max=self.last).view(1)).squeeze(0)
        mom = cfg.momentum
        if self.scaled:
            self.loss_scale.unscale_and_check(grads)
        if self.fused_sgd:
            # one kernel: weight decay, momentum, Nesterov and the step; on overflow (found_inf
            # 1) it returns before touching a weight or a buffer. Zero buffers with
            # is_first_step=False give buf = g on the first step, as torch.optim.SGD's clone
            torch._fused_sgd_(self.params, grads, self.bufs, weight_decay=cfg.weight_decay, momentum=mom, lr=lr,
                              dampening=0.0, nesterov=True, maximize=False, is_first_step=False,
                              found_inf=self.found_inf if self.scaled else None)
        else:
            self._foreach_sgd(grads, lr)
        if self.scaled:
            self.loss_scale.update()
        self.step_idx += 1

    def _foreach_sgd(self, grads: list, lr: torch.Tensor) -> None:
        """The same update in foreach ops (torch without _fused_sgd_), masked on overflow."""
        wd, mom = self.cfg.weight_decay, self.cfg.momentum
        if self.scaled:
            keep = self.loss_scale.keep()  # 0 on overflow: the step changes nothing
            for g in grads:
                torch.nan_to_num_(g, nan=0.0, posinf=0.0, neginf=0.0)
        torch._foreach_add_(grads, self.params, alpha=wd)
        if self.scaled:
            delta = torch._foreach_mul(self.bufs, mom - 1.0)  # buf <- buf + keep * ((mom - 1) buf + g)
            torch._foreach_add_(delta, grads)
            torch._foreach_mul_(delta, keep)
            torch._foreach_add_(self.bufs, delta)
        else:
            torch._foreach_mul_(self.bufs, mom)  # buf <- mom buf + g  (torch.optim.SGD, dampening 0)
            torch._foreach_add_(self.bufs, grads)
        torch._foreach_add_(grads, self.bufs, alpha=mom)  # Nesterov: d = g + mom buf
        torch._foreach_mul_(grads, lr * keep if self.scaled else lr)
        torch._foreach_sub_(self.params, grads)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if not self.capture or self.graph is not None:
            return self._step(x, y)  # a replay runs on the device it was captured on
        # warm-up streams and the capture on the run's GPU even when the caller did not
        # make it the current device (`kit run` does, in kit.bench.api.resolve_device):
        # scripts/bench_overhead.py on cuda:1 fell back to torch.compile without this
        with torch.cuda.device(self.cfg.device):
            return self._step(x, y)

    def _step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.static_x is None:
            self.static_x, self.static_y = x.clone(), y.clone()
        else:
            self.static_x.copy_(x)
            self.static_y.copy_(y)
        self.steps += 1
        if self.graph is not None:
            self.graph.replay()
            return self.static_loss
        with self._strict_compile():
            return self._warm_or_capture()

    def _strict_compile(self) -> Any:
        """Around the steps that run Dynamo (warm-up, capture): a recompile limit that is hit
        raises instead of running the model eagerly without a word (Dynamo's default), so the
        cell falls back to the eager graph and records why, and never reports eager kernels
        as Inductor's."""
        if not self.inductor or not hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
            return contextlib.nullcontext()
        return torch._dynamo.config.patch(fail_on_recompile_limit_hit=True)

    def _warm_or_capture(self) -> torch.Tensor:
        if not self.capture:  # CPU tests: the same body, without capture
            for p in self.params:
                p.grad = None
            return self._body()
        side = self.side
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for p in self.params:
                p.grad = None
            loss = self._body()
        torch.cuda.current_stream().wait_stream(side)
        self.warm_steps += 1
        if self.warm_steps == self.capture_after:
            for p in self.params:
                # backward inside the capture allocates them in the graph's pool (under DDP the
                # reducer then copies each into its bucket and points the gradient at the bucket)
                p.grad = None
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, stream=side, **self._capture_options()):
                self.static_loss = self._body()
            # capture records but does not run: this step's update already happened above
        return loss.clone()

    def _capture_options(self) -> dict:
        """torch.cuda.graph's error mode: "thread_local" for a DDP step (NCCL's watchdog thread queries
        its events during the capture, which the default "global" mode would forbid), where torch has it."""
        import inspect

        if self.data_parallel and "capture_error_mode" in inspect.signature(torch.cuda.graph).parameters:
            return {"capture_error_mode": "thread_local"}
        return {}

    def evaluate(self, data: Any, image_size: int, batch_size: int) -> tuple[float, float]:
        """Test accuracy and loss, eagerly (the captured graph is for training only)."""
        return evaluate_model(self.model, self.prec, self.cfg.device, data, image_size, batch_size)

    # ------------------------------------------------------------------ accounting
    def counters(self) -> dict:
        return {
            "overflow_steps": int(self.overflows.item()),
            "nan_losses": int(self.nan_count.item()),
            "loss_scale_final": float(self.scale.item()) if self.scaled else None,
            "steps": self.steps,
        }

    def describe(self) -> dict:
        d = self.prec.describe()
        d["step"] = "whole step captured as one CUDA graph (forward, loss, backward, SGD)"
        d["optimizer"] = ("SGD, torch's fused kernel (torch._fused_sgd_)" if self.fused_sgd
                          else "SGD in foreach ops")
        if self.inductor:
            d["step"] += "; the model compiled by Inductor (torch.compile, default mode) inside it"
        if self.data_parallel:
            d["step"] += ("; the model in DistributedDataParallel, the gradients' all-reduce captured with the step "
                          f"(after {self.capture_after} eager steps)")
        if self.prepare is not None:
            d["input"] = "the uint8 batch, converted (float, normalise, upsample, layout) inside the captured step"
        if self.scaled:
            d["loss_scale"] = "dynamic, on the device (GradScaler's kernels; an overflowed step changes no weight)"
        return d
