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

The names a run may use live in :mod:`kit.results.schema_names`, cell ids in
:mod:`kit.results.cell_ids`, the type rules in :mod:`kit.results.schema_rules`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from kit import __version__
from kit.errors import NEWER_KIT_REMEDY, SchemaError, UsageError
from kit.results.cell_ids import cell_id, cell_label, cell_learner
from kit.results.precisions import PRECISIONS
from kit.results import suites
from kit.results.ratios import finite_number
from kit.results.option_fields import recorded_before_options, recorded_options, specs_of
from kit.results.schema_rules import (PARAM_INTEGERS, REPEAT_NUMBER_LISTS, REPEAT_NUMBER_OR_LISTS, REPEAT_NUMBERS,
                                      REPEAT_POSITIVE, STATS_NUMBERS, _check_fields, _check_value, _fail,
                                      _field_names, _impossible, _is_number, _kind)

SCHEMA_VERSION = 1


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
        if self.workload not in suites.names():
            raise UsageError(f"unknown workload {self.workload!r}; choose {', '.join(suites.names())}")
        if self.precision not in PRECISIONS:
            raise UsageError(f"unknown precision {self.precision!r}; choose from {', '.join(PRECISIONS)}")

    @property
    def cell_id(self) -> str:
        return cell_id(self.workload, self.model, self.precision, self.engine, self.params)

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
    ``available: false`` and the reason. ``host``: the host's load average and CPU steal
    around the cell (kit.env.hostload), and whether that made it "busy".
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
    #: how busy the host was around the cell (kit.env.hostload: load average, CPU steal, "busy")
    host: dict[str, Any] | None = None
    #: how the cell was measured: engine, its revision, the settings that shaped the figure
    #: (kit.results.method; None: a bundle made before the kit recorded it, "method unknown")
    method: dict[str, Any] | None = None
    #: the profiled window's step, where the engine ran one (kit.results.step_profile makes it,
    #: kit.results.explain reads it; None: not profiled): {"available", "reason" (when not), "steps",
    #: "step_s", "device_s", "idle_s", "busy_s", "device_exceeds_step", "note",
    #: "device_s_by_class": {kit.results.kernel_classes class: seconds}, "largest_kernels": [{"name",
    #: "class", "s", "calls"}], "timed_step_s", "window_wall_s", "window_phases_s", "source"}, seconds
    #: per step (window_wall_s: the whole window; window_phases_s: {"before", "profiler_start", "steps",
    #: "profiler_stop", "read", "after"}, its parts); on a CPU "available" false with "step_s", "host_op_s",
    #: "host_op_s_by_class" and "largest_host_ops" (host time, never device)
    profile: dict[str, Any] | None = None

    @property
    def cell_id(self) -> str:
        return cell_id(self.workload, self.model, self.precision, self.engine, self.params)

    @property
    def label(self) -> str:
        """The id as reports show it, with a fastai cell's learner (:func:`cell_label`)."""
        return cell_label(self.cell_id, cell_learner(self.engine, self.params))

    @classmethod
    def skipped(cls, spec: CellSpec, reason: str, **kw: Any) -> "CellResult":
        return cls(spec.workload, spec.model, spec.precision, spec.engine, "skipped", params=spec.params, reason=reason, **kw)

    def to_dict(self) -> dict:
        d = asdict(self)
        if d["profile"] is None:  # not profiled: the file stays as a kit without profiles wrote it
            del d["profile"]
        d["cell_id"] = self.cell_id
        return d

    @classmethod
    def from_dict(cls, d: Any, source: str = "cell", path: str = "cell") -> "CellResult":
        """A cell from its JSON object; SchemaError naming ``path`` when a field
        is missing or of the wrong type (see :func:`check_cell`)."""
        check_cell(d, source, path)
        return cls._from_checked(d)

    @classmethod
    def _from_checked(cls, d: dict) -> "CellResult":
        """A cell from a JSON object :func:`check_cell` already passed (RunResults.from_dict checks
        every cell with the run, then builds them here: one check per cell, not two)."""
        known = _field_names(cls)
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class RunConfig:
    """Everything that defines a run, as given on the command line: `kit run`'s own options (these
    fields) and, in ``suite_options``, each suite's own (its descriptor's options class)."""

    suite: str = "cifar"  # a suite's name (kit.results.suites) or "all"
    mode: str = "throughput"  # throughput | convergence
    device: str = "auto"
    data: str = "real"  # real | synthetic
    data_dir: str = "data"
    precisions: list[str] = field(default_factory=list)
    engines: list[str] = field(default_factory=list)
    steps: int | None = None
    batch_size: int | None = None
    repeats: int = 3
    seed: int = 0
    compile: str = "auto"  # COMPILE_CHOICES
    tolerance: float | None = None
    command_line: list[str] = field(default_factory=list)
    #: which cells run in a process of their own (kit.runner.isolate): apex | all | none
    isolate: str = "apex"
    #: data-parallel ranks per cell (kit run --gpus N: kit.runner.isolate.run_data_parallel);
    #: None = the plain one-process path
    gpus: int | None = None
    #: data-parallel: the global batch, split evenly over the ranks (None: --batch-size per rank)
    global_batch_size: int | None = None
    #: data-parallel: also measure each cell on one rank, for the scaling efficiency
    scaling: bool = False
    #: after each cell's timed repeats, profile a few of its steps (kit.bench.profile_window) into
    #: CellResult.profile; outside the timed figures and the cell's method. None (the default, until the
    #: run has its device: kit.runner.execute then records what it means there, :meth:`profiles`): on
    #: where the cells run on one GPU, off on the CPU and for data-parallel cells. On an H100 the window
    #: cost the torch and LSTM cells 0.2-0.5% of their wall time and the fastai cells 4.0-6.8%
    #: (references/h100/explain/r8/), under the 10% target
    profile_window: bool | None = None
    #: each suite's own options (its descriptor's ``options`` class, kit.results.suites), by suite
    #: name, for the suites the run measures that have some; :meth:`options_of` reads them. In a
    #: results file, an object per suite (a suite this kit does not have keeps its object as read)
    suite_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in ("throughput", "convergence"):
            raise UsageError(f"unknown mode {self.mode!r}; choose throughput or convergence")
        if self.data not in ("real", "synthetic"):
            raise UsageError(f"unknown data source {self.data!r}; choose real or synthetic")
        if self.mode == "convergence" and self.data == "synthetic":
            raise UsageError("--mode convergence needs real data: accuracy on synthetic data means nothing")
        if self.repeats < 1:
            raise UsageError("--repeats must be at least 1")
        for name in ("steps", "batch_size"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
        self._check_data_parallel()
        if self.isolate not in ("apex", "all", "none"):
            raise UsageError(f"unknown --isolate {self.isolate!r}; choose apex, all or none")
        for p in self.precisions:
            if p not in PRECISIONS:
                raise UsageError(f"unknown precision {p!r}; choose from {', '.join(PRECISIONS)}")
        self._check_suite_options()
        self._check_names()

    def _check_suite_options(self) -> None:
        """Each suite's options pass their checks (kit.results.option_fields: ``check``)."""
        for name, values in self.suite_options.items():
            found = suites.find(name)
            if found is None or found.options is None or not isinstance(values, found.options):
                continue  # a suite this kit does not have: kept as read
            for spec in specs_of(found.options, (name,)):
                if spec.check is not None:
                    spec.check(getattr(values, spec.name), spec.flag)

    def _check_names(self) -> None:
        """The models, engines and presets named are those of a suite (kit.results.suites)."""
        for s in suites.all_suites():
            own = self.options_of(s.name) if s.model_option else None
            for m in (getattr(own, s.model_option, None) or ()) if own is not None else ():
                if m not in s.models:
                    raise UsageError(f"unknown {s.model_kind} {m!r}; choose from {', '.join(s.models)}")
        engines = [(s.name, s.engines) for s in suites.all_suites() if len(s.engines) > 1]
        for e in self.engines:
            if not any(e in own for _, own in engines):
                raise UsageError(f"unknown engine {e!r}; choose from "
                                 + " or ".join(f"{', '.join(own)} ({name})" for name, own in engines))

    def options_of(self, suite: str) -> Any:
        """Suite ``suite``'s own options in this run (its options class; its defaults where the run
        recorded none), or None for a suite that has none or that this kit does not have."""
        found = suites.find(suite)
        if found is None or found.options is None:
            return None
        values = self.suite_options.get(suite)
        return values if isinstance(values, found.options) else found.options()

    @classmethod
    def of(cls, **values: Any) -> "RunConfig":
        """A config from option values by name, as the run's config keeps them (lists split, types
        right): `kit run`'s own to their fields, each suite's to the options of the suites of the run
        that have it (``RunConfig.of(suite="lstm", presets=["tiny"], nhid=12)``); an option no suite of
        the run has is a UsageError. For tests and scripts: `kit run` builds its config from the
        command line (kit.runner.option_checks.config_from_options)."""
        own_names = {f.name for f in fields(cls)}
        core = {k: v for k, v in values.items() if k in own_names}
        rest = {k: v for k, v in values.items() if k not in own_names}
        taken: set = set()
        own = dict(core.pop("suite_options", {}))
        for s in suites.run_by(core.get("suite", "cifar")):
            if s.options is None:
                continue
            names = {spec.name for spec in specs_of(s.options)}
            mine = {k: v for k, v in rest.items() if k in names}
            taken |= set(mine)
            own[s.name] = replace(own.get(s.name) or s.options(), **mine)
        if set(rest) - taken:
            raise UsageError(f"no suite of the run has the option(s) {', '.join(sorted(set(rest) - taken))}")
        return cls(**core, suite_options=own)

    def per_rank_batch(self) -> int | None:
        """--batch-size, or a data-parallel run's --global-batch-size split over its ranks."""
        if self.gpus and self.global_batch_size:
            return self.global_batch_size // self.gpus
        return self.batch_size

    def data_parallel_params(self) -> dict:
        """What a data-parallel cell adds to its params (nothing for a plain cell): the world size,
        and the global batch when the user fixed it (else the batch per GPU is fixed: weak scaling)."""
        if not self.gpus:
            return {}
        out: dict = {"world_size": self.gpus}
        if self.global_batch_size:
            out["global_batch_size"] = self.global_batch_size
        if self.scaling:
            out["scaling_baseline"] = True
        return out

    def _check_data_parallel(self) -> None:
        if self.gpus is not None and self.gpus < 1:
            raise UsageError(f"--gpus {self.gpus}: must be at least 1.")
        if self.gpus is None:
            if self.global_batch_size is not None or self.scaling:
                raise UsageError("--global-batch-size and --scaling apply to data-parallel cells only.",
                                 remedy="Add --gpus N.")
            return
        if self.global_batch_size is not None:
            if self.global_batch_size < 1 or self.global_batch_size % self.gpus:
                raise UsageError(f"--global-batch-size {self.global_batch_size} does not split evenly over --gpus {self.gpus}.",
                                 remedy=f"Use a multiple of {self.gpus}, or --batch-size for the batch per GPU.")

    def to_dict(self) -> dict:
        return asdict(self)

    def profiles(self, device: str) -> bool:
        """Whether this run's cells on ``device`` end with a profiled window: as asked
        (--profile-window, --no-profile-window), else on one GPU only. On the CPU the window can time no
        device, only the host's operators, and CPU runs are the quick checks (the tests, --smoke on a
        laptop) whose cost it was never measured against; data-parallel cells (--gpus) are not profiled
        (kit.bench.profile_window.not_profiled_reason), so by default they do not ask."""
        if self.profile_window is not None:
            return self.profile_window
        return str(device).startswith("cuda") and not (self.gpus or 0) > 1

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        """A config as a results file or journal recorded it: each suite's options from its object
        in ``suite_options``, or, in a file of a kit before suites owned their options, from where
        that kit kept them (a field of the config, or a dict of preset overrides: the option's
        ``recorded_in``); a value of the wrong type is a UsageError naming it."""
        known = {f.name for f in fields(cls)}
        d = dict(d)
        # a run recorded before the option existed profiled no window (a resumed run keeps that)
        d.setdefault("profile_window", False)
        recorded = d.get("suite_options")
        own: dict[str, Any] = dict(recorded) if isinstance(recorded, dict) else {}
        for s in suites.run_by(d.get("suite", "cifar")) if isinstance(d.get("suite", "cifar"), str) else ():
            if s.options is not None:
                values = own.get(s.name, {}) if isinstance(recorded, dict) else recorded_before_options(s.options, d)
                if not isinstance(values, dict):
                    raise UsageError(f"suite_options.{s.name}: expected an object, found {type(values).__name__}")
                own[s.name] = recorded_options(s.options, values, f"suite_options.{s.name}")
        core = {k: v for k, v in d.items() if k in known and k != "suite_options"}
        return cls(**core, suite_options=own)


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
        """Results from their JSON object. Every field is checked for its type
        first (:func:`check_results`), so a malformed file is a SchemaError
        naming the JSON path of the problem, never a crash later on."""
        if not isinstance(d, dict):
            raise SchemaError(f"{source}: expected a JSON object at the top level, found {_kind(d)}")
        check_version(d.get("schema_version"), source)
        check_results(d, source)
        try:
            config = RunConfig.from_dict(d.get("config", {}))
        except UsageError as exc:
            raise SchemaError(f"{source}: malformed results at config: {exc.message}") from None
        return cls(
            run_id=d["run_id"],
            config=config,
            environment=d.get("environment", {}),
            cells=[CellResult._from_checked(c) for c in d.get("cells", [])],  # each checked by check_results above
            status=d.get("status", "complete"),
            derived=d.get("derived", {}),
            started_at=d.get("started_at"),
            finished_at=d.get("finished_at"),
            schema_version=d["schema_version"],
            kit_version=d.get("kit_version", "unknown"),
        )


def check_cell(d: Any, source: str = "cell", path: str = "cell") -> None:
    """SchemaError unless ``d`` is a well-typed cell (its repeats' and summary's numbers included)."""
    _check_fields(CellResult, d, source, path)
    for key in PARAM_INTEGERS:
        v = d.get("params", {}).get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            _fail(source, f"{path}.params.{key}", "an integer or null", v)
    for i, rep in enumerate(d.get("repeats", [])):
        for key in REPEAT_NUMBERS:
            if key in rep and rep[key] is not None and not _is_number(rep[key]):
                _fail(source, f"{path}.repeats[{i}].{key}", "a number or null", rep[key])
        for key in REPEAT_POSITIVE:
            values = rep.get(key)
            items = enumerate(values) if isinstance(values, list) else [(None, values)]
            for j, x in items:
                if _is_number(x) and not (finite_number(x) is not None and x > 0):
                    _impossible(source, f"{path}.repeats[{i}].{key}" + ("" if j is None else f"[{j}]"), d, x)
        for key in REPEAT_NUMBER_LISTS + REPEAT_NUMBER_OR_LISTS:
            v = rep.get(key)
            if key not in rep or (v is None and key in REPEAT_NUMBER_OR_LISTS):
                continue
            if key in REPEAT_NUMBER_OR_LISTS and _is_number(v):
                continue
            if not isinstance(v, list):
                _fail(source, f"{path}.repeats[{i}].{key}", "a list of numbers", v)
            for j, x in enumerate(v):
                if x is not None and not _is_number(x):
                    _fail(source, f"{path}.repeats[{i}].{key}[{j}]", "a number or null", x)
    for metric, stats in d.get("summary", {}).items():
        where = f"{path}.summary.{metric}"
        missing = [k for k in ("n",) + STATS_NUMBERS if k not in stats]
        if missing:
            raise SchemaError(f"{source}: malformed results at {where}: {', '.join(repr(k) for k in missing)} missing")
        if "n" in stats and (not isinstance(stats["n"], int) or isinstance(stats["n"], bool)):
            _fail(source, f"{where}.n", "an integer", stats["n"])
        for key in STATS_NUMBERS:
            if key in stats and stats[key] is not None and not _is_number(stats[key]):
                _fail(source, f"{where}.{key}", "a number or null", stats[key])
            x = stats.get(key)
            if metric in REPEAT_POSITIVE and _is_number(x):
                spread = key in ("stdev", "cv")  # zero for identical repeats
                if finite_number(x) is None or x < 0 or (x == 0 and not spread):
                    _impossible(source, f"{where}.{key}", d, x)


def check_results(d: Any, source: str = "results") -> None:
    """SchemaError naming the JSON path of the first field that is missing or of
    the wrong type anywhere in a results object (run, config, cells, repeats, summaries)."""
    _check_fields(RunResults, d, source, "", may_lack=("config",))
    # RunResults annotates these with dataclass types; they are JSON objects / lists here
    for key, annotation in (("config", "dict[str, Any]"), ("cells", "list[dict]")):
        if key in d:
            _check_value(d[key], annotation, source, key)
    _check_fields(RunConfig, d.get("config", {}), source, "config")
    for i, cell in enumerate(d.get("cells", [])):
        check_cell(cell, source, f"cells[{i}]")


def check_version(version: Any, source: str = "results") -> None:
    if version == SCHEMA_VERSION:
        return
    if not isinstance(version, int):
        raise SchemaError(f"{source}: no valid schema_version (found {version!r}); this is not a kit results file")
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"{source} uses results schema v{version}, newer than this kit understands (v{SCHEMA_VERSION}).",
            remedy=NEWER_KIT_REMEDY,
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
        raise UsageError(f"{path}: no such results file") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a folder, not a results file") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise SchemaError(f"{path}: not valid JSON ({exc})") from None
    return RunResults.from_dict(d, source=str(path))
