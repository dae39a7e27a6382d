"""One CIFAR-100 cell: check it can run, load data, measure every repeat, summarise.

    run_cell(spec, ctx)
      -> skip (with the reason) if torchvision / fastai / the precision mode cannot run here
      -> load_data (cached across cells)  -> FLOPs per image (meta device)
      -> [find_max_batch]                 -> engine.run_repeats (seed = ctx.seed + r)
      -> CellResult(repeats, summary, metrics, data provenance, notes)

A mode that cannot run is skipped *before any work*; it is never replaced by
another mode.
"""

from __future__ import annotations

import logging
from typing import Any

from kit.bench import flops as flops_mod
from kit.bench import methods
from kit.bench.cifar import batch_search, fastai_engine, fastai_window, models, torch_engine
from kit.bench.cifar.plan import ENGINES
from kit.bench.cifar.train_config import TrainConfig
from kit.bench.precision import unavailable_reason
from kit.results import precisions as precision_modes
from kit.env.record import cpu_has_native_bf16
from kit.results import step_profile
from kit.results.cell_ids import curve_batch
from kit.results.schema import CellResult, CellSpec
from kit.results.schema_names import DEFAULT_FASTAI_LEARNER
from kit.results.stats import summarise_repeats
from kit.bench.context import CellContext

log = logging.getLogger("kit.bench.cifar")

# --------------------------------------------------------------------------- data (cached)
_arrays_cache: dict[tuple, Any] = {}
_device_cache: dict[tuple, Any] = {}


def load_data(ctx: CellContext) -> Any:
    """CifarData for the run (real or synthetic), loaded once per process."""
    key = (str(ctx.data_dir), ctx.data_source)
    if key not in _arrays_cache:
        from kit.data.cifar import load_cifar100

        _arrays_cache.clear()
        _arrays_cache[key] = load_cifar100(ctx.data_dir, source=ctx.data_source, seed=0)
    return _arrays_cache[key]


def device_data(arrays: Any, device: str):
    """The arrays resident on the device (uploaded once per data set and device)."""
    from kit.bench.cifar.gpu_data import DeviceData

    key = (id(arrays), device)
    if key not in _device_cache:
        _device_cache.clear()  # at most one copy on the device
        _device_cache[key] = DeviceData.upload(arrays.train_x, arrays.train_y, arrays.test_x, arrays.test_y, device)
    return _device_cache[key]


def provenance(arrays: Any, ctx: CellContext) -> dict:
    info = dict(getattr(arrays, "info", {}) or {})
    synthetic = ctx.data_source == "synthetic"
    info.update(
        source=ctx.data_source,
        synthetic=synthetic,
        train_images=int(len(arrays.train_x)),
        test_images=int(len(arrays.test_x)),
    )
    if synthetic:
        info["label"] = "SYNTHETIC data (same shapes as CIFAR-100): valid for throughput only, accuracy means nothing"
    return info


# --------------------------------------------------------------------------- config
def train_config(spec: CellSpec, ctx: CellContext) -> TrainConfig:
    p = spec.params
    convergence = ctx.mode == "convergence"
    return TrainConfig(
        model=spec.model,
        precision=spec.precision,
        device=ctx.device,
        batch_size=int(p.get("batch_size") or 256),
        image_size=int(p.get("image_size") or 32),
        epochs=int(p.get("epochs") or 1),
        steps=p.get("steps"),
        compile=p.get("compile") or "auto",
        seed=ctx.seed,
        evaluate=convergence,
        lr=p.get("lr"),
        label_smoothing=float(p.get("label_smoothing") or 0.0),
        warmup_steps=p.get("warmup_steps"),
        num_workers=p.get("num_workers"),
        dynamic_loss_scale=bool(p.get("dynamic_loss_scale") or False),
        static_loss_scale=float(p.get("static_loss_scale") or 512.0),
        learner=p.get("learner") or DEFAULT_FASTAI_LEARNER,
    )


def skip_reason(spec: CellSpec, device: str) -> str | None:
    if spec.engine not in ENGINES:
        return f"unknown CIFAR engine {spec.engine!r}; choose torch or fastai"
    if spec.model not in models.MODELS:
        return f"unknown model {spec.model!r}"
    why = models.torchvision_missing_reason()
    if why:
        return why
    if spec.engine == "fastai":
        return fastai_impl().skip_reason(spec.precision, device)
    why = unavailable_reason(spec.precision, device)
    bf16 = precision_modes.mode(spec.precision).autocast == "bfloat16"  # kit.results.precisions
    if why is None and bf16 and device == "cpu" and cpu_has_native_bf16() is False:
        # without bf16 instructions PyTorch emulates every bf16 convolution: many
        # times slower than fp32, so the cell would measure the emulation only
        why = ("this CPU has no bf16 instructions (AVX512-BF16 or AMX); PyTorch would emulate bf16 "
               "convolutions, many times slower than fp32, which measures nothing useful")
    return why


#: Batch-search results by (model, precision, image size, classes, device): the
#: search uses the torch engine's eager step, so the fastai cell of the same model
#: and precision reuses the torch cell's answer instead of searching again.
_max_batch_cache: dict[tuple, dict] = {}

#: Training steps per try: the first allocates gradients and momentum buffers,
#: the second reaches the steady-state peak.
SEARCH_STEPS_PER_TRY = 2


def max_batch_search(cfg: TrainConfig, dev_data: Any, n_train: int, ctx: CellContext, notes: list[str]) -> dict:
    """The largest batch that trains (see batch_search.find_max_batch), as cell metrics."""
    import torch

    key = (cfg.model, cfg.precision, cfg.image_size, cfg.num_classes, cfg.device)
    if key in _max_batch_cache:
        notes.append("max_batch: the search's result for this model and precision from earlier in this run "
                     "(the search uses the torch engine's eager step for every engine)")
        return dict(_max_batch_cache[key])
    tries: list[batch_search.Try] = []
    ctx.event("note", message="searching for the largest batch that fits")
    # cuDNN autotuning would benchmark every layer again at each new batch size
    # (minutes for the deep ResNets); the search only needs to know what fits
    bench_before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = False
    try:
        found = batch_search.find_max_batch(
            torch_engine.try_batch_fn(cfg, dev_data, steps=SEARCH_STEPS_PER_TRY),
            start=64, limit=n_train, resolution=8, log=tries, should_stop=ctx.should_stop,
        )
    finally:
        torch.backends.cudnn.benchmark = bench_before
    out = {
        "max_batch": found,
        "max_batch_at_limit": found >= n_train,
        "max_batch_tries": [[t.batch_size, t.fits] for t in tries],
        "max_batch_method": (f"doubling from 64 then binary search to within 8 images; each try {SEARCH_STEPS_PER_TRY} "
                             "eager training steps of the torch engine in this precision, cuDNN autotuning off "
                             f"(limit: the training set size, {n_train})"),
    }
    if found >= n_train:
        notes.append(f"max_batch: the whole training set ({n_train} images) fits in one batch; the real limit is higher")
    _max_batch_cache[key] = dict(out)
    return out


def fastai_impl():
    """The fastai engine for the installed fastai: v2 (today's stacks) or v1 (cuda10)."""
    from kit.bench.cifar import fastai_v1_engine

    return fastai_v1_engine if fastai_v1_engine.is_fastai_v1() else fastai_engine


#: in every CIFAR cell's notes: the kit never downloads weights, and needs none to time a step
RANDOM_INIT_NOTE = ("weights: random initialisation, no pretrained weights (pretrained weights change accuracy, "
                    "not the time per step)")


def learner_note(cfg: TrainConfig) -> str:
    """The fastai cell's learner, in its notes."""
    return f"learner: {cfg.learner} = {fastai_impl().describe_learner(cfg)}"


def engine_settings(cfg: TrainConfig, engine: str) -> dict:
    """What the engine did, in words and numbers (recorded in metrics)."""
    if engine == "torch":
        return {
            "optimizer": f"SGD(momentum={cfg.momentum}, nesterov=True, weight_decay={cfg.weight_decay})",
            "schedule": "OneCycleLR, fastai fit_one_cycle shape (pct_start 0.25, cosine, div 25, final lr max/1e5), momentum fixed",
            "lr_max": cfg.max_lr(),
            "label_smoothing": cfg.label_smoothing,
            "data": "uint8 on the device; crop+flip by one gather per epoch; normalise/upsample per step",
            "memory_format": "channels_last" if cfg.device.startswith("cuda") else "contiguous (CPU)",
            "cudnn_benchmark": True,
        }
    return {
        "learner": cfg.learner,
        "optimizer": "fastai default (Adam, wd 0.01 decoupled)",
        "schedule": "fit_one_cycle (fastai defaults: pct_start 0.25, moms 0.95-0.85-0.95)",
        "lr_max": cfg.lr if cfg.lr is not None else "fastai default (1e-3)",
        "data": "fastai TfmdDL: PadCropFlip per image in CPU workers; IntToFloatTensor + Normalize on the device",
    }


# --------------------------------------------------------------------------- the cell
def skipped_cell(spec: CellSpec, device: str) -> CellResult | None:
    """The skipped result for a cell that cannot run here, decided without training (None: it can run)."""
    why = skip_reason(spec, device)
    return CellResult.skipped(spec, why, throughput_unit="images") if why else None


def run_cell(spec: CellSpec, ctx: CellContext) -> CellResult:
    import torch

    device = ctx.device
    skipped = skipped_cell(spec, device)
    if skipped is not None:
        return skipped
    cfg = train_config(spec, ctx)
    if spec.engine == "torch":
        torch.backends.cudnn.benchmark = True
    arrays = load_data(ctx)
    notes: list[str] = [RANDOM_INIT_NOTE]
    metrics: dict[str, Any] = {"engine_settings": engine_settings(cfg, spec.engine)}
    create_cnn = spec.engine == "fastai" and cfg.learner == "create_cnn"
    if spec.engine == "fastai":
        notes.append(learner_note(cfg))

    # FLOPs: counted once per model and image size, on the meta device
    try:
        if create_cnn:
            # fastai's head, and no weight gradients for the frozen body's convolutions
            per_image = fastai_impl().create_cnn_flops_per_image(cfg)
        else:
            per_image = flops_mod.resnet_train_flops_per_image(spec.model, cfg.image_size, cfg.num_classes)
        metrics.update(flops_per_image=per_image, flops_per_step=per_image * cfg.batch_size,
                       flops_method="torch.utils.flop_counter.FlopCounterMode, forward+backward, meta device"
                                    + (", the create_cnn learner's model as it trains (body frozen)" if create_cnn else ""))
    except Exception as exc:  # a counting failure must not cost the measurement
        per_image = None
        notes.append(f"FLOP count failed ({exc.__class__.__name__}: {exc}); achieved_tflops not reported")

    if spec.engine == "torch" or spec.params.get("find_max_batch"):
        dev_data = device_data(arrays, device)
    else:
        # the fastai engine keeps its data on the host: drop the torch engine's device
        # copy so it neither counts in this cell's peak memory nor takes its room
        dev_data = None
        _device_cache.clear()
        batch_search.free_device_memory()

    progress = (lambda done, total: ctx.progress(done, total, f"{spec.model} {spec.precision} {spec.engine}"))
    profile: dict = {}  # the profiled window's, after the timed repeats (filled where ctx asks for one)
    try:
        repeats = _measure(spec, cfg, arrays, dev_data, ctx, progress, metrics, notes, device, profile)
    except Exception as exc:
        if curve_batch(spec.params) is None or not batch_search.is_oom(exc):
            raise
        # a batch curve's point that does not fit is an answer, not a failure: the curve goes on
        exc.__traceback__ = None  # its frames hold the failed try's tensors
        del exc
        _device_cache.clear()
        batch_search.free_device_memory()
        return out_of_memory(spec, cfg.batch_size)
    result = _result(spec, cfg, arrays, ctx, repeats, metrics, notes, per_image, create_cnn, dev_data, device)
    result.profile = step_profile.with_timed_step(profile, result.repeats)
    return result


def out_of_memory(spec: CellSpec, batch_size: int) -> CellResult:
    """A batch-curve point that ran out of device memory: recorded, not failed."""
    return CellResult.skipped(spec, f"out of memory at batch {batch_size}", throughput_unit="images",
                              metrics={"out_of_memory": True})


def _measure(spec: CellSpec, cfg: TrainConfig, arrays: Any, dev_data: Any, ctx: CellContext, progress: Any,
             metrics: dict, notes: list, device: str, profile: dict) -> list:
    """The engine's repeats (with the notes they add), then its profiled window into ``profile``
    where ctx asks for one."""
    if spec.engine == "torch":
        repeats, compile_notes = torch_engine.run_repeats(cfg, dev_data, ctx, ctx.repeats, progress, metrics,
                                                          profile=profile)
        notes.extend(compile_notes)
        if metrics.get("untimed_warmup_steps"):
            notes.append(f"untimed warm-up before the first repeat: {metrics['untimed_warmup_steps']} steps in "
                         f"{metrics['untimed_warmup_s']:.1f} s (cuDNN autotuning, kernel loading, compilation or "
                         "graph capture); no repeat's time includes it")
        notes.append("data_wait_s = on-device augmentation (one crop+flip gather per epoch); "
                     "normalisation and upsampling run inside each step and count in compute_s")
        if device.startswith("cuda"):
            notes.append("peak_memory_bytes includes the uint8 data set resident on the device")
    else:
        impl, after_last = fastai_impl(), None
        if ctx.profile_steps and impl is fastai_engine:
            def after_last(learn: Any) -> None:
                profile.update(fastai_window.profile_fit(learn, cfg, ctx.profile_steps))
        elif ctx.profile_steps:
            profile.update(step_profile.unavailable("the fastai v1 engine runs no profiled window"))
        repeats = impl.run_repeats(cfg, arrays, ctx, ctx.repeats, progress, cfg.num_workers, after_last=after_last)
        notes.append("data_wait_s = host time between batches (DataLoader, host-to-device copy, batch transforms), "
                     "read without device synchronisation; epoch_seconds time the training phase only")
        if not cfg.evaluate:
            notes.append("throughput mode: fastai validates on one test batch per epoch (outside epoch_seconds)")
    return repeats


def _result(spec: CellSpec, cfg: TrainConfig, arrays: Any, ctx: CellContext, repeats: list, metrics: dict,
            notes: list, per_image: Any, create_cnn: bool, dev_data: Any, device: str) -> CellResult:
    """The cell's result from its repeats (after the batch search, where asked for)."""
    # after the measurement, never before it: the search's eager steps run without
    # cuDNN autotuning, and cuDNN keeps the plans they chose for those shapes (batch
    # 256 among them) for the rest of the process; a timed run after them reused the
    # untuned plans (strict fp32 ResNet-18 on an H200: 26,850 instead of 54,200 images/s)
    if spec.params.get("find_max_batch"):
        if device.startswith("cuda"):
            metrics.update(max_batch_search(cfg, dev_data, len(arrays.train_x), ctx, notes))
        else:
            notes.append("find_max_batch skipped: the batch search measures device memory and runs on CUDA only")

    precision_desc = None
    for rec in repeats:
        precision_desc = rec.pop("precision", precision_desc)
        rec["achieved_tflops"] = flops_mod.achieved_tflops(per_image, rec.get("throughput_items_per_s"))
    metrics["precision"] = precision_desc
    if not device.startswith("cuda"):
        notes.append("peak_memory_bytes is not measured on the CPU")
    if any(r.get("throughput_items_per_s") is None for r in repeats):
        notes.append("no steady-state steps after warm-up in some repeat: throughput not reported (run more --steps)")

    params = dict(spec.params)
    if spec.engine == "fastai":
        params["learner"] = cfg.learner  # every fastai cell names its learner, planned with it or not
        if create_cnn and "max_batch" in metrics:
            notes.append("max_batch: the search trains the torch engine's plain ResNet (every layer, SGD), not this "
                         "cell's create_cnn learner (body frozen, fastai's head, Adam)")
    return CellResult(
        spec.workload, spec.model, spec.precision, spec.engine, "ok",
        params=params,
        throughput_unit="images",
        repeats=repeats,
        summary=summarise_repeats(repeats),
        metrics=metrics,
        data=provenance(arrays, ctx),
        notes=notes,
        method=method(spec, cfg, repeats, metrics, notes),
    )


def method(spec: CellSpec, cfg: TrainConfig, repeats: list, metrics: dict, notes: list) -> dict:
    """How the cell was measured, as it ran (kit.results.method): the engine's revision, the step
    mode each repeat used, the optimizer's implementation, loss scaling, the data path, warm-up and
    what was timed."""
    desc = metrics.get("precision") or {}
    timed = repeats[0].get("steps") if repeats else None
    common = {"excluded_steps": methods.warmup_excluded(repeats), "timed_steps": timed,
              "batch_size": cfg.batch_size, "image_size": cfg.image_size}
    if spec.engine == "torch":
        modes = sorted({str(r.get("compile_mode")) for r in repeats}) or ["none"]
        optimizer = str(desc.get("optimizer", ""))
        fallbacks = [n for n in notes if " failed, fell back to " in n]
        inductor = ("used" if any(m == "cuda-graph-inductor" or m in ("reduce-overhead", "default") for m in modes)
                    else f"fell back: {fallbacks[0]}" if fallbacks else f"off (--compile {cfg.compile})")
        return methods.record("cifar/torch", {
            "step": "+".join(modes),
            "optimizer": ("fused" if "fused" in optimizer else "foreach" if "foreach" in optimizer
                          else "torch.optim.SGD"),
            "loss_scale": methods.loss_scale(spec.precision, on_device="on the device" in str(desc.get("loss_scale"))),
            "data": "device-resident uint8, one augmentation gather per epoch",
            "untimed_warmup_steps": metrics.get("untimed_warmup_steps", 0),
            **common,
        }, {"inductor": inductor})
    workers = [r.get("num_workers") for r in repeats if r.get("num_workers") is not None]
    v1 = fastai_impl() is not fastai_engine
    return methods.record("cifar/fastai-v1" if v1 else "cifar/fastai", {
        "step": "fastai Learner.fit_one_cycle",
        "learner": cfg.learner,
        "optimizer": "fastai Adam",
        "loss_scale": methods.loss_scale(spec.precision) if spec.precision != "fp16-master" else (
            "dynamic" if cfg.dynamic_loss_scale else f"static {cfg.static_loss_scale:g}"),
        "data": ("CPU loader, the kit's default workers (all cores up to 16 on a GPU, none on the CPU)" if cfg.num_workers is None
                 else f"CPU loader, {cfg.num_workers} workers"),
        **common,
    }, {"workers": workers[0] if workers else None})
