"""`kit run`'s options: :class:`RunOptions` (one typed field per option, made by :func:`option`,
with its flags and help), :class:`OptionSpec` (what the front ends read of each field), the command
line parsed into RunOptions and rendered back (argparse: the cuda10 front end, kit launch), the
rules that turn option values into what RunConfig keeps (comma lists, the device, batch sizes), and
the ``--smoke`` preset. Their checks, and the RunConfig a run gets, are kit.runner.option_checks'.

Python 3.7 syntax (the cuda10 image imports this module): typing's ``Optional``/``List``.
"""

import argparse
import os
import re
import typing
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import List, Optional, Tuple

from kit.errors import UsageError
from kit.results import precisions as precision_modes
from kit.results import suites
from kit.results.precisions import help_text as precision_names
from kit.results.schema_names import DEFAULT_FASTAI_LEARNER

#: GPT preset overrides, by their option names (kit.bench.gpt.config.OVERRIDABLE)
GPT_OVERRIDES = ("seq_len", "d_model", "n_layers", "n_heads", "train_split")
#: the suites that read an option of one suite only
CIFAR_ONLY, LSTM_ONLY, GPT_ONLY = ("cifar",), ("lstm",), ("gpt",)


def option(default=MISSING, help="", names=(), off="", choices=(), lstm=False, host_only=False,
           default_factory=MISSING, suites=()):
    """A field of RunOptions: its default and what the command line shows of it.

    names     the flags, long one first (default ``--`` + the field's name with dashes);
    off       for a yes/no/unset option (``Optional[bool]``), the flag that says no;
    choices   offered as a fixed menu by `kit run` (Typer shows and checks them); the other
              front ends leave the check to RunConfig;
    lstm      an override of the LSTM preset (it goes to RunConfig.lstm under its name);
    host_only not taken by the cuda10 image's front end (it has no use there);
    suites    the suites whose cells read it (empty: every suite); given to a run of none of
              them it is refused (exit 2), not silently ignored (:func:`check_suite_options`).
    """
    if lstm and not suites:
        suites = LSTM_ONLY
    meta = {"option": {"help": help, "names": tuple(names), "off": off, "choices": tuple(choices),
                       "lstm": lstm, "host_only": host_only, "suites": tuple(suites)}}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def _env_path(variable: str, fallback: str):
    # the text as set: RunOptions turns it into a Path, or refuses it when empty (Path("") is ".")
    return lambda: os.environ.get(variable, fallback)


#: path options -> the environment variable that sets the default (None: none)
PATH_OPTIONS = {"data_dir": "KIT_DATA_DIR", "results_dir": "KIT_RESULTS_DIR", "resume": None}


@dataclass
class RunOptions:
    """The options of `kit run`, as given (``given``: the names set on the command line, in order)."""

    suite: str = option("cifar", suites.help_text(), choices=suites.choices())
    data: str = option("real", "'real' (downloaded CIFAR-100 / WikiText-2) or 'synthetic' (same shapes, generated; throughput only).")
    device: str = option("auto", "auto, cpu, cuda or cuda:N.")
    models: Optional[List[str]] = option(None, "ResNets to run (repeat or comma-separate): resnet18, resnet34, resnet50, resnet101, resnet152. Default: all five.", names=("--models", "-m"), suites=CIFAR_ONLY)
    precisions: Optional[List[str]] = option(None, f"{precision_names()}. Default: all the suite's (unsupported ones are recorded as skipped).", names=("--precisions", "-p"))
    engines: Optional[List[str]] = option(None, "CIFAR engines: torch (GPU-bound) and/or fastai (faithful); default both. LSTM engines: kit (faithful to Apex's example) and/or graphed (the whole step as one CUDA graph); default both on a GPU, kit on the CPU.", names=("--engines", "-e"), suites=("cifar", "lstm"))
    presets: Optional[List[str]] = option(None, "LSTM presets: apex-2018, tensor-core. Default: both.", names=("--preset",), suites=LSTM_ONLY)
    gpt_presets: Optional[List[str]] = option(None, "GPT presets: gpt2-small, gpt-1b, gpt-2b, tiny. Default: the first three.", suites=GPT_ONLY)
    seq_len: Optional[int] = option(None, "GPT: tokens per sequence (the preset's: 1024).", suites=GPT_ONLY)
    d_model: Optional[int] = option(None, "GPT: model width (overrides the preset).", suites=GPT_ONLY)
    n_layers: Optional[int] = option(None, "GPT: transformer blocks.", suites=GPT_ONLY)
    n_heads: Optional[int] = option(None, "GPT: attention heads (must divide --d-model).", suites=GPT_ONLY)
    train_split: Optional[str] = option(None, "GPT and LSTM: the WikiText-2 split to train on: train (default; GPT's held-out loss on valid) or valid (GPT: held-out loss on test; LSTM: its first 90% trains, the rest validates, test perplexity on test), for a machine with only the real valid and test splits.", lstm=True, suites=("lstm", "gpt"))
    epochs: Optional[int] = option(None, "Epochs per repeat (default: 1 in throughput mode; the preset's in convergence mode).", suites=("cifar", "lstm"))
    steps: Optional[int] = option(None, "CIFAR: steps per epoch in throughput mode (default 100). GPT: timed steps per repeat (the preset's), or all steps in convergence mode.")
    max_batches: Optional[int] = option(None, "LSTM: stop each epoch after this many batches.", suites=LSTM_ONLY)
    batch_size: Optional[int] = option(None, "Batch size (default: 256 for CIFAR, 32 with --device cpu; the preset's for the LSTM and GPT).")
    batch_sizes: Optional[List[str]] = option(None, "CIFAR: a batch curve: measure each cell at each of these batch sizes (comma-separated, e.g. 256,512,1024; instead of --batch-size); reports throughput per batch size, the knee and the speedup over fp32 at each size.", suites=CIFAR_ONLY)
    image_size: int = option(32, "CIFAR image size: 32 (native), or 64/128/224 upsampled on the device.", suites=CIFAR_ONLY)
    repeats: int = option(3, "Repeats per cell (median and spread are reported).")
    seed: int = option(0, "Base random seed (recorded).")
    mode: str = option("throughput", "throughput (fixed steps, synthetic allowed) or convergence (full epochs on real data, accuracy parity).")
    find_max_batch: bool = option(False, "CIFAR: also find the largest batch that fits, per model and precision.", suites=CIFAR_ONLY)
    compile: str = option("auto", "torch engine: the step captured as one CUDA graph with the model compiled by Inductor inside (auto = on for CUDA; falls back with the reason), off = no Inductor (the captured step with eager kernels), eager = neither; GPT: torch.compile per block: auto, on, off or eager.")
    gpus: Optional[int] = option(None, "Data-parallel: run each cell over N ranks with DistributedDataParallel (GPUs 0..N-1, NCCL; with --device cpu, N gloo processes). --batch-size is per GPU; --gpus 1 is the data-parallel path on one GPU.")
    global_batch_size: Optional[int] = option(None, "Data-parallel: the global batch, split evenly over --gpus (instead of --batch-size per GPU).")
    scaling: bool = option(False, "Data-parallel: also measure each cell on one rank first, and record the scaling efficiency.")
    profile_window: Optional[bool] = option(None, "After each cell's timed repeats, run a few more steps (5) under torch.profiler for `kit explain`: host and device time per step, the GPU's idle gap, kernel time by class (CellResult.profile). Outside the timed figures. By default on where the cells run on one GPU, off on the CPU and for data-parallel cells; on an H100 it cost 0.2-7% of a cell's wall time (docs/explain.md).", names=("--profile-window",), off="--no-profile-window")
    isolate: str = option("apex", "Cells run in a process of their own, so one cell's global state (Apex amp's patches of torch) cannot reach the next: apex (the Apex cells), all, or none.")
    tolerance: Optional[float] = option(None, "Convergence parity tolerance (accuracy points for CIFAR, relative perplexity for the LSTM).")
    emsize: Optional[int] = option(None, "LSTM: embedding size (overrides the preset).", lstm=True)
    nhid: Optional[int] = option(None, "LSTM: hidden units per layer.", lstm=True)
    nlayers: Optional[int] = option(None, "LSTM: layers.", lstm=True)
    lr: Optional[float] = option(None, "LSTM: initial learning rate.", lstm=True)
    clip: Optional[float] = option(None, "LSTM: gradient clipping norm.", lstm=True)
    bptt: Optional[int] = option(None, "LSTM: sequence length.", lstm=True)
    dropout: Optional[float] = option(None, "LSTM: dropout.", lstm=True)
    tied: Optional[bool] = option(None, "LSTM: tie encoder and decoder weights.", names=("--tied",), off="--untied", lstm=True)
    static_loss_scale: Optional[float] = option(None, "fp16-master: static loss scale (the example's --static-loss-scale).", lstm=True, suites=("cifar", "lstm"))
    dynamic_loss_scale: Optional[bool] = option(None, "fp16-master: dynamic loss scaling.", off="--no-dynamic-loss-scale", lstm=True, suites=("cifar", "lstm"))
    learner: str = option(DEFAULT_FASTAI_LEARNER, "fastai engines: create_cnn (fastai's create_cnn learner: its head on the torchvision body, the body frozen; random weights) or scratch (a plain Learner on the whole ResNet). The torch engine ignores it.", suites=CIFAR_ONLY)
    data_dir: Path = option(help="Data cache folder (env KIT_DATA_DIR).", default_factory=_env_path("KIT_DATA_DIR", "data"))
    results_dir: Path = option(help="Where run folders and bundles go (env KIT_RESULTS_DIR).", default_factory=_env_path("KIT_RESULTS_DIR", "results"))
    resume: Optional[Path] = option(None, "Continue an interrupted run from its folder, skipping finished cells (refused while another process writes the folder; a complete run is left as it is).")
    time_limit: Optional[str] = option(None, "Stop this call of the run within this time from its start (seconds, or e.g. 90s, 15m, 2h, 1:30:00; at most 30 days): no cell starts that the plan's estimate says would end past it, and a cell still running at the limit stops as at Ctrl-C. Finished cells and the bundle are kept; exit 124; `--resume` goes on (and takes a limit of its own).")
    smoke: bool = option(False, "A one-minute sanity run: resnet18, fp32 + amp-bf16 + fp16-master, 1 epoch of 4 steps, 1 repeat, synthetic data, plus a 5-batch LSTM.")
    skip_checks: bool = option(False, "Do not run the driver/GPU checks first.")
    dry_run: bool = option(False, "Print the cells the run would measure and a rough duration on stdout, then stop (options are checked; nothing is fetched or written).", host_only=True)
    #: the options set on the command line, in their order (what `kit launch` forwards)
    given: Tuple[str, ...] = ()

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

    def with_options(self, **values) -> "RunOptions":
        """A copy with these options set, as if given on the command line (after those given)."""
        given = self.given + tuple(name for name in values if name not in self.given)
        return replace(self, given=given, **values)


# -- what the front ends read from the fields ------------------------------------------


@dataclass(frozen=True)
class OptionSpec:
    """One option as the command line sees it, from a RunOptions field."""

    name: str          # the field's name
    kind: str          # "value" | "list" (repeatable) | "switch" (a flag) | "yes-no" (on/off flags, or unset)
    type: type         # of a value or list item: str, int, float or Path
    names: Tuple[str, ...]
    off: str
    help: str
    choices: Tuple[str, ...]
    lstm: bool
    host_only: bool
    default: object    # for default_factory fields, what it gives now
    suites: Tuple[str, ...] = ()  # the suites that read it (empty: all)

    @property
    def flag(self) -> str:
        return self.names[0]


def option_specs() -> List[OptionSpec]:
    """The options of `kit run`, in the order `kit run --help` lists them."""
    hints = typing.get_type_hints(RunOptions)
    specs = []
    for f in fields(RunOptions):
        meta = f.metadata.get("option")
        if meta is None:
            continue
        kind, typ = _kind(hints[f.name])
        default = f.default_factory() if f.default is MISSING else f.default  # type: ignore[misc]
        specs.append(OptionSpec(f.name, kind, typ, meta["names"] or ("--" + f.name.replace("_", "-"),), meta["off"],
                                meta["help"], meta["choices"], meta["lstm"], meta["host_only"], default,
                                meta["suites"]))
    return specs


def _kind(annotation) -> Tuple[str, type]:
    args = [a for a in getattr(annotation, "__args__", ()) or () if a is not type(None)]
    if getattr(annotation, "__origin__", None) is typing.Union:  # Optional[X]
        (annotation,) = args
        if annotation is bool:
            return "yes-no", bool
        args = list(getattr(annotation, "__args__", ()) or ())
    if getattr(annotation, "__origin__", None) in (list, List):
        return "list", args[0]
    if annotation is bool:
        return "switch", bool
    return "value", annotation


LSTM_OVERRIDES = tuple(spec.name for spec in option_specs() if spec.lstm)


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
        spec, value = specs[name], getattr(options, name)
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


def parse_batch_sizes(values) -> List[int]:
    """``--batch-sizes`` as the run's sorted list of batch sizes ([] when not given); a
    UsageError (exit 2) for an empty list, a non-number, zero or a negative, or a size named
    twice (its point would be measured twice under one cell id)."""
    if values is None:
        return []
    texts = split_list(values, "--batch-sizes")
    sizes: List[int] = []
    for text in texts:
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise UsageError(f"--batch-sizes {','.join(texts)}: {text!r} is not a whole number.",
                             remedy="List whole numbers of images per batch, e.g. --batch-sizes 256,512,1024")
        sizes.append(int(text))
    bad = [n for n in sizes if n < 1]
    if bad:
        raise UsageError(f"--batch-sizes {','.join(texts)}: {bad[0]} is not a batch size; each must be at least 1.",
                         remedy="List batch sizes of 1 or more, e.g. --batch-sizes 256,512,1024")
    twice = sorted({n for n in sizes if sizes.count(n) > 1})
    if twice:
        raise UsageError(f"--batch-sizes names {', '.join(map(str, twice))} more than once; each size is measured once per run.",
                         remedy=f"Name each once, e.g. --batch-sizes {','.join(map(str, sorted(set(sizes))))}")
    return sorted(sizes)


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
    modes of kit.results.precisions; options given keep their value. Mode, data, epochs and
    repeats are fixed; ``--compile auto`` is off (compiling costs more than 4 steps measure)."""
    run = suites.run_by(options.suite)
    own = {}
    for s in run:
        own.update({k: v for k, v in s.smoke.items() if k not in own})
    return replace(
        options,
        mode="throughput",
        data="synthetic",
        precisions=options.precisions or precision_modes.smoke([s.name for s in run]),
        **{k: getattr(options, k) or v for k, v in own.items()},
        epochs=1,
        batch_size=options.batch_size or (None if options.batch_sizes else 32),
        repeats=1,
        find_max_batch=False,
        compile="eager" if options.compile == "auto" else options.compile,
        tolerance=None,
    )


def gpt_overrides(options: RunOptions) -> dict:
    """The GPT preset's overrides that were set (RunConfig.gpt)."""
    return {name: getattr(options, name) for name in GPT_OVERRIDES if getattr(options, name) is not None}


def lstm_overrides(options: RunOptions) -> dict:
    """The LSTM preset's overrides that were set (RunConfig.lstm, keyed as the preset's keys)."""
    return {name: getattr(options, name) for name in LSTM_OVERRIDES if getattr(options, name) is not None}
