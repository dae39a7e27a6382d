"""Turn a RunConfig into the list of cells to measure, and estimate the time.

Defaults (what ``make run`` / ``kit run`` with no narrowing options measure)
are defined here and documented in docs/running.md ("What is measured").
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kit.facts import estimates as estimate_facts
from kit.facts import models as model_facts
from kit.results import precisions as precision_modes
from kit.results.cell_ids import CURVE_PARAM
from kit.results.schema import CellSpec, RunConfig
from kit.results.schema_names import CIFAR_ENGINES, CIFAR_MODELS, LSTM_ENGINES, LSTM_PRESETS

#: steps per epoch in throughput mode (an epoch of CIFAR-100 at batch 256 is 196 steps)
DEFAULT_CIFAR_STEPS = 100
DEFAULT_CIFAR_BATCH = 256
#: the data sets each suite reads (names as in kit.facts.datasets)
SUITE_DATASETS = {"cifar": ["cifar100"], "lstm": ["wikitext2"], "gpt": ["wikitext2"], "all": ["cifar100", "wikitext2"]}
DEFAULT_CIFAR_BATCH_CPU = 32


def dataset_splits(config: RunConfig, dataset: str) -> tuple | None:
    """The splits of ``dataset`` the run reads, where fewer than all (None: all): a GPT run that
    trains on WikiText-2's valid split (``--train-split valid``) reads valid and test only."""
    if dataset != "wikitext2" or config.suite not in ("gpt", "lstm"):
        return None
    if config.suite == "lstm":
        from kit.bench.lstm.config import splits_read as lstm_splits  # torch-free

        return lstm_splits((config.lstm or {}).get("train_split"))
    from kit.bench.gpt.config import splits_read  # torch-free

    return splits_read((config.gpt or {}).get("train_split"))


@dataclass
class Plan:
    config: RunConfig
    cells: list[CellSpec]

    @property
    def cell_ids(self) -> list[str]:
        return [c.cell_id for c in self.cells]


def per_rank_batch(config: RunConfig) -> int | None:
    """--batch-size, or a data-parallel run's --global-batch-size split over its ranks."""
    if config.gpus and config.global_batch_size:
        return config.global_batch_size // config.gpus
    return config.batch_size


def data_parallel_params(config: RunConfig) -> dict:
    """What a data-parallel cell adds to its params (nothing for a plain cell): the world size,
    and the global batch when the user fixed it (else the batch per GPU is fixed: weak scaling)."""
    if not config.gpus:
        return {}
    out: dict = {"world_size": config.gpus}
    if config.global_batch_size:
        out["global_batch_size"] = config.global_batch_size
    if config.scaling:
        out["scaling_baseline"] = True
    return out


def cifar_params(config: RunConfig) -> dict:
    throughput = config.mode == "throughput"
    return {
        # on the CPU (a check, not a benchmark) a smaller batch keeps a run to about a minute
        "batch_size": per_rank_batch(config) or (DEFAULT_CIFAR_BATCH_CPU if config.device == "cpu" else DEFAULT_CIFAR_BATCH),
        "image_size": config.image_size,
        "epochs": config.epochs or (1 if throughput else 10),
        # None = full epochs (convergence); throughput mode caps steps per epoch
        "steps": config.steps if config.steps is not None else (DEFAULT_CIFAR_STEPS if throughput else None),
        "compile": config.compile,
        "find_max_batch": config.find_max_batch,
        "tolerance": config.tolerance,
        # fastai's fp16-master: the article's static 512 unless --dynamic-loss-scale (or another
        # --static-loss-scale) was given; recorded only when given, so default cells keep their params
        **{k: v for k, v in (config.lstm or {}).items() if k in ("static_loss_scale", "dynamic_loss_scale") and v is not None},
        **data_parallel_params(config),
    }


def curve_points(config: RunConfig) -> list[dict]:
    """The params each CIFAR cell adds per batch size: nothing without ``--batch-sizes`` (one
    cell, the ids runs always had); with it, one cell per batch size, smallest first, each
    with its ``batch_size`` and the whole curve (kit.results.cell_ids.CURVE_PARAM), so its id
    ends in its batch (``cifar/resnet18/fp32/torch/bs512``) and every point is a cell of its
    own: its own telemetry (images per joule), journal entry, resume and out-of-memory."""
    if not config.batch_sizes:
        return [{}]
    sizes = sorted(config.batch_sizes)
    return [{"batch_size": b, CURVE_PARAM: list(sizes)} for b in sizes]


def lstm_engines(config: RunConfig) -> list[str]:
    """The LSTM engines a run measures: those of ``--engines``; by default the faithful ``kit`` and, on a
    GPU, ``graphed`` (on the CPU it would run the same step eagerly: nothing of its own to measure)."""
    chosen = [e for e in config.engines if e in LSTM_ENGINES]
    if chosen:
        return chosen
    return list(LSTM_ENGINES) if device_kind(config.device) == "cuda" else ["kit"]


def lstm_params(config: RunConfig, preset: str) -> dict:
    params = {"preset": preset, "epochs": config.epochs, "max_batches": config.max_batches}
    if per_rank_batch(config):
        params["batch_size"] = per_rank_batch(config)
    params.update({k: v for k, v in (config.lstm or {}).items() if v is not None})
    params["tolerance"] = config.tolerance
    params.update(data_parallel_params(config))
    return params


def gpt_params(config: RunConfig, preset: str) -> dict:
    """A GPT cell's knobs: the preset, what the user overrode (--steps, --batch-size,
    --seq-len, --d-model, --n-layers, --n-heads), --compile and the parity tolerance."""
    params = {"preset": preset, "steps": config.steps, "batch_size": per_rank_batch(config),
              "compile": config.compile, "tolerance": config.tolerance}
    params.update({k: v for k, v in (config.gpt or {}).items() if v is not None})
    params.update(data_parallel_params(config))
    return params


def build_plan(config: RunConfig) -> Plan:
    cells: list[CellSpec] = []
    if config.suite in ("cifar", "all"):
        models = config.models or list(CIFAR_MODELS)
        precisions = config.precisions or precision_modes.defaults("cifar")
        engines = [e for e in config.engines if e in CIFAR_ENGINES] or list(CIFAR_ENGINES)
        params = cifar_params(config)
        for model in models:
            for engine in engines:
                # the learner is a fastai setting: only the fastai cells record it (the torch engine has none)
                learner = {"learner": config.learner} if engine == "fastai" else {}
                for precision in precisions:
                    for point in curve_points(config):
                        cells.append(CellSpec("cifar", model, precision, engine, {**params, **learner, **point}))
    if config.suite in ("lstm", "all"):
        presets = config.presets or list(LSTM_PRESETS)
        precisions = config.precisions or precision_modes.defaults("lstm")
        for preset in presets:
            for engine in lstm_engines(config):
                for precision in precisions:
                    cells.append(CellSpec("lstm", preset, precision, engine, lstm_params(config, preset)))
    if config.suite == "gpt":  # not in "all": heavy, and it needs a recent GPU to mean anything
        presets = config.gpt_presets or list(model_facts.GPT_DEFAULT_PRESETS)
        precisions = config.precisions or precision_modes.defaults("gpt")
        for preset in presets:
            for precision in precisions:
                cells.append(CellSpec("gpt", preset, precision, "kit", gpt_params(config, preset)))
    return Plan(config, cells)


def planned_cell_ids(config: RunConfig) -> list[str]:
    """The cell ids ``config`` plans today (for kit bundle merge: did other runs finish a run cut short?)."""
    return build_plan(config).cell_ids


def device_kind(device: str) -> str:
    """'cuda' or 'cpu': which of kit.facts.estimates' rates a plan for ``device`` uses.
    'auto' becomes 'cuda' where an NVIDIA driver is loaded (as torch's CUDA check
    needs), else 'cpu'; torch is not imported for a guess."""
    if device.startswith("cuda"):
        return "cuda"
    if device == "auto":
        return "cuda" if os.path.exists("/proc/driver/nvidia/version") else "cpu"
    return "cpu"


def estimate_source(kind: str) -> str:
    """Where the estimate's rates come from, for the plan's printout."""
    return estimate_facts.SOURCES[kind]


def runs_on_cpu(precision: str) -> bool:
    """Whether a cell of ``precision`` trains on this host's CPU (the plan's estimate counts
    the others at kit.facts.estimates.SKIPPED_CELL_S). Never imports torch."""
    # the modes that train on a CPU (kit.results.precisions: on_cpu; every other one is skipped in a
    # fraction of a second); amp-bf16 only on a CPU with bf16 instructions, else it is skipped too
    if not precision_modes.mode(precision).on_cpu:
        return False
    if precision_modes.mode(precision).autocast == "bfloat16":
        from kit.env.record import cpu_has_native_bf16

        return cpu_has_native_bf16() is not False
    return True


def estimate_plan_seconds(plan: Plan, todo: "list[CellSpec] | None" = None) -> float:
    """The plan's rough estimate (``kit run``'s printout): the sum of :func:`estimate_seconds`
    over the cells still to run (``todo``, default all) on the plan's device kind."""
    kind = device_kind(plan.config.device)
    cells = plan.cells if todo is None else todo
    return sum(estimate_seconds(c, plan.config.repeats, mode=plan.config.mode, device=kind) for c in cells)


def estimate_seconds(spec: CellSpec, repeats: int, tflops: float | None = None, mode: str = "throughput",
                     device: str = "cuda") -> float:
    """A rough wall-time guess for the plan printout and the progress ETA's weights
    (never reported as a result).

    A fixed cost per cell plus the model's training FLOPs (kit.facts.models) over the
    repeats at the effective rate of kit.facts.estimates for the device kind
    (``device``: 'cuda' or 'cpu', see :func:`device_kind`) and engine; ``tflops``
    replaces that rate. On the CPU a precision it cannot run (:func:`runs_on_cpu`) costs only
    kit.facts.estimates.SKIPPED_CELL_S.
    """
    if device == "cpu" and not runs_on_cpu(spec.precision):
        return estimate_facts.SKIPPED_CELL_S
    if spec.workload == "cifar":
        p = spec.params
        per_image = model_facts.train_flops_per_image(spec.model, p.get("image_size", 32))
        steps = (p.get("steps") or 196) * (p.get("epochs") or 1)
        work = per_image * p.get("batch_size", 256) * steps
    elif spec.workload == "gpt":
        from kit.bench.gpt.config import resolve as resolve_gpt  # torch-free

        g = resolve_gpt(spec.params, mode)
        per_token = model_facts.gpt_train_flops_per_token(g.d_model, g.n_layers, g.seq_len, model_facts.WIKITEXT2_VOCAB)
        steps = g.steps + (0 if mode == "convergence" else g.warmup_steps)
        work = per_token * g.batch_size * g.seq_len * steps
    else:
        from kit.bench.lstm.config import resolve  # torch-free; owns the mode's default epochs

        params = resolve(spec.params, mode).to_dict()
        work = model_facts.lstm_train_flops(params) + model_facts.lstm_eval_flops(params)
    rate = estimate_facts.rate(device, spec.workload, spec.engine)
    return rate.cell_s + repeats * work / ((tflops or rate.tflops) * 1e12)
