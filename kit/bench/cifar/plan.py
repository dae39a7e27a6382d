"""The CIFAR suite's cells and their cost, torch-free (the runner plans on the host).

Defaults (what ``kit run --suite cifar`` measures without narrowing options) are documented in
docs/running.md ("What is measured").
"""

from __future__ import annotations

from kit.bench.cifar.options import CifarOptions
from kit.errors import UsageError
from kit.facts import models as model_facts
from kit.results import precisions as precision_modes
from kit.results.cell_ids import CURVE_PARAM
from kit.results.schema import CellSpec, RunConfig

#: the ResNets fastai v1 supports (torchvision's architectures), in the views' order
MODELS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")
#: ``torch``: GPU-bound PyTorch; ``fastai``: what a fastai user runs
ENGINES = ("torch", "fastai")
#: steps per epoch in throughput mode (an epoch of CIFAR-100 at batch 256 is 196 steps)
DEFAULT_STEPS = 100
DEFAULT_BATCH = 256
#: on the CPU (a check, not a benchmark) a smaller batch keeps a run to about a minute
DEFAULT_BATCH_CPU = 32
#: steps of an epoch of CIFAR-100's 50,000 training images at the default batch, for the estimate
FULL_EPOCH_STEPS = 196


def own(config: RunConfig) -> CifarOptions:
    """The run's CIFAR options (kit.bench.cifar.options)."""
    return config.options_of("cifar")


def params(config: RunConfig) -> dict:
    throughput = config.mode == "throughput"
    opts = own(config)
    return {
        "batch_size": config.per_rank_batch() or (DEFAULT_BATCH_CPU if config.device == "cpu" else DEFAULT_BATCH),
        "image_size": opts.image_size,
        "epochs": opts.epochs or (1 if throughput else 10),
        # None = full epochs (convergence); throughput mode caps steps per epoch
        "steps": config.steps if config.steps is not None else (DEFAULT_STEPS if throughput else None),
        "compile": config.compile,
        "find_max_batch": opts.find_max_batch,
        "tolerance": config.tolerance,
        # fastai's fp16-master: the article's static 512 unless --dynamic-loss-scale (or another
        # --static-loss-scale) was given; recorded only when given, so default cells keep their params
        **{k: getattr(opts, k) for k in ("static_loss_scale", "dynamic_loss_scale") if getattr(opts, k) is not None},
        **config.data_parallel_params(),
    }


def curve_points(config: RunConfig) -> list:
    """The params each cell adds per batch size: nothing without ``--batch-sizes`` (one cell, the
    ids runs always had); with it, one cell per batch size, smallest first, each with its
    ``batch_size`` and the whole curve (kit.results.cell_ids.CURVE_PARAM), so its id ends in its
    batch (``cifar/resnet18/fp32/torch/bs512``) and every point is a cell of its own: its own
    telemetry (images per joule), journal entry, resume and out-of-memory."""
    if not own(config).batch_sizes:
        return [{}]
    sizes = sorted(own(config).batch_sizes)
    return [{"batch_size": b, CURVE_PARAM: list(sizes)} for b in sizes]


def cells(config: RunConfig) -> list:
    """Every model x engine x precision (x batch of a curve) the config asks for; a UsageError (exit 2)
    for settings that cannot go together."""
    opts = own(config)
    if opts.find_max_batch and config.gpus is not None:
        raise UsageError("--find-max-batch measures one GPU; it cannot be combined with --gpus.",
                         remedy="Run the batch search without --gpus.")
    precisions = config.precisions or precision_modes.defaults("cifar")
    engines = [e for e in config.engines if e in ENGINES] or list(ENGINES)
    common = params(config)
    out = []
    for model in opts.models or list(MODELS):
        for engine in engines:
            # the learner is a fastai setting: only the fastai cells record it (the torch engine has none)
            learner = {"learner": opts.learner} if engine == "fastai" else {}
            for precision in precisions:
                for point in curve_points(config):
                    out.append(CellSpec("cifar", model, precision, engine, {**common, **learner, **point}))
    return out


def work(spec: CellSpec, mode: str) -> float:
    """One repeat's training FLOPs (kit.facts.models' per-image count x images)."""
    p = spec.params
    per_image = model_facts.train_flops_per_image(spec.model, p.get("image_size", 32))
    steps = (p.get("steps") or FULL_EPOCH_STEPS) * (p.get("epochs") or 1)
    return per_image * p.get("batch_size", DEFAULT_BATCH) * steps


def needs(spec: CellSpec) -> tuple:
    """torchvision's ResNets for every cell; fastai for the fastai engine's."""
    return ("torchvision", "fastai") if spec.engine == "fastai" else ("torchvision",)
