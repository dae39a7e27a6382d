"""Your own model as a suite: the kit's generic engine trains a model, its input and its loss that a
plugin names, with everything the built-in suites get (every precision, the two engines below,
repeats and statistics, the environment record, the profiled window for `kit explain`, a bundle).

A plugin is one small module in a package of yours, torch-free when imported (torch inside its
functions), named under the entry-point group ``mpkit.suites`` (kit.results.suites; docs/your-model.md)::

    from kit.bench.generic import model_suite

    def build(params):                        # -> torch.nn.Module (on the CPU; the kit moves it)
        ...
    def batch(params, batch_size, device, generator, data):   # -> (inputs, targets) on the device
        ...                                   # optional: input_shape= and classes= make random ones
    def loss(output, target):                 # -> a scalar tensor
        ...

    SUITE = model_suite("mymodel", "my model", __name__, input_shape=(3, 64, 64), classes=10)

``params`` is the cell's: its batch size and steps, and the plugin's own options (``options=``, a
dataclass of kit.results.option_fields.option fields: they join `kit run`'s under the suite's name).

The two engines (docs/your-model.md):

- ``eager``: the loop as a user writes it, every kernel launched from Python step by step (host-paced:
  on a fast GPU the host can set its pace), the precision's autocast and loss scaling from
  kit.bench.precision, SGD with momentum.
- ``graphed``: the whole step (forward, loss, backward, SGD, fp16's loss scale on the device) captured
  as one CUDA graph and replayed, so the GPU sets the pace; on a GPU, for the modes whose every
  decision is made on the device (kit.results.precisions: capturable), by default only on a GPU.

A cell's method (kit.results.method) names the engine, its revision here and the plugin's package and
version, so two plugins' figures, or two versions', are never divided unmarked.

Torch-free and Python 3.7 syntax: the host lists the suites without the benchmark stack.
"""

from dataclasses import asdict
from functools import partial
from typing import Any, NamedTuple, Optional, Tuple

from kit.results import precisions as precision_modes
from kit.results.schema import CellSpec, RunConfig
from kit.results.suites import Parity, Suite

#: the engines every model suite has: the loop a user writes, and the whole step as one CUDA graph
EAGER, GRAPHED = "eager", "graphed"
ENGINES = (EAGER, GRAPHED)
#: the generic engines' revisions and what each changed (kit.bench.methods): a bump marks every model
#: suite's figures as measured another way
REVISIONS = {
    EAGER: (1, ((1, "the kit's generic loop: eager steps, autocast and loss scaling of kit.bench.precision, "
                    "SGD with momentum, one fixed batch on the device"),)),
    GRAPHED: (1, ((1, "the kit's generic step captured as one CUDA graph (forward, loss, backward, SGD, the fp16 "
                      "loss scale on the device), one fixed batch on the device"),)),
}


class Recipe(NamedTuple):
    """What the generic engine trains for a model suite (its descriptor's ``recipe``)."""

    #: the plugin's module with ``build``, ``loss`` and ``batch`` (or input_shape and classes)
    module: str
    #: one sample's shape and the number of classes, for random inputs and targets (synthetic) where
    #: the module has no ``batch``
    input_shape: Optional[Tuple[int, ...]] = None
    classes: int = 0
    #: a data set the cells read (kit.data.registry's name): loaded once per cell, handed to ``batch``
    dataset: str = ""
    batch_size: int = 32
    #: timed steps per repeat (``--steps`` replaces it) and the untimed ones before them
    steps: int = 50
    warmup_steps: int = 5
    lr: float = 0.01
    momentum: float = 0.9
    #: one sample's training FLOPs (forward and backward), for achieved TFLOP/s and the plan's
    #: estimate; 0: not known (neither is recorded)
    flops_per_item: float = 0.0


def model_suite(name: str, help: str, module: str, models: Tuple[str, ...] = ("model",), input_shape=None,
                classes: int = 0, dataset: str = "", batch_size: int = 32, steps: int = 50, warmup_steps: int = 5,
                lr: float = 0.01, flops_per_item: float = 0.0, unit: str = "samples", options: Any = None,
                order: int = 50, parity: Parity = Parity("final training loss", tolerance=0.05, gap="either")) -> Suite:
    """The descriptor of a model suite: ``name`` (``--suite NAME``), what it measures (``help``) and
    ``module``, the plugin module with its model, input and loss (:class:`Recipe`); the rest as
    :class:`Recipe` and kit.results.suites.Suite say."""
    recipe = Recipe(module, tuple(input_shape) if input_shape else None, classes, dataset, batch_size, steps,
                    warmup_steps, lr, 0.9, flops_per_item)
    return Suite(
        name=name, help=help, title=f"{help} ({{engine}} engine)", models=tuple(models), engines=ENGINES,
        plan=partial(cells, name), work=work, runner="kit.bench.generic.engine", parity=parity, unit=unit, order=order,
        datasets=(dataset,) if dataset else (), revisions=dict(REVISIONS), host_paced=(EAGER,), options=options,
        engine_labels={EAGER: "eager: the loop as a user writes it", GRAPHED: "graphed: the whole step one CUDA graph"},
        smoke={"steps": 4}, recipe=recipe,
    )


def engines(config: RunConfig, suite: Suite) -> list:
    """The engines a run measures: those of ``--engines``; by default both on a GPU, the eager one on
    the CPU (where the captured step has nothing of its own to measure)."""
    chosen = [e for e in config.engines if e in suite.engines]
    if chosen:
        return chosen
    from kit.env.record import device_kind  # when planning, not when the suites are listed

    return list(ENGINES) if device_kind(config.device) == "cuda" else [EAGER]


def cells(name: str, config: RunConfig) -> list:
    """Every model x engine x precision of the model suite ``name`` in a run (its precisions: the modes
    every suite runs, kit.results.precisions)."""
    from kit.results import suites

    suite = suites.suite(name)
    recipe = suite.recipe
    own = config.options_of(suite.name)
    params = {"batch_size": config.per_rank_batch() or recipe.batch_size, "steps": config.steps or recipe.steps,
              "tolerance": config.tolerance, **(asdict(own) if own is not None else {}), **config.data_parallel_params()}
    precisions = config.precisions or precision_modes.defaults(suite.name)
    return [CellSpec(suite.name, model, precision, engine, dict(params))
            for model in suite.models for engine in engines(config, suite) for precision in precisions]


def work(spec: CellSpec, mode: str) -> float:
    """One repeat's training FLOPs, where the recipe knows a sample's (else 0: the estimate's fixed cost)."""
    from kit.results import suites

    recipe = suites.suite(spec.workload).recipe
    return recipe.flops_per_item * spec.params["batch_size"] * (spec.params["steps"] + recipe.warmup_steps)
