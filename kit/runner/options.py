"""`kit run`'s options: :class:`RunOptions` (one typed field per option of `kit run` itself, made by
kit.results.option_fields.option, and each suite's own options, its descriptor's options class), the
options as the front ends read them (:func:`option_specs`: `kit run`'s, then the suites', an option two
suites declare given once), the command line parsed into RunOptions and rendered back (argparse: the
cuda10 front end, kit launch), the rules that turn option values into what the run's config keeps
(comma lists, the device), and the ``--smoke`` preset. Their checks, and the RunConfig a run gets, are
kit.runner.option_checks'.

Python 3.7 syntax (the cuda10 image imports this module): typing's ``Optional``/``List``.
"""

import argparse
import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from kit.errors import UsageError
from kit.results import precisions as precision_modes
from kit.results import suites
from kit.results.option_fields import OptionSpec, option, specs_of
from kit.results.precisions import help_text as precision_names


def _env_path(variable: str, fallback: str):
    # the text as set: RunOptions turns it into a Path, or refuses it when empty (Path("") is ".")
    return lambda: os.environ.get(variable, fallback)


#: path options -> the environment variable that sets the default (None: none)
PATH_OPTIONS = {"data_dir": "KIT_DATA_DIR", "results_dir": "KIT_RESULTS_DIR", "resume": None}


def _suite_defaults() -> Dict[str, Any]:
    option_specs()  # a plugin whose options clash is set aside first
    return {s.name: s.options() for s in suites.all_suites() if s.options is not None}


def _engines_help() -> str:
    """``--engines``' help: each suite's engines where it has more than one (its descriptor's)."""
    parts = [f"{s.name}: {', '.join(s.engines)}" for s in suites.all_suites() if len(s.engines) > 1]
    return ("The engines to measure, of the suites that have several (" + "; ".join(parts)
            + "). Default: each suite's own (docs/running.md).")


@dataclass
class RunOptions:
    """The options of `kit run`, as given (``given``: the names set on the command line, in order;
    ``own``: each suite's own options, by suite, as given: its descriptor's options class)."""

    suite: str = option("cifar", suites.help_text())
    data: str = option("real", "'real' (the downloaded data sets, e.g. CIFAR-100, WikiText-2) or 'synthetic' (same shapes, generated; throughput only).")
    device: str = option("auto", "auto, cpu, cuda or cuda:N.")
    precisions: Optional[List[str]] = option(None, f"{precision_names()}. Default: all the suite's (unsupported ones are recorded as skipped).", names=("--precisions", "-p"))
    engines: Optional[List[str]] = option(None, _engines_help(), names=("--engines", "-e"))
    steps: Optional[int] = option(None, "Timed steps: CIFAR's per epoch in throughput mode (default 100); GPT's and a model suite's per repeat (the preset's or the suite's), or all steps in convergence mode.")
    batch_size: Optional[int] = option(None, "Batch size (default: 256 for CIFAR, 32 with --device cpu; the preset's for the LSTM and GPT; the suite's own for others).")
    repeats: int = option(3, "Repeats per cell (median and spread are reported).")
    seed: int = option(0, "Base random seed (recorded).")
    mode: str = option("throughput", "throughput (fixed steps, synthetic allowed) or convergence (full epochs on real data, accuracy parity).")
    compile: str = option("auto", "torch engine: the step captured as one CUDA graph with the model compiled by Inductor inside (auto = on for CUDA; falls back with the reason), off = no Inductor (the captured step with eager kernels), eager = neither; GPT: torch.compile per block: auto, on, off or eager.")
    gpus: Optional[int] = option(None, "Data-parallel: run each cell over N ranks with DistributedDataParallel (GPUs 0..N-1, NCCL; with --device cpu, N gloo processes). --batch-size is per GPU; --gpus 1 is the data-parallel path on one GPU.")
    global_batch_size: Optional[int] = option(None, "Data-parallel: the global batch, split evenly over --gpus (instead of --batch-size per GPU).")
    scaling: bool = option(False, "Data-parallel: also measure each cell on one rank first, and record the scaling efficiency.")
    profile_window: Optional[bool] = option(None, "After each cell's timed repeats, run a few more steps (5) under torch.profiler for `kit explain`: host and device time per step, the GPU's idle gap, kernel time by class (CellResult.profile). Outside the timed figures. By default on where the cells run on one GPU, off on the CPU and for data-parallel cells; on an H100 it cost 0.2-7% of a cell's wall time (docs/explain.md).", names=("--profile-window",), off="--no-profile-window")
    isolate: str = option("apex", "Cells run in a process of their own, so one cell's global state (Apex amp's patches of torch) cannot reach the next: apex (the Apex cells), all, or none.")
    tolerance: Optional[float] = option(None, "Convergence parity tolerance (accuracy points for CIFAR, relative perplexity for the LSTM, relative loss for GPT; default: the suite's).")
    data_dir: Path = option(help="Data cache folder (env KIT_DATA_DIR).", default_factory=_env_path("KIT_DATA_DIR", "data"))
    results_dir: Path = option(help="Where run folders and bundles go (env KIT_RESULTS_DIR).", default_factory=_env_path("KIT_RESULTS_DIR", "results"))
    resume: Optional[Path] = option(None, "Continue an interrupted run from its folder, skipping finished cells (refused while another process writes the folder; a complete run is left as it is).")
    time_limit: Optional[str] = option(None, "Stop this call of the run within this time from its start (seconds, or e.g. 90s, 15m, 2h, 1:30:00; at most 30 days): no cell starts that the plan's estimate says would end past it, and a cell still running at the limit stops as at Ctrl-C. Finished cells and the bundle are kept; exit 124; `--resume` goes on (and takes a limit of its own).")
    smoke: bool = option(False, "A one-minute sanity run: resnet18, fp32 + amp-bf16 + fp16-master, 1 epoch of 4 steps, 1 repeat, synthetic data, plus a 5-batch LSTM.")
    skip_checks: bool = option(False, "Do not run the driver/GPU checks first.")
    dry_run: bool = option(False, "Print the cells the run would measure and a rough duration on stdout, then stop (options are checked; nothing is fetched or written).", host_only=True)
    #: the options set on the command line, in their order (what `kit launch` forwards)
    given: Tuple[str, ...] = ()
    #: each suite's own options as given, by suite (its descriptor's options class): :meth:`value`
    #: reads one by name, :meth:`with_options` sets it in every suite that has it
    own: Dict[str, Any] = field(default_factory=_suite_defaults)

    def __post_init__(self) -> None:
        # One rule for every path option, whichever front end built the options: an empty path
        # is refused (as Path it would silently be the current folder).
        for name, variable in PATH_OPTIONS.items():
            value = getattr(self, name)
            if value is None or isinstance(value, Path):
                continue
            if not str(value).strip():
                flag = "--" + name.replace("_", "-")
                said = flag if name in self.given or variable is None else f"{variable} (the default of {flag})"
                raise UsageError(f"{said} is empty; it needs a folder.",
                                 remedy=f"Leave {flag} out for its default, or name a folder, e.g. {flag} ./{name.split('_')[0]}")
            setattr(self, name, Path(value))

    @classmethod
    def of(cls, values: Dict[str, Any], given: Tuple[str, ...] = ()) -> "RunOptions":
        """RunOptions from every option's value by name (a front end's), ``given`` the names set."""
        own = {f.name for f in fields(cls)}
        made = cls(**{k: v for k, v in values.items() if k in own}, given=tuple(given))
        return made.replaced(**{k: v for k, v in values.items() if k not in own})

    def value(self, name: str) -> Any:
        """Option ``name``'s value: `kit run`'s own field, or a suite's option (an option two suites
        have is set in both alike)."""
        if name in _OWN_NAMES:
            return getattr(self, name)
        for values in self.own.values():
            if name in getattr(values, "__dataclass_fields__", {}):
                return getattr(values, name)
        raise AttributeError(f"kit run has no option {name!r}")

    def replaced(self, **values: Any) -> "RunOptions":
        """A copy with these options set (each suite option in every suite that has it), ``given`` kept."""
        mine = {k: v for k, v in values.items() if k in _OWN_NAMES}
        rest = {k: v for k, v in values.items() if k not in _OWN_NAMES}
        own = dict(self.own)
        for suite, current in own.items():
            theirs = {k: v for k, v in rest.items() if k in current.__dataclass_fields__}
            if theirs:
                own[suite] = replace(current, **theirs)
        unknown = [k for k in rest if not any(k in o.__dataclass_fields__ for o in own.values())]
        if unknown:
            raise TypeError(f"kit run has no option {', '.join(unknown)}")
        return replace(self, own=own, **mine)

    def with_options(self, **values: Any) -> "RunOptions":
        """A copy with these options set, as if given on the command line (after those given)."""
        given = self.given + tuple(name for name in values if name not in self.given)
        return replace(self.replaced(**values), given=given)


_OWN_NAMES = frozenset(spec.name for spec in specs_of(RunOptions))


# -- what the front ends read: kit run's own options, then each suite's -----------------


def option_specs() -> List[OptionSpec]:
    """The options of `kit run`, in the order `kit run --help` lists them: its own, then the suites'
    (in the suites' order; an option several suites declare once, with ``suites`` naming them). A
    plugin whose option clashes with `kit run`'s or another suite's is set aside (kit.results.suites)."""
    if not _SPECS or _SPECS[0] != suites.all_suites():
        specs = specs_of(RunOptions) + _suite_specs()  # may set a plugin aside: the suites read after it
        _SPECS[:] = [suites.all_suites(), specs]
    return list(_SPECS[1])


_SPECS: list = []


def _suite_specs() -> List[OptionSpec]:
    core = specs_of(RunOptions)
    taken = {flag: spec.name for spec in core for flag in spec.names + ((spec.off,) if spec.off else ())}
    merged: Dict[str, OptionSpec] = {}
    for s in suites.all_suites():
        if s.options is None:
            continue
        mine = specs_of(s.options, (s.name,))
        problem = next((p for p in (_clash(spec, core, merged, taken) for spec in mine) if p), None)
        if problem and s.plugin:
            suites.set_aside(s.name, problem)
            continue
        if problem:  # the kit's own suites never clash (tests/test_suite_options.py)
            raise ValueError(f"the {s.name} suite: {problem}")
        for spec in mine:
            before = merged.get(spec.name)
            if before is None:
                merged[spec.name] = spec
                taken.update({flag: spec.name for flag in spec.names + ((spec.off,) if spec.off else ())})
                continue
            said = before.help if spec.help in before.help else f"{before.help} {spec.help}"
            merged[spec.name] = replace(before, help=said, suites=before.suites + spec.suites, check=None,
                                        replaces=tuple(dict.fromkeys(before.replaces + spec.replaces)))
    return list(merged.values())


def _clash(spec: OptionSpec, core: List[OptionSpec], merged: Dict[str, OptionSpec], taken: Dict[str, str]) -> str:
    """Why a suite's option cannot join `kit run`'s ("" where it can): a name or flag of `kit run`'s
    own, a flag of another option, or an option of another suite's name declared differently."""
    if any(spec.name == c.name for c in core):
        return f"its option {spec.name!r} is one of kit run's own"
    before = merged.get(spec.name)
    if before is not None and (before.kind, before.type, before.names, before.off, before.default, before.choices) != (
            spec.kind, spec.type, spec.names, spec.off, spec.default, spec.choices):
        return (f"its option {spec.flag} differs from the {' and '.join(before.suites)} suite's "
                "(type, flags or default); an option several suites have is declared alike")
    flags = spec.names + ((spec.off,) if spec.off else ())
    other = next((f for f in flags if taken.get(f, spec.name) != spec.name), None)
    return f"its flag {other} is another option's" if other else ""


# -- the command line: parse (the cuda10 front end, kit launch) and render (kit launch) ---


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # a KitError (exit 2), not argparse's own exit
        raise UsageError(f"{self.prog}: {message}", remedy="See `kit run --help` on the host for the options.")


def argument_parser(prog: str = "kit run", legacy: bool = False) -> argparse.ArgumentParser:
    """An argparse parser of `kit run`'s options. Only the options given land in the
    namespace (the rest keep RunOptions' defaults). ``legacy``: the cuda10 image's front
    end, as it has always been (no host-only options; abbreviated flags accepted)."""
    p = _Parser(prog=prog, allow_abbrev=legacy, argument_default=argparse.SUPPRESS)
    for spec in option_specs():
        if legacy and spec.host_only:
            continue
        if spec.kind == "list":
            p.add_argument(*spec.names, dest=spec.name, action="append")
        elif spec.kind == "switch":
            p.add_argument(*spec.names, dest=spec.name, action="store_true")
        elif spec.kind == "yes-no":
            p.add_argument(*spec.names, dest=spec.name, action="store_true")
            p.add_argument(spec.off, dest=spec.name, action="store_false")
        else:  # a path as text: RunOptions refuses an empty one (Path("") would be ".")
            p.add_argument(*spec.names, dest=spec.name, type=str if spec.type is Path else spec.type)
    return p


def parse_args(argv, prog: str = "kit run", legacy: bool = False) -> RunOptions:
    """RunOptions from `kit run`'s command line (a leading ``run`` is accepted); a
    UsageError (exit 2) when it does not parse. Values are not checked here."""
    args = list(argv)
    if args and args[0] == "run":
        args = args[1:]
    values = vars(argument_parser(prog, legacy=legacy).parse_args(args))
    return RunOptions().with_options(**values)


def to_args(options: RunOptions) -> List[str]:
    """The command line that gives ``options`` back (:func:`parse_args` of it equals them):
    the options given, in their order."""
    specs = {spec.name: spec for spec in option_specs()}
    out: List[str] = []
    for name in options.given:
        spec, value = specs[name], options.value(name)
        if value is None:
            continue
        if spec.kind == "switch":
            out += [spec.flag] if value else []
        elif spec.kind == "yes-no":
            out.append(spec.flag if value else spec.off)
        else:
            for item in (value if spec.kind == "list" else [value]):
                text = str(item)
                # a value that starts with "-" would read as a flag: give it as --flag=value
                out += [f"{spec.flag}={text}"] if text.startswith("-") else [spec.flag, text]
    return out


# -- option values as RunConfig keeps them ---------------------------------------------


DEVICE_PATTERN = re.compile(r"(auto|cpu|cuda(:[0-9]+)?)")


def split_names(values, flag: str) -> List[str]:
    """A list option's names (repeated and/or comma-separated). Given but empty, or naming
    one thing twice, is a UsageError: a cell measured twice under one id is lost in a compare."""
    if values is None:
        return []
    out = split_list(values, flag)
    twice = sorted({x for x in out if out.count(x) > 1})
    if twice:
        raise UsageError(f"{flag} names {', '.join(twice)} more than once; each is measured once per run.",
                         remedy=f"Name each once, e.g. {flag} {','.join(dict.fromkeys(out))}")
    return out


def normalise_device(device: str) -> str:
    """``--device`` as the runner reads it (auto, cpu, cuda or cuda:N), or a UsageError."""
    dev = str(device or "").strip().lower()
    if not DEVICE_PATTERN.fullmatch(dev):
        if dev.startswith("cuda"):
            raise UsageError(f"--device {device!r} is malformed: after 'cuda:' comes the GPU's number, e.g. cuda:0.",
                             remedy="Use cuda or cuda:N (N = the GPU's number, as nvidia-smi lists it).")
        raise UsageError(f"--device {device!r} is not a device the kit knows.",
                         remedy="Use auto, cpu, cuda or cuda:N (N = the GPU's number, as nvidia-smi lists it).")
    return dev


_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}


#: the longest duration taken (30 days): more is no limit
MAX_DURATION_S = 30 * 24 * 3600


def parse_duration(text: str, flag: str = "--time-limit") -> float:
    """Seconds from a duration as a person writes it: 90, 90s, 15m, 1.5h, or H:MM:SS (a UsageError,
    exit 2, for anything else, for no time at all, or for more than MAX_DURATION_S). "1:30" is refused:
    it reads as 90 seconds to some and as an hour and a half to others."""
    value = str(text).strip().lower()
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*([smh]?)", value)
    if m:
        seconds = float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    elif re.fullmatch(r"[0-9]+:[0-5][0-9]:[0-5][0-9]", value):
        hours, minutes, secs = (int(part) for part in value.split(":"))
        seconds = float(hours * 3600 + minutes * 60 + secs)
    else:
        raise UsageError(f"{flag} {text!r} is not a duration.",
                         remedy=f"Give seconds or a unit, e.g. {flag} 540, {flag} 15m, {flag} 2h or {flag} 1:30:00")
    if seconds <= 0:
        raise UsageError(f"{flag} {text!r} leaves no time to run.",
                         remedy=f"Give a time above zero, e.g. {flag} 15m")
    if seconds > MAX_DURATION_S:
        raise UsageError(f"{flag} {text!r} is over 30 days, which is no limit.",
                         remedy=f"Leave {flag} out, or give a shorter one, e.g. {flag} 15m")
    return seconds


def split_list(values, flag: str) -> List[str]:
    """A list option's items, repeated and/or comma-separated, spaces around each dropped: the
    one rule of every comma list of the kit. Nothing in it at all (``''``, ``,``) is "empty"; an
    empty item among others (``fp32,,amp-bf16``, a comma at an end) is refused too (UsageError,
    exit 2): it is a typo, and the run would not be what the command line says."""
    texts = [values] if isinstance(values, str) else list(values)
    items = [x.strip() for v in texts for x in str(v).split(",")]
    if not any(items):
        raise UsageError(f"{flag} is empty; it needs at least one name.",
                         remedy=f"Leave {flag} out for its default, or name them, comma-separated.")
    if "" in items:
        shown = ",".join(str(v) for v in texts)
        raise UsageError(f"{flag} {shown!r} has an empty item (two commas in a row, or one at an end); "
                         "name each item, comma-separated.",
                         remedy=f"e.g. {flag} {','.join(x for x in items if x)}")
    return items


# -- presets and overrides ------------------------------------------------------------


def smoke_preset(options: RunOptions) -> RunOptions:
    """``--smoke``: the smallest sanity run. Each suite's descriptor gives its own smoke settings
    (models, engines, presets, steps, batches: kit.results.suites), the precisions are the smoke
    modes of kit.results.precisions; options given keep their value. Mode, data and repeats are
    fixed; ``--compile auto`` is off (compiling costs more than 4 steps measure); the batch is 32
    unless an option that replaces ``--batch-size`` (``--batch-sizes``) was given."""
    run = suites.run_by(options.suite)
    own: dict = {}
    for s in run:
        own.update({k: v for k, v in s.smoke.items() if k not in own})
    replaced = {r for spec in option_specs() if spec.replaces and options.value(spec.name) != spec.default
                for r in spec.replaces}
    return options.replaced(
        mode="throughput",
        data="synthetic",
        precisions=options.precisions or precision_modes.smoke([s.name for s in run]),
        **{k: options.value(k) or v for k, v in own.items()},
        batch_size=options.batch_size or (None if "batch_size" in replaced else 32),
        repeats=1,
        compile="eager" if options.compile == "auto" else options.compile,
        tolerance=None,
    )
