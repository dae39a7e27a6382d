"""The suites: each one folder under kit/bench/, or a plugin in a package of its own, described
there, found here.

A suite is a package ``kit/bench/NAME/`` whose ``__init__`` sets ``SUITE = Suite(...)``: its data
sets, models or presets, engines, its own options of `kit run` (``options``, a dataclass of
kit.results.option_fields.option fields), how its cells are planned and what they cost, its parity
metric, its smoke settings and the module whose ``run_cell(spec, ctx)`` measures a cell (imported only
when a cell runs: the descriptor and its plan are torch-free). Every other part of the kit reads these
descriptors: ``--suite``'s choices and help, `kit run`'s options, the names a results file may use
(kit.results.schema), the plan and its estimate (kit.runner.plan), the data a run fetches, the
cell dispatch (kit.bench.api), parity (kit.results.derive), the views' titles and order
(kit.compare.measures, kit.report).

A new suite is one folder (tests/test_suite_registry.py adds a toy suite with options of its own in
one module and runs it through ``kit run`` into a bundle, a comparison and a report).

A suite may also live outside the kit, in any installed package that names it under the entry-point
group :data:`ENTRY_POINTS` (``mpkit.suites``; docs/your-model.md): ``NAME = "package.module"``, whose
``SUITE`` is the descriptor (usually made by kit.bench.generic.model_suite). Such a plugin is loaded
with the built-in suites; one that does not load, or describes no suite right, is set aside with one
line naming it and what is wrong (:func:`broken`), and every other suite still runs.

The descriptors are found at run time (:func:`all_suites` imports each package of kit.bench that
has one, and each plugin): a descriptor depends on this module, never the other way round, so the
layers hold.

Torch-free and Python 3.7 syntax: the cuda10 image's runner reads it.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from kit.compat import metadata

#: ``--suite all``: every suite whose descriptor says ``in_all``
ALL = "all"
#: the entry-point group a package names its suites under (as pytest's plugins name ``pytest11``)
ENTRY_POINTS = "mpkit.suites"
#: a suite's name: it is a folder's, a cell id's first part and a command-line word
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,39}")


class Parity(NamedTuple):
    """How a convergence cell's final metric is held against its base precision's."""

    #: what the cell ends on, as the views name it ("test accuracy")
    metric: str
    #: the precision compared with
    base: str = "fp32"
    #: the default tolerance (kit run --tolerance replaces it)
    tolerance: float = 0.01
    #: "points": higher is better, the gap in absolute points (accuracy); "relative": lower is
    #: better, the gap relative (perplexity); "either": a relative gap either way counts (loss)
    gap: str = "relative"
    #: the metric in the rule's words ("accuracy within 1.0 points of fp32"; default: the metric)
    noun: str = ""


class Suite(NamedTuple):
    #: ``--suite NAME``, the folder's name and its cells' workload
    name: str
    #: what it measures, for ``--suite``'s help ("CIFAR-100 ResNets")
    help: str
    #: a chart group's title; ``{engine}`` is the engine's label
    title: str
    #: the models or presets its cells may name (the cell id's second part), in the views' order
    models: Tuple[str, ...]
    #: its engines (``--engines`` picks among them)
    engines: Tuple[str, ...]
    #: the cells of a run: ``plan(config) -> [CellSpec]`` (torch-free)
    plan: Callable[[Any], list]
    #: one repeat's counted training FLOPs for the plan's estimate: ``work(spec, mode) -> float``
    work: Callable[[Any, str], float]
    #: the module with ``run_cell(spec, ctx) -> CellResult`` (and optionally ``skipped_cell(spec, device)``)
    runner: str
    #: the parity rule of its convergence cells
    parity: Parity
    #: the RunConfig field that names the models a run narrows it to ("" none), and what it calls one
    model_option: str = ""
    model_kind: str = "model"
    #: the data sets it reads (kit.facts.datasets' names)
    datasets: Tuple[str, ...] = ()
    #: its cells may be measured at another image size than the data set's own (a part of their id)
    sized: bool = False
    #: what its throughput counts ("images", "tokens")
    unit: str = "items"
    #: one of ``--suite all``'s suites
    in_all: bool = False
    #: the order of ``--suite``'s choices and of the views (lower first)
    order: int = 100
    #: a cell's subject in the report's findings, before the model ("LSTM": "LSTM apex-2018 · kit")
    subject: str = ""
    #: what each engine is, where its name alone does not say (the views' group titles)
    engine_labels: Dict[str, str] = {}
    #: each engine's revision today and its changelog ((revision, what it changed), oldest first),
    #: bumped whenever what the engine measures, or how, changes (kit.bench.methods; kit.results.method)
    revisions: Dict[str, Tuple[int, Tuple[Tuple[int, str], ...]]] = {}
    #: its faithful engines, whose loop the host drives step by step (their cells are "host-paced")
    host_paced: Tuple[str, ...] = ()
    #: the engines whose training calls the data-parallel hooks (``--gpus``)
    data_parallel: Tuple[str, ...] = ()
    #: also shown against amp-bf16 (its throughput ratios and a chart), not only against fp32
    vs_bf16: bool = False
    #: ``--smoke``'s settings for it (kit run options' names and values; given options win)
    smoke: Dict[str, Any] = {}
    #: checks one cell's settings before anything runs (UsageError): ``check(spec.params, mode)``
    check: Optional[Callable[[dict, str], Any]] = None
    #: the splits of ``dataset`` a run reads where fewer than all: ``splits(config, dataset) -> tuple | None``
    splits: Optional[Callable[[Any, str], Optional[tuple]]] = None
    #: before a run on real data: checks what it reads and says it, ``data_note(config, dataset, described)
    #: -> str | None`` (described: kit.data.service.describe's; UsageError for data it cannot use)
    data_note: Optional[Callable[[Any, str, dict], Optional[str]]] = None
    #: what a data-parallel cell of it adds to its notes ("" nothing)
    data_parallel_note: str = ""
    #: the packages beyond torch a cell imports: ``needs(spec) -> tuple``
    needs: Optional[Callable[[Any], tuple]] = None
    #: its own options of `kit run`: a dataclass whose fields are kit.results.option_fields.option()s
    #: (help, type, default, check); the command line, the run's config (RunConfig.options_of), the
    #: plan, the resume check and `kit fleet` read them. None: it has none
    options: Optional[type] = None
    #: what kit.bench.generic's engine trains, for a suite that has no engine of its own (a
    #: kit.bench.generic.Recipe: the module with the model, its input and loss)
    recipe: Any = None
    #: a plugin's package and version ("mpkit-example-suite 0.1.0"), set where it was found; ""
    #: for the kit's own suites. A plugin's cells record it in their method, so two plugins' (or two
    #: versions') figures are never divided unmarked
    plugin: str = ""
    #: one repeat's steps (training and evaluation batches) for the plan's estimate of a host-paced engine,
    #: whose host sets the pace of each step whatever the FLOPs (kit.facts.estimates: step_s):
    #: ``steps(spec, mode) -> int``
    steps: Optional[Callable[[Any, str], int]] = None


_FOUND: List[Suite] = []
#: the plugins set aside: what names it (the entry point) -> what is wrong, one line
_BROKEN: Dict[str, str] = {}


def all_suites() -> Tuple[Suite, ...]:
    """Every suite, in their order: the descriptors of kit.bench's packages and of the installed
    plugins (imported once; a broken plugin is set aside, :func:`broken`)."""
    if not _FOUND:
        bench = importlib.import_module("kit.bench")
        found = []
        for info in sorted(pkgutil.iter_modules(bench.__path__), key=lambda i: i.name):
            if not info.ispkg:
                continue
            described = getattr(importlib.import_module(f"kit.bench.{info.name}"), "SUITE", None)
            if isinstance(described, Suite):
                if described.name != info.name:
                    raise ValueError(f"kit/bench/{info.name}/ describes a suite named {described.name!r}")
                found.append(described)
        found += _plugins({s.name for s in found})
        _FOUND.extend(sorted(found, key=lambda s: (s.order, s.name)))
    return tuple(_FOUND)


def broken() -> Dict[str, str]:
    """The plugins that did not load, or describe no suite right: the name each gave (its entry
    point) -> one line naming the plugin and what is wrong."""
    all_suites()
    return dict(_BROKEN)


def set_aside(name: str, problem: str) -> None:
    """Take the plugin suite ``name`` out of the suites, with what is wrong with it (a front end
    found its options clash with the kit's own)."""
    for s in list(_FOUND):
        if s.name == name:
            _FOUND.remove(s)
            _BROKEN[name] = f"suite plugin {name!r} ({s.plugin}): {problem}"


def _entry_points() -> list:
    found = metadata.entry_points()
    if hasattr(found, "select"):
        return list(found.select(group=ENTRY_POINTS))
    return list(found.get(ENTRY_POINTS, ()))  # importlib_metadata before 3.6, Python 3.7's


def _plugins(taken: set) -> List[Suite]:
    """The suites the installed packages name under ENTRY_POINTS; each that fails is in _BROKEN."""
    out: List[Suite] = []
    for ep in sorted(_entry_points(), key=lambda e: e.name):
        dist = getattr(ep, "dist", None)
        package = f"{dist.metadata['Name']} {dist.version}" if dist is not None else ep.value.split(":")[0]
        said = f"suite plugin {ep.name!r} ({package}, entry point {ep.value})"
        try:
            loaded = ep.load()
        except Exception as exc:  # any error of a stranger's module is its own, not the kit's
            _BROKEN[ep.name] = f"{said} does not import: {exc.__class__.__name__}: {exc}"
            continue
        described = getattr(loaded, "SUITE", loaded)
        problem = plugin_problem(described, ep.name, taken)
        if problem:
            _BROKEN[ep.name] = f"{said}: {problem}"
            continue
        taken.add(ep.name)
        out.append(described._replace(plugin=package))
    return out


def plugin_problem(described: Any, name: str, taken: set) -> Optional[str]:
    """What is wrong with a plugin's descriptor, in words, or None."""
    if not isinstance(described, Suite):
        return f"its SUITE is {type(described).__name__}, not a kit.results.suites.Suite"
    if described.name != name:
        return f"it describes a suite named {described.name!r}; its entry point names it {name!r}"
    if not NAME_PATTERN.fullmatch(name) or name == ALL:
        return f"{name!r} is not a suite name (lower-case letters, digits, - and _, not 'all')"
    if name in taken:
        return f"a suite named {name!r} is already the kit's or another plugin's"
    missing = [e for e in described.engines if e not in described.revisions]
    if not described.engines or missing:
        return f"engine(s) {', '.join(missing) or '(none)'} without a revision in its revisions"
    if described.options is not None and not hasattr(described.options, "__dataclass_fields__"):
        return "its options is not a dataclass of kit.results.option_fields.option() fields"
    try:
        found = importlib.util.find_spec(described.runner)
    except (ImportError, ValueError) as exc:
        found, why = None, f" ({exc.__class__.__name__}: {exc})"
    else:
        why = ""
    if found is None:
        return f"its runner module {described.runner!r} cannot be found{why}"
    return None


def names() -> Tuple[str, ...]:
    """The suites' names: the workloads a cell may have."""
    return tuple(s.name for s in all_suites())


def choices() -> Tuple[str, ...]:
    """``--suite``'s choices: each suite, then "all"."""
    return names() + (ALL,)


def suite(name: str) -> Suite:
    """The descriptor of ``name`` (KeyError for a name that is not a suite)."""
    for s in all_suites():
        if s.name == name:
            return s
    raise KeyError(name)


def find(name: str) -> Optional[Suite]:
    """The descriptor of ``name``, or None (a bundle may name a suite this kit does not have)."""
    return next((s for s in all_suites() if s.name == name), None)


def run_by(choice: str) -> Tuple[Suite, ...]:
    """The suites a run of ``--suite choice`` measures ("all": those ``in_all``)."""
    if choice == ALL:
        return tuple(s for s in all_suites() if s.in_all)
    found = find(choice)
    return (found,) if found else ()


def run_names(choice: str) -> Tuple[str, ...]:
    return tuple(s.name for s in run_by(choice))


def in_all_names() -> Tuple[str, ...]:
    return run_names(ALL)


def model_order() -> Tuple[str, ...]:
    """Every suite's models, suite by suite: the order of the views' rows."""
    return tuple(m for s in all_suites() for m in s.models)


def engine_label(workload: str, engine: str) -> str:
    """An engine's name with what it is, where the suite says (the LSTM's two), else the name."""
    found = find(workload)
    return found.engine_labels.get(engine, engine) if found else engine


def unit(workload: str) -> str:
    found = find(workload)
    return found.unit if found else "items"


def parity_of(workload: str) -> Parity:
    """The suite's parity rule (a workload this kit does not know: fp32, relative, 1%)."""
    found = find(workload)
    return found.parity if found else Parity("final metric")


def help_text() -> str:
    """``--suite``'s help: each suite and what it measures."""
    parts = [f"{s.name} ({s.help})" for s in all_suites()]
    return ("Which comparison: " + ", ".join(parts) + f"; {ALL} = " + " + ".join(in_all_names()) + ".")
