"""The generic engine's cells: a plugin's model, input and loss (its descriptor's recipe,
kit.bench.generic.Recipe) trained in one precision, timed as the built-in engines time theirs.

    run_cell(spec, ctx)
      the mode on this device (kit.bench.precision), the captured step's needs   -> skipped, with why
      the plugin's module; the data set it reads, where it names one
      for each repeat: a fresh model (seed = --seed + repeat), one fixed batch on the device,
          warm-up steps (compilation, autotuning, the capture: untimed), then the timed steps
          (kit.bench.timing.StepClock: the device synchronised at the edges only)
      the last repeat: the profiled window of the same step (kit.bench.profile_window)
      -> CellResult(method: the engine, its revision, the plugin's package and version, the settings)

One fixed batch is made once per repeat and reused by every step (as kit.bench.cifar's GPU-bound
engine keeps its data on the device): the figures are the step's, never the input pipeline's.
"""

from __future__ import annotations

import importlib
import math
from typing import Any, Callable

import torch

from kit.bench import caps, methods, profile_window, timing
from kit.bench.context import CellContext, StepTally
from kit.bench.generic import EAGER, GRAPHED, Recipe
from kit.bench.graphed_scaling import DeviceLossScale
from kit.bench.precision import Precision, unavailable_reason
from kit.results import precisions as precision_modes
from kit.results import step_profile, suites
from kit.results.schema import CellResult, CellSpec
from kit.results.stats import repeat_notes, summarise_repeats

#: how often (in steps) the loop reports progress and polls for a stop request
PROGRESS_EVERY = 5
#: eager steps on a side stream before the capture (autotuning, lazy allocations), as the CIFAR graphed step
WARMUP_BEFORE_CAPTURE = 3
#: random inputs' provenance (a recipe with an input shape and no ``batch`` of its own)
RANDOM_INPUTS = ("random inputs of the plugin's shape, normal(0, 1), and uniform targets, made on the device "
                 "(synthetic: throughput only; the loss means nothing)")


def skip_reason(spec: CellSpec, device: str) -> str | None:
    """Why the cell cannot run on ``device`` (the mode's own reasons; the captured step's), or None."""
    reason = unavailable_reason(spec.precision, device)
    if reason or spec.engine != GRAPHED:
        return reason
    if not device.startswith("cuda"):
        return "the graphed engine captures the step as a CUDA graph: a GPU only (the eager engine runs here)"
    if spec.precision not in precision_modes.where(capturable=True):
        return f"{spec.precision} decides on the host whether to skip a step, so its step cannot be captured"
    if not (caps.HAS_GRAPHED_STEP and caps.HAS_FOREACH_UNSCALE):
        return f"torch {torch.__version__} cannot capture a whole training step (torch 2.0+)"
    return None


def skipped_cell(spec: CellSpec, device: str) -> CellResult | None:
    reason = skip_reason(spec, device)
    return CellResult.skipped(spec, reason, throughput_unit=suites.suite(spec.workload).unit) if reason else None


def run_cell(spec: CellSpec, ctx: CellContext) -> CellResult:
    suite = suites.suite(spec.workload)
    skipped = skipped_cell(spec, ctx.device)
    if skipped is not None:
        return skipped
    recipe: Recipe = suite.recipe
    plugin = importlib.import_module(recipe.module)
    data = _load_data(recipe, ctx)
    steps = int(spec.params["steps"])
    total = ctx.repeats * (steps + recipe.warmup_steps)
    done = 0
    repeats: list[dict] = []
    profile: dict = {}

    for r in range(ctx.repeats):
        def on_steps(n: int, _r: int = r) -> None:
            nonlocal done
            done += n
            ctx.progress(min(done, total), total, f"repeat {_r + 1}/{ctx.repeats}")

        last = r == ctx.repeats - 1
        after = profile_window.into(profile, ctx.device, ctx.profile_steps) if last and ctx.profile_steps else None
        record = run_repeat(plugin, recipe, spec, ctx.device, ctx.seed + r, data,
                            StepTally(on_steps, ctx.should_stop, PROGRESS_EVERY), after)
        record["repeat"] = r
        repeats.append(record)
        ctx.event("note", message=f"repeat {r + 1}/{ctx.repeats} done", repeat=r,
                  items_per_s=record["throughput_items_per_s"], final_metric=record["final_metric"])
    return CellResult(
        spec.workload, spec.model, spec.precision, spec.engine, "ok", params=spec.params,
        throughput_unit=suite.unit, repeats=repeats, summary=summarise_repeats(repeats),
        metrics={"step": repeats[0]["step"], "final_metric_name": "train_loss", "lower_is_better": True,
                 "flops_per_item": recipe.flops_per_item or None, "plugin": suite.plugin or None},
        data=data.provenance, notes=_notes(data, repeats),
        method=methods.record(f"{spec.workload}/{spec.engine}", {
            "plugin": suite.plugin or "the kit's own",
            "step": "eager" if spec.engine == EAGER else "cuda-graph",
            "optimizer": "SGD with momentum" + (" (fused)" if spec.engine == GRAPHED and caps.HAS_FUSED_SGD else ""),
            "loss_scale": methods.loss_scale(spec.precision, on_device=spec.engine == GRAPHED),
            "data": "one fixed batch on the device",
            "excluded_steps": methods.warmup_excluded(repeats),
            "timed_steps": steps,
            "batch_size": spec.params["batch_size"],
        }),
        profile=step_profile.with_timed_step(profile, repeats),
    )


class _Data:
    """What a cell trains on: the data set the recipe names (loaded once per cell), or nothing."""

    def __init__(self, loaded: Any, provenance: dict):
        self.loaded = loaded
        self.provenance = provenance


def _load_data(recipe: Recipe, ctx: CellContext) -> _Data:
    if not recipe.dataset:
        return _Data(None, {"dataset": None, "source": "synthetic", "note": RANDOM_INPUTS})
    from kit.data.registry import dataset

    loaded = dataset(recipe.dataset).load(ctx.data_dir, ctx.data_source, ctx.seed)
    return _Data(loaded, dict(getattr(loaded, "info", {}) or {"dataset": recipe.dataset, "source": ctx.data_source}))


def _batch(plugin: Any, recipe: Recipe, params: dict, device: str, seed: int, data: _Data) -> tuple:
    """The repeat's one batch on the device: the plugin's ``batch``, or random inputs of its shape."""
    generator = torch.Generator(device=device).manual_seed(seed)
    size = int(params["batch_size"])
    if hasattr(plugin, "batch"):
        return plugin.batch(params, size, device, generator, data.loaded)
    if not recipe.input_shape or recipe.classes < 1:
        raise ValueError(f"{recipe.module} has no batch() and its suite no input_shape and classes")
    x = torch.randn((size,) + tuple(recipe.input_shape), generator=generator, device=device)
    y = torch.randint(0, recipe.classes, (size,), generator=generator, device=device)
    return x, y


def run_repeat(plugin: Any, recipe: Recipe, spec: CellSpec, device: str, seed: int, data: _Data, tally: StepTally,
               after: Callable[..., None] | None = None) -> dict:
    """Train a fresh model for the warm-up and timed steps; the repeat's record (kit.results.schema's
    repeat metrics). ``after``, when given, gets the repeat's own step once the record is complete."""
    params, batch = spec.params, int(spec.params["batch_size"])
    warm = max(1, recipe.warmup_steps)
    timing.reset_peak_memory(device)
    clock = timing.StepClock(device, warmup_steps=warm)
    clock.start()
    torch.manual_seed(seed)
    x, y = _batch(plugin, recipe, params, device, seed, data)
    model = plugin.build(params).to(device)
    step = (EagerStep if spec.engine == EAGER else CapturedStep)(model, plugin.loss, spec.precision, device, recipe)
    losses = []
    clock.epoch_start()
    for _ in range(warm + int(params["steps"])):
        losses.append(step(x, y))
        clock.step_done(batch)
        tally.step()
    clock.epoch_end()
    tally.flush()
    times = clock.summary()
    curve = [float(v) for v in torch.stack(losses).float().cpu().tolist()]
    last = [v for v in curve[-min(10, len(curve)):] if math.isfinite(v)]
    final = sum(last) / len(last) if last else None
    tput = times["throughput_items_per_s"]
    record = {
        "seed": seed, "epoch_seconds": times["epoch_seconds"], "epoch_seconds_median": times["epoch_seconds_median"],
        "throughput_items_per_s": tput, "steady_items": times["steady_items"], "steady_seconds": times["steady_seconds"],
        "steady_windows": times["steady_windows"], "warmup_steps": times["warmup_steps"],
        "time_to_first_step_s": times["time_to_first_step_s"], "peak_memory_bytes": timing.peak_memory_bytes(device),
        "achieved_tflops": recipe.flops_per_item * tput / 1e12 if tput and recipe.flops_per_item else None,
        **step.counters(), "final_loss": final, "final_metric": final,
        "diverged": not all(math.isfinite(v) for v in curve),
        "metrics": {"train_loss": [v if math.isfinite(v) else None for v in curve]},
        "precision": step.prec.describe(), "step": step.describe(),
    }
    if after is not None:
        after(lambda: step(x, y))
    return record


class EagerStep:
    """The loop as a user writes it: the precision's autocast, its backward and loss scaling
    (kit.bench.precision), SGD with momentum; every kernel launched from Python."""

    def __init__(self, model: torch.nn.Module, loss_fn: Callable, mode: str, device: str, recipe: Recipe):
        self.prec = Precision(mode, device)
        model = self.prec.prepare_model(model)
        optimizer = torch.optim.SGD(self.prec.optimizer_params(model), lr=recipe.lr, momentum=recipe.momentum)
        self.model, self.optimizer = self.prec.wrap(model, optimizer)
        self.loss_fn = loss_fn

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with self.prec.autocast():
            loss = self.loss_fn(self.model(x), y)
        self.prec.backward_step(loss, self.optimizer)
        return loss.detach()

    def counters(self) -> dict:
        return self.prec.counters()

    def describe(self) -> str:
        return "eager: every kernel launched from Python, step by step"


class CapturedStep:
    """The whole step (forward and loss under the mode's autocast, backward, SGD with momentum, and for
    amp-fp16 the loss scale on the device: kit.bench.graphed_scaling) captured as one CUDA graph after
    WARMUP_BEFORE_CAPTURE eager steps on a side stream, then replayed: one launch per step. The update is
    torch.optim.SGD's rule (torch's fused SGD kernel where torch has it, which leaves every weight as it
    was on an overflowed fp16 step; else the same rule in foreach ops, masked)."""

    def __init__(self, model: torch.nn.Module, loss_fn: Callable, mode: str, device: str, recipe: Recipe):
        self.prec = Precision(mode, device)  # the TF32 switches and the autocast dtype; its step is not used
        self.model, self.loss_fn, self.device, self.momentum = model, loss_fn, device, recipe.momentum
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.bufs = [torch.zeros_like(p) for p in self.params]
        self.lr = torch.full((), recipe.lr, dtype=torch.float32, device=device)
        self.scaled = self.prec.grad_scaler
        self.loss_scale = DeviceLossScale(device, 2.0 ** 16, dynamic=True, growth_interval=2000)
        self.nan_count = torch.zeros((), dtype=torch.int64, device=device)
        #: on the CPU (the tests) the same step runs without a capture
        self.capture = device.startswith("cuda")
        self.side = torch.cuda.Stream(device=device) if self.capture else None
        self.graph: Any = None
        self.static: Any = None
        self.warm = 0
        self.steps = 0

    def _body(self) -> torch.Tensor:
        dtype = self.prec.autocast_dtype
        where = "cuda" if self.capture else "cpu"
        with torch.autocast(where, dtype=dtype or torch.bfloat16, enabled=dtype is not None, cache_enabled=False):
            loss = self.loss_fn(self.model(self.static[0]), self.static[1])
        self.nan_count += (~torch.isfinite(loss.detach())).to(torch.int64)
        (self.loss_scale.scale_loss(loss) if self.scaled else loss).backward()
        self._sgd()
        return loss.detach()

    @torch.no_grad()
    def _sgd(self) -> None:
        grads = [p.grad for p in self.params]
        if self.scaled:
            self.loss_scale.unscale_and_check(grads)
        if caps.HAS_FUSED_SGD:
            torch._fused_sgd_(self.params, grads, self.bufs, weight_decay=0.0, momentum=self.momentum, lr=self.lr,
                              dampening=0.0, nesterov=False, maximize=False, is_first_step=False,
                              found_inf=self.loss_scale.found_inf if self.scaled else None)
        else:  # buf <- m buf + g; p <- p - lr buf (masked by keep on an overflowed step)
            keep = self.loss_scale.keep() if self.scaled else None
            if keep is not None:
                for g in grads:
                    torch.nan_to_num_(g, nan=0.0, posinf=0.0, neginf=0.0)
            delta = torch._foreach_mul(self.bufs, self.momentum - 1.0)
            torch._foreach_add_(delta, grads)
            if keep is not None:
                torch._foreach_mul_(delta, keep)
            torch._foreach_add_(self.bufs, delta)
            torch._foreach_sub_(self.params, torch._foreach_mul(self.bufs, self.lr * (keep if keep is not None else 1.0)))
        if self.scaled:
            self.loss_scale.update()

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.steps += 1
        if self.static is None:
            self.static = (x.clone(), y.clone())
        elif x.data_ptr() != self.static[0].data_ptr():
            self.static[0].copy_(x)
            self.static[1].copy_(y)
        if self.graph is not None:
            self.graph.replay()
            return self.loss
        if not self.capture:
            for p in self.params:
                p.grad = None
            return self._body()
        with torch.cuda.device(self.device):
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side):
                for p in self.params:
                    p.grad = None
                loss = self._body()
            torch.cuda.current_stream().wait_stream(self.side)
            self.warm += 1
            if self.warm == WARMUP_BEFORE_CAPTURE:
                for p in self.params:
                    p.grad = None  # backward inside the capture allocates them in the graph's pool
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph, stream=self.side):
                    self.loss = self._body()
                # capture records without running: this step's update already happened above
        return loss.clone()

    def counters(self) -> dict:
        scale = self.loss_scale.counters()
        return {"overflow_steps": scale["overflow_steps"] if self.scaled else 0, "nan_losses": int(self.nan_count.item()),
                "loss_scale_final": scale["loss_scale_final"] if self.scaled else None, "steps": self.steps}

    def describe(self) -> str:
        return ("graphed: the whole step (forward, loss, backward, SGD" + (", the loss scale" if self.scaled else "")
                + f") captured as one CUDA graph after {WARMUP_BEFORE_CAPTURE} eager steps, then replayed")


def _notes(data: _Data, repeats: list) -> list:
    notes = [] if data.loaded is not None else [f"synthetic: {RANDOM_INPUTS}"]
    if any(rec["throughput_items_per_s"] is None for rec in repeats):
        notes.append("too few steps for a steady state after warm-up: no throughput recorded")
    return notes + repeat_notes(repeats)
