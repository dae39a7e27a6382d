"""Turn a RunConfig into the list of cells to measure, and estimate the time.

Each suite plans its own cells (kit.results.suites: the descriptor's ``plan``, checked by its
``check``); this module joins them in the suites' order and estimates what they cost. The defaults
(what ``make run`` / ``kit run`` with no narrowing options measure) are documented in
docs/running.md ("What is measured").
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.env.record import device_kind, installed
from kit.errors import UsageError
from kit.facts import estimates as estimate_facts
from kit.facts import models as model_facts
from kit.results import precisions as precision_modes
from kit.results import suites
from kit.results.schema import CellSpec, RunConfig


def datasets(config: RunConfig) -> list:
    """The data sets the run reads (kit.facts.datasets' names), each once, in the suites' order."""
    out: list = []
    for s in suites.run_by(config.suite):
        out += [d for d in s.datasets if d not in out]
    return out


def dataset_splits(config: RunConfig, dataset: str) -> tuple | None:
    """The splits of ``dataset`` the run reads, where fewer than all (None: all): a GPT run that
    trains on WikiText-2's valid split (``--train-split valid``) reads valid and test only."""
    for s in suites.run_by(config.suite):
        if dataset in s.datasets and s.splits is not None:
            return s.splits(config, dataset)
    return None


@dataclass
class Plan:
    config: RunConfig
    cells: list[CellSpec]

    @property
    def cell_ids(self) -> list[str]:
        return [c.cell_id for c in self.cells]


def build_plan(config: RunConfig) -> Plan:
    """Every suite's cells of the run, each suite's checked by its descriptor (UsageError, exit 2:
    a bad override is refused before any cell runs). A suite this kit does not have (a plugin not
    installed here, or one that does not load) is a UsageError naming it."""
    if not suites.run_by(config.suite):
        raise UsageError(suites.broken().get(config.suite) or f"the run's suite {config.suite!r} is not one this kit has "
                         f"({', '.join(suites.choices())})",
                         remedy="A plugin's suite runs where its package is installed (docs/your-model.md).")
    cells: list[CellSpec] = []
    for s in suites.run_by(config.suite):
        planned = s.plan(config)
        for spec in planned if s.check is not None else ():
            s.check(spec.params, config.mode)
        cells += planned
    return Plan(config, cells)


def planned_cell_ids(config: RunConfig) -> list[str]:
    """The cell ids ``config`` plans today (for kit bundle merge: did other runs finish a run cut short?)."""
    return build_plan(config).cell_ids


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
    """The plan's rough estimate (``kit run``'s printout): the sum of :func:`cell_seconds` over the
    cells still to run (``todo``, default all)."""
    cells = plan.cells if todo is None else todo
    return sum(cell_seconds(plan.config, c) for c in cells)


def cell_seconds(config: RunConfig, spec: CellSpec, device: "str | None" = None) -> float:
    """The estimate of one of a run's cells: :func:`estimate_seconds` with the run's repeats and mode,
    on the kind of ``device`` (the run's resolved device; default ``config.device``)."""
    return estimate_seconds(spec, config.repeats, mode=config.mode, device=device_kind(device or config.device))


def estimate_seconds(spec: CellSpec, repeats: int, tflops: float | None = None, mode: str = "throughput",
                     device: str = "cuda") -> float:
    """A rough wall-time guess for the plan printout and the progress ETA's weights
    (never reported as a result).

    A fixed cost per cell plus the model's training FLOPs (kit.facts.models) over the
    repeats at the effective rate of kit.facts.estimates for the device kind
    (``device``: 'cuda' or 'cpu', kit.env.record.device_kind) and engine; ``tflops``
    replaces that rate. A precision the device cannot run (:func:`runs_on_cpu` on the CPU) or whose
    package (its mode's ``needs``: Apex, torchao) is not installed here (kit.env.record.installed: the
    run's cells are measured in this environment, and such a cell is skipped there) costs only
    kit.facts.estimates.SKIPPED_CELL_S;
    on a GPU a cell with ``find_max_batch`` adds its batch search: kit.facts.estimates.SEARCH_S_PER_GFLOP
    seconds for each of :func:`search_gflop`. An engine whose host paces each step (a rate with
    ``step_s``, a suite with ``steps``) takes per repeat the longer of its FLOPs' time and its steps'.
    """
    needs = precision_modes.mode(spec.precision).needs
    if (device == "cpu" and not runs_on_cpu(spec.precision)) or (needs and not installed(needs)):
        return estimate_facts.SKIPPED_CELL_S
    suite = suites.suite(spec.workload)
    rate = estimate_facts.rate(device, spec.workload, spec.engine)
    searches = device != "cpu" and spec.params.get("find_max_batch")
    search = estimate_facts.SEARCH_S_PER_GFLOP * search_gflop(spec) if searches else 0.0
    compute = suite.work(spec, mode) / ((tflops or rate.tflops) * 1e12)
    # a host-paced engine's repeat takes at least its steps at the host's pace, whatever its FLOPs
    host = rate.step_s * suite.steps(spec, mode) if rate.step_s and suite.steps else 0.0
    return rate.cell_s + search + repeats * max(compute, host)


def search_gflop(spec: CellSpec) -> float:
    """What the batch search's time grows with: the model's training GFLOPs per image at the cell's
    image size (kit.facts.models). The search trains a few steps at each batch it tries, up to the data
    set's size, whatever the run's steps, epochs or batch size."""
    return model_facts.train_flops_per_image(spec.model, spec.params.get("image_size", 32)) / 1e9
