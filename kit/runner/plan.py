"""Turn a RunConfig into the list of cells to measure, and estimate the time.

Defaults (what ``make run`` / ``kit run`` with no narrowing options measure)
are defined here and documented in the README.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.facts import models as model_facts
from kit.results.schema import (
    CIFAR_ENGINES,
    CIFAR_MODELS,
    LSTM_PRESETS,
    CellSpec,
    RunConfig,
)

DEFAULT_CIFAR_PRECISIONS = ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-master", "apex-o1", "apex-o2"]
DEFAULT_LSTM_PRECISIONS = ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-master", "apex-o1", "apex-o2"]
#: steps per epoch in throughput mode (an epoch of CIFAR-100 at batch 256 is 196 steps)
DEFAULT_CIFAR_STEPS = 100
DEFAULT_CIFAR_BATCH = 256
#: the data sets each suite reads (names as in kit.facts.datasets)
SUITE_DATASETS = {"cifar": ["cifar100"], "lstm": ["wikitext2"], "all": ["cifar100", "wikitext2"]}
DEFAULT_CIFAR_BATCH_CPU = 32


@dataclass
class Plan:
    config: RunConfig
    cells: list[CellSpec]

    @property
    def cell_ids(self) -> list[str]:
        return [c.cell_id for c in self.cells]


def cifar_params(config: RunConfig) -> dict:
    throughput = config.mode == "throughput"
    return {
        # on the CPU (a check, not a benchmark) a smaller batch keeps a run to about a minute
        "batch_size": config.batch_size or (DEFAULT_CIFAR_BATCH_CPU if config.device == "cpu" else DEFAULT_CIFAR_BATCH),
        "image_size": config.image_size,
        "epochs": config.epochs or (1 if throughput else 10),
        # None = full epochs (convergence); throughput mode caps steps per epoch
        "steps": config.steps if config.steps is not None else (DEFAULT_CIFAR_STEPS if throughput else None),
        "compile": config.compile,
        "find_max_batch": config.find_max_batch,
        "tolerance": config.tolerance,
    }


def lstm_params(config: RunConfig, preset: str) -> dict:
    params = {"preset": preset, "epochs": config.epochs, "max_batches": config.max_batches}
    if config.batch_size:
        params["batch_size"] = config.batch_size
    params.update({k: v for k, v in (config.lstm or {}).items() if v is not None})
    params["tolerance"] = config.tolerance
    return params


def build_plan(config: RunConfig) -> Plan:
    cells: list[CellSpec] = []
    if config.suite in ("cifar", "all"):
        models = config.models or list(CIFAR_MODELS)
        precisions = config.precisions or DEFAULT_CIFAR_PRECISIONS
        engines = config.engines or list(CIFAR_ENGINES)
        params = cifar_params(config)
        for model in models:
            for engine in engines:
                for precision in precisions:
                    cells.append(CellSpec("cifar", model, precision, engine, dict(params)))
    if config.suite in ("lstm", "all"):
        presets = config.presets or list(LSTM_PRESETS)
        precisions = config.precisions or DEFAULT_LSTM_PRECISIONS
        for preset in presets:
            for precision in precisions:
                cells.append(CellSpec("lstm", preset, precision, "kit", lstm_params(config, preset)))
    return Plan(config, cells)


def estimate_seconds(spec: CellSpec, repeats: int, tflops: float, mode: str = "throughput") -> float:
    """A rough wall-time guess for the plan printout (never reported as a result).

    Uses the model's forward FLOPs (kit.facts.models) x3 for training, at
    ``tflops`` effective rate, plus a fixed warm-up allowance per repeat.
    """
    if spec.workload == "cifar":
        p = spec.params
        per_image = model_facts.train_flops_per_image(spec.model, p.get("image_size", 32))
        steps = (p.get("steps") or 196) * (p.get("epochs") or 1)
        work = per_image * p.get("batch_size", 256) * steps
        warmup = 20.0 if p.get("compile") != "off" and spec.engine == "torch" else 3.0
    else:
        from kit.bench.lstm.config import resolve  # torch-free; owns the mode's default epochs

        work = model_facts.lstm_train_flops(resolve(spec.params, mode).to_dict())
        warmup = 3.0
    return repeats * (work / (tflops * 1e12) + warmup)
