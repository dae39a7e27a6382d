"""The results model: one versioned schema for runs, cells and repeats.

A *cell* is one workload x model x precision x engine; it is measured
``repeats`` times. Field names carry their units (``_s``, ``_bytes``,
``_items_per_s``, ``_j``, ``_w``); ``throughput_unit`` says what an item is
(images or tokens).

``results.json`` (written atomically at the end of a run, and also after each
cell so an interrupted run still has one)::

    {schema_version, kit_version, run_id, status, started_at, finished_at,
     config: RunConfig, environment: {...}, cells: [CellResult, ...]}

Bump :data:`SCHEMA_VERSION` on any incompatible change; :func:`check_version`
turns a mismatch into a clear message.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from kit import __version__
from kit.errors import SchemaError, UsageError

SCHEMA_VERSION = 1

Workload = str  # one of: cifar, lstm (no typing.Literal: the cuda10 image runs this on Python 3.7)
Precision = str  # one of: fp32, tf32, amp-fp16, amp-bf16, fp16-master, apex-o1, apex-o2
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-master", "apex-o1", "apex-o2")
CIFAR_MODELS: tuple[str, ...] = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")
CIFAR_ENGINES: tuple[str, ...] = ("torch", "fastai")
LSTM_PRESETS: tuple[str, ...] = ("apex-2018", "tensor-core")
LSTM_ENGINES: tuple[str, ...] = ("kit",)
CellStatus = str  # one of: ok, skipped, failed, interrupted
RunStatus = str  # one of: running, complete, interrupted, failed


def cell_id(workload: str, model: str, precision: str, engine: str) -> str:
    return f"{workload}/{model}/{precision}/{engine}"


@dataclass
class CellSpec:
    """What to measure in one cell. ``params`` holds the workload's knobs
    (batch_size, image_size, epochs, steps, preset values...)."""

    workload: str
    model: str
    precision: str
    engine: str
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.workload not in ("cifar", "lstm"):
            raise UsageError(f"unknown workload {self.workload!r}; choose cifar or lstm")
        if self.precision not in PRECISIONS:
            raise UsageError(f"unknown precision {self.precision!r}; choose from {', '.join(PRECISIONS)}")

    @property
    def cell_id(self) -> str:
        return cell_id(self.workload, self.model, self.precision, self.engine)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class CellResult:
    """The outcome of one cell: its spec, status, per-repeat records and summary.

    ``repeats`` is a list of dicts, one per repeat, with (where measurable):
    ``epoch_seconds`` (list, one per epoch), ``epoch_seconds_median``,
    ``throughput_items_per_s`` (steady state: warm-up/compile steps excluded),
    ``time_to_first_step_s``, ``data_wait_s``, ``compute_s``,
    ``peak_memory_bytes``, ``overflow_steps``, ``nan_losses``, ``final_loss``,
    ``final_metric`` and ``metrics`` (per-epoch accuracy or perplexity).
    ``summary`` maps each scalar metric to Stats (n, median, mean, min, max,
    stdev, cv). ``telemetry`` holds the NVML summary, or a dict with
    ``available: false`` and the reason.
    """

    workload: str
    model: str
    precision: str
    engine: str
    status: str
    params: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    throughput_unit: str = "items"
    repeats: list[dict] = field(default_factory=list)
    summary: dict[str, dict] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    telemetry: dict[str, Any] | None = None
    data: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    started_at: float | None = None
    finished_at: float | None = None

    @property
    def cell_id(self) -> str:
        return cell_id(self.workload, self.model, self.precision, self.engine)

    @classmethod
    def skipped(cls, spec: CellSpec, reason: str, **kw: Any) -> "CellResult":
        return cls(spec.workload, spec.model, spec.precision, spec.engine, "skipped", params=spec.params, reason=reason, **kw)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cell_id"] = self.cell_id
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CellResult":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class RunConfig:
    """Everything that defines a run, as given on the command line."""

    suite: str = "cifar"  # cifar | lstm | all
    mode: str = "throughput"  # throughput | convergence
    device: str = "auto"
    data: str = "real"  # real | synthetic
    data_dir: str = "data"
    models: list[str] = field(default_factory=list)
    precisions: list[str] = field(default_factory=list)
    engines: list[str] = field(default_factory=list)
    presets: list[str] = field(default_factory=list)
    epochs: int | None = None
    steps: int | None = None
    max_batches: int | None = None
    batch_size: int | None = None
    image_size: int = 32
    repeats: int = 3
    seed: int = 0
    find_max_batch: bool = False
    compile: str = "auto"  # auto | on | off (torch engine)
    lstm: dict[str, Any] = field(default_factory=dict)  # preset overrides
    tolerance: float | None = None
    command_line: list[str] = field(default_factory=list)
    #: which cells run in a process of their own (kit.runner.isolate): apex | all | none
    isolate: str = "apex"

    def __post_init__(self) -> None:
        if self.suite not in ("cifar", "lstm", "all"):
            raise UsageError(f"unknown suite {self.suite!r}; choose cifar, lstm or all")
        if self.mode not in ("throughput", "convergence"):
            raise UsageError(f"unknown mode {self.mode!r}; choose throughput or convergence")
        if self.data not in ("real", "synthetic"):
            raise UsageError(f"unknown data source {self.data!r}; choose real or synthetic")
        if self.mode == "convergence" and self.data == "synthetic":
            raise UsageError("--mode convergence needs real data: accuracy on synthetic data means nothing")
        if self.repeats < 1:
            raise UsageError("--repeats must be at least 1")
        for name in ("epochs", "steps", "max_batches", "batch_size"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
        if self.isolate not in ("apex", "all", "none"):
            raise UsageError(f"unknown --isolate {self.isolate!r}; choose apex, all or none")
        if self.image_size not in (32, 64, 128, 224):
            raise UsageError("--image-size must be 32, 64, 128 or 224")
        for p in self.precisions:
            if p not in PRECISIONS:
                raise UsageError(f"unknown precision {p!r}; choose from {', '.join(PRECISIONS)}")
        for m in self.models:
            if m not in CIFAR_MODELS:
                raise UsageError(f"unknown model {m!r}; choose from {', '.join(CIFAR_MODELS)}")
        for e in self.engines:
            if e not in CIFAR_ENGINES:
                raise UsageError(f"unknown engine {e!r}; choose from {', '.join(CIFAR_ENGINES)}")
        for p in self.presets:
            if p not in LSTM_PRESETS:
                raise UsageError(f"unknown LSTM preset {p!r}; choose from {', '.join(LSTM_PRESETS)}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class RunResults:
    run_id: str
    config: RunConfig
    environment: dict[str, Any] = field(default_factory=dict)
    cells: list[CellResult] = field(default_factory=list)
    status: str = "running"
    #: ratios and verdicts computed from the cells (kit.results.derive)
    derived: dict[str, Any] = field(default_factory=dict)
    started_at: float | None = None
    finished_at: float | None = None
    schema_version: int = SCHEMA_VERSION
    kit_version: str = __version__

    def to_dict(self) -> dict:
        return {
            "schema_version": self.schema_version,
            "kit_version": self.kit_version,
            "run_id": self.run_id,
            "status": self.status,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "config": self.config.to_dict(),
            "environment": self.environment,
            "cells": [c.to_dict() for c in self.cells],
            "derived": self.derived,
        }

    @classmethod
    def from_dict(cls, d: Any, source: str = "results") -> "RunResults":
        if not isinstance(d, dict):
            raise SchemaError(f"{source}: expected a JSON object at the top level")
        check_version(d.get("schema_version"), source)
        try:
            return cls(
                run_id=d["run_id"],
                config=RunConfig.from_dict(d.get("config") or {}),
                environment=d.get("environment") or {},
                cells=[CellResult.from_dict(c) for c in d.get("cells") or []],
                status=d.get("status", "complete"),
                derived=d.get("derived") or {},
                started_at=d.get("started_at"),
                finished_at=d.get("finished_at"),
                schema_version=d["schema_version"],
                kit_version=d.get("kit_version", "unknown"),
            )
        except (KeyError, TypeError) as exc:
            raise SchemaError(f"{source}: malformed results ({exc.__class__.__name__}: {exc})") from None


def check_version(version: Any, source: str = "results") -> None:
    if version == SCHEMA_VERSION:
        return
    if not isinstance(version, int):
        raise SchemaError(f"{source}: no valid schema_version (found {version!r}); this is not a kit results file")
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"{source} uses results schema v{version}, newer than this kit understands (v{SCHEMA_VERSION}).",
            remedy="Upgrade the kit (pip install -U mpkit) to read it.",
        )
    raise SchemaError(
        f"{source} uses results schema v{version}, older than this kit's v{SCHEMA_VERSION}.",
        remedy=f"Read it with a kit release that writes schema v{version}, or re-run the benchmark.",
    )


def load_results(path: str | Path) -> RunResults:
    path = Path(path)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SchemaError(f"{path}: no such results file") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{path}: not valid JSON ({exc})") from None
    return RunResults.from_dict(d, source=str(path))
