"""`kit run`'s options as one typed object, from the command line to the engine.

:class:`RunOptions` has one field per option of `kit run`; each field carries its type,
its default, its flag(s) and its help text (:func:`option`). The three front ends read
these fields and keep no list of their own, so adding an option is adding one field::

    kit.cli.run           the Typer command `kit run` (a parameter per field)      -> RunOptions
    kit.runner.legacy     the cuda10 image's argparse front end: parse_args          -> RunOptions
    kit.launch.launcher   `kit launch`: parse_args on the host, to_args back into
                          the container's command line (the same object, rendered)

    RunOptions --config_from_options: smoke_preset (--smoke), every check (exit 2)--> RunConfig
        (kit.results.schema) --> kit.runner.plan.build_plan --> a CellSpec per cell --> the engine

Checks live in :func:`config_from_options` (with RunConfig's own), and run before anything
is printed or written; the object itself is only parsed values, so `kit launch` can carry
paths that exist in the container only.

Python 3.7 syntax (the cuda10 image imports this module): typing's ``Optional``/``List``.
"""

import argparse
import os
import re
import typing
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import List, Optional, Tuple

from kit.errors import DiskFull, UsageError
from kit.results.schema import COMPILE_CHOICES, DEFAULT_FASTAI_LEARNER, RunConfig

SUITES = ("cifar", "lstm", "gpt", "all")
#: GPT preset overrides, by their option names (kit.bench.gpt.config.OVERRIDABLE)
GPT_OVERRIDES = ("seq_len", "d_model", "n_layers", "n_heads", "train_split")
#: the suites a run of each --suite measures
RUN_SUITES = {"cifar": ("cifar",), "lstm": ("lstm",), "gpt": ("gpt",), "all": ("cifar", "lstm")}
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

    suite: str = option("cifar", "Which comparison: CIFAR-100 ResNets, the Wikitext-2 LSTM, both (all), or the GPT-style transformer (gpt; not in all).", choices=SUITES)
    data: str = option("real", "'real' (downloaded CIFAR-100 / WikiText-2) or 'synthetic' (same shapes, generated; throughput only).")
    device: str = option("auto", "auto, cpu, cuda or cuda:N.")
    models: Optional[List[str]] = option(None, "ResNets to run (repeat or comma-separate): resnet18, resnet34, resnet50, resnet101, resnet152. Default: all five.", names=("--models", "-m"), suites=CIFAR_ONLY)
    precisions: Optional[List[str]] = option(None, "fp32, tf32, amp-fp16, amp-bf16, fp16-master, apex-o1, apex-o2, fp8-tensorwise, fp8-rowwise. Default: all the suite's (unsupported ones are recorded as skipped).", names=("--precisions", "-p"))
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
    batch_sizes: Optional[List[str]] = option(None, "CIFAR: a batch curve: measure each cell at each of these batch sizes (comma-separated, e.g. 256,512,1024; instead of --batch-size); reports throughput per batch size, the knee and the speedup over fp32 at each size.")
    image_size: int = option(32, "CIFAR image size: 32 (native), or 64/128/224 upsampled on the device.", suites=CIFAR_ONLY)
    repeats: int = option(3, "Repeats per cell (median and spread are reported).")
    seed: int = option(0, "Base random seed (recorded).")
    mode: str = option("throughput", "throughput (fixed steps, synthetic allowed) or convergence (full epochs on real data, accuracy parity).")
    find_max_batch: bool = option(False, "CIFAR: also find the largest batch that fits, per model and precision.", suites=CIFAR_ONLY)
    compile: str = option("auto", "torch engine: the step captured as one CUDA graph with the model compiled by Inductor inside (auto = on for CUDA; falls back with the reason), off = no Inductor (the captured step with eager kernels), eager = neither; GPT: torch.compile per block: auto, on, off or eager.")
    gpus: Optional[int] = option(None, "Data-parallel: run each cell over N ranks with DistributedDataParallel (GPUs 0..N-1, NCCL; with --device cpu, N gloo processes). --batch-size is per GPU; --gpus 1 is the data-parallel path on one GPU.")
    global_batch_size: Optional[int] = option(None, "Data-parallel: the global batch, split evenly over --gpus (instead of --batch-size per GPU).")
    scaling: bool = option(False, "Data-parallel: also measure each cell on one rank first, and record the scaling efficiency.")
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


# -- the checks, in one place, and the run's RunConfig ------------------------------------


def smoke_preset(options: RunOptions) -> RunOptions:
    """``--smoke``: the smallest sanity run. Models, precisions, engines, presets, steps,
    batches and batch size keep what was given; mode, data, epochs and repeats are fixed;
    ``--compile auto`` is off (compiling costs more than 4 steps measure)."""
    return replace(
        options,
        mode="throughput",
        data="synthetic",
        models=options.models or ["resnet18"],
        precisions=options.precisions or (["fp32", "amp-bf16"] if options.suite == "gpt" else ["fp32", "amp-bf16", "fp16-master"]),
        engines=options.engines or (["torch", "fastai"] if options.suite in ("cifar", "all") else None),
        presets=options.presets or ["apex-2018"],
        gpt_presets=options.gpt_presets or ["tiny"],
        epochs=1,
        # the gpt suite's smoke cells keep the tiny preset's own steps
        steps=options.steps or (None if options.suite == "gpt" else 4),
        max_batches=options.max_batches or 5,
        batch_size=options.batch_size or (None if options.batch_sizes else 32),
        repeats=1,
        find_max_batch=False,
        compile="eager" if options.compile == "auto" else options.compile,
        tolerance=None,
    )


def config_from_options(options: RunOptions, argv=None) -> RunConfig:
    """Every option of `kit run` checked in one place (UsageError, exit 2), before anything is
    printed or written, and turned into the run's RunConfig (``--smoke``: :func:`smoke_preset`)."""
    check_options(options)
    device = normalise_device(options.device)
    if options.smoke:
        options = smoke_preset(options)
    config = RunConfig(
        suite=options.suite,
        mode=options.mode,
        device=device,
        data=options.data,
        data_dir=str(options.data_dir),
        models=split_names(options.models, "--models"),
        precisions=split_names(options.precisions, "--precisions"),
        engines=split_names(options.engines, "--engines"),
        presets=split_names(options.presets, "--preset"),
        gpt_presets=split_names(options.gpt_presets, "--gpt-presets"),
        gpt=gpt_overrides(options),
        epochs=options.epochs,
        steps=options.steps,
        max_batches=options.max_batches,
        batch_size=options.batch_size,
        batch_sizes=parse_batch_sizes(options.batch_sizes),
        image_size=options.image_size,
        repeats=options.repeats,
        seed=options.seed,
        find_max_batch=options.find_max_batch,
        compile=options.compile,
        tolerance=options.tolerance,
        lstm=lstm_overrides(options),
        command_line=list(argv or []),
        isolate=options.isolate or "apex",
        learner=options.learner,
        **data_parallel_options(options),
    )
    check_engines(config)
    check_lstm_settings(config)
    check_gpt_settings(config)
    return config


def engines_of_suite(engines, suite: str) -> list:
    """The names in ``engines`` that are engines of ``suite`` (kit.results.schema.SUITE_ENGINES)."""
    from kit.results.schema import SUITE_ENGINES

    return [e for e in engines or () if e in SUITE_ENGINES.get(suite, ())]


def check_engines(config: RunConfig) -> None:
    """``--engines`` naming no engine of the run's suites (``--suite lstm --engines torch``) is refused in
    one line (exit 2), not run with the suite's default engines."""
    from kit.results.schema import SUITE_ENGINES

    if not config.engines:
        return
    suites = RUN_SUITES.get(config.suite, ())
    if not any(engines_of_suite(config.engines, s) for s in suites):
        allowed = [e for s in suites for e in SUITE_ENGINES.get(s, ())]
        raise UsageError(f"--engines {','.join(config.engines)}: no engine of --suite {config.suite}"
                         + (f"; choose from {', '.join(allowed)}" if allowed else " (its cells have one engine)"),
                         remedy="CIFAR: torch, fastai; LSTM: kit, graphed.")


def data_parallel_options(options: RunOptions) -> dict:
    """--gpus, --global-batch-size, --scaling as RunConfig fields (checked there)."""
    if options.global_batch_size is not None and options.batch_size is not None:
        raise UsageError("give --batch-size (per GPU) or --global-batch-size, not both.")
    return {"gpus": options.gpus, "global_batch_size": options.global_batch_size, "scaling": bool(options.scaling)}


def gpt_overrides(options: RunOptions) -> dict:
    """The GPT preset's overrides that were set (RunConfig.gpt)."""
    return {name: getattr(options, name) for name in GPT_OVERRIDES if getattr(options, name) is not None}


def check_gpt_settings(config: RunConfig) -> None:
    """Reject impossible GPT settings (--d-model not divisible by --n-heads, a --seq-len the
    corpus cannot fill, a precision the suite does not have) before any cell runs or anything
    is written: exit 2. fp8 belongs to the GPT suite only (the other suites would run it as
    plain bf16 under an fp8 name)."""
    from kit.runner.plan import DEFAULT_GPT_PRECISIONS

    if config.suite != "gpt":
        fp8 = [p for p in config.precisions if p.startswith("fp8-")]
        if fp8:
            raise UsageError(f"--precisions {','.join(fp8)}: fp8 training is measured by the gpt suite only.",
                             remedy="Run it with --suite gpt, or leave fp8 out for cifar, lstm and all.")
        return
    foreign = [p for p in config.precisions if p not in DEFAULT_GPT_PRECISIONS]
    if foreign:
        raise UsageError(f"--precisions {','.join(foreign)}: not a precision of the gpt suite (the fp16-master and Apex schemes are the 2019 comparisons').",
                         remedy=f"Choose from {', '.join(DEFAULT_GPT_PRECISIONS)}.")
    from kit.bench.gpt.config import resolve  # torch-free: presets and validation only
    from kit.runner.plan import build_plan

    for spec in build_plan(config).cells:
        resolve(spec.params, config.mode)


def lstm_overrides(options: RunOptions) -> dict:
    """The LSTM preset's overrides that were set (RunConfig.lstm, keyed as the preset's keys)."""
    return {name: getattr(options, name) for name in LSTM_OVERRIDES if getattr(options, name) is not None}


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


def check_batch_curve(options: RunOptions) -> None:
    """``--batch-sizes`` belongs to the CIFAR cells and replaces ``--batch-size``."""
    if options.batch_sizes is None:
        return
    if options.batch_size is not None:
        raise UsageError("--batch-size and --batch-sizes both given; a batch curve measures each cell at the sizes of --batch-sizes.",
                         remedy="Give one: --batch-size N for one size, or --batch-sizes N,M,... for a curve.")
    if options.suite not in ("cifar", "all"):
        raise UsageError(f"--batch-sizes measures the CIFAR cells; --suite {options.suite} has none.",
                         remedy="Use it with --suite cifar (or all: the LSTM cells keep their batch size).")
    parse_batch_sizes(options.batch_sizes)


def check_suite_options(options: RunOptions) -> None:
    """An option of another suite (--seq-len with --suite cifar, --models with --suite gpt) is
    refused, not silently ignored: the run would not measure what its command line says."""
    run = RUN_SUITES.get(options.suite, ())
    for spec in option_specs():
        if spec.suites and spec.name in options.given and not set(spec.suites) & set(run):
            owner = " and ".join(spec.suites)
            usable = [name for name, suites in RUN_SUITES.items() if set(spec.suites) & set(suites)]
            raise UsageError(f"{spec.flag} is an option of the {owner} suite{'s' if len(spec.suites) > 1 else ''}; --suite {options.suite} has no cell that reads it.",
                             remedy=f"Leave {spec.flag} out, or use it with --suite {', '.join(usable[:-1]) + ' or ' if len(usable) > 1 else ''}{usable[-1]}.")


def options_for_suite(options: RunOptions, suite: str) -> Tuple[RunOptions, List[str]]:
    """``options`` with those of other suites than ``suite`` left out (back to their defaults, no
    longer given), and the flags left out: what one suite's task of a sweep that shares its options
    between suites runs (kit.fleet.sweep). ``suite`` itself is not set."""
    run = RUN_SUITES.get(suite, ())
    foreign = [spec for spec in option_specs()
               if spec.suites and spec.name in options.given and not set(spec.suites) & set(run)]
    # --engines names each suite's own engines (torch, fastai; kit, graphed): a suite none of whose
    # engines it names runs its defaults, as if it had not been given
    if "engines" in options.given and not any(engines_of_suite(split_list(options.engines or [], "--engines"), s) for s in run):
        foreign += [spec for spec in option_specs() if spec.name == "engines" and spec not in foreign]
    if not foreign:
        return options, []
    names = {spec.name for spec in foreign}
    kept = replace(options, given=tuple(n for n in options.given if n not in names),
                   **{spec.name: spec.default for spec in foreign})
    return kept, [spec.flag for spec in foreign]


#: Options that shape no run (what this command does, not what the run measures): given with
#: --resume they keep their meaning. Every other option given with --resume must equal the
#: resumed run's own value (from its journal), or is refused: a resume measures the rest of the
#: run it continues, so its cells stay comparable with the finished ones.
RESUME_NEUTRAL = ("resume", "skip_checks", "dry_run")
_NO_FIELD = object()


def _run_value(config: RunConfig, name: str):
    """The resumed run's value of option ``name`` as RunConfig keeps it (_NO_FIELD: it keeps none)."""
    if name in LSTM_OVERRIDES:
        return config.lstm.get(name)
    if name in GPT_OVERRIDES:
        return config.gpt.get(name)
    if name == "smoke":  # a preset of many fields, not a field
        return _NO_FIELD
    return getattr(config, name, _NO_FIELD)


def _given_value(options: RunOptions, name: str):
    """Option ``name`` as RunConfig would keep it (lists split and checked, the device normalised)."""
    spec = next(s for s in option_specs() if s.name == name)
    value = getattr(options, name)
    if name == "batch_sizes":
        return parse_batch_sizes(value)
    if spec.kind == "list":
        return split_names(value, spec.flag)
    if name == "device":
        return normalise_device(value)
    if name == "data_dir":
        return str(value)
    if name == "isolate":
        return value or "apex"
    return value


def _shown(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def check_resume_options(options: RunOptions, config: RunConfig, run_dir: Path) -> None:
    """``kit run --resume DIR`` with other options: each must equal the resumed run's own
    (RESUME_NEUTRAL aside), else UsageError (exit 2) naming the option and the run's value.
    ``--results-dir`` must be the run folder's parent (a resumed run's bundle lands beside it)."""
    specs = {s.name: s for s in option_specs()}
    for name in options.given:
        if name in RESUME_NEUTRAL or name not in specs:
            continue
        flag = specs[name].flag
        remedy = f"Leave {flag} out: kit run --resume {run_dir} continues the run with its own options."
        if name == "results_dir":
            parent = Path(run_dir).resolve().parent
            if Path(options.results_dir).resolve() != parent:
                raise UsageError(f"--results-dir {options.results_dir} conflicts with the resumed run's folder: its "
                                 f"bundle goes beside it, in {parent}.", remedy=remedy)
            continue
        run = _run_value(config, name)
        if run is _NO_FIELD:
            raise UsageError(f"{flag} conflicts with the resumed run's options (from its journal: "
                             f"{' '.join(config.command_line[1:]) or 'not recorded'}); a resume keeps them.", remedy=remedy)
        given = _given_value(options, name)
        if isinstance(run, list) and isinstance(given, list) and not given and not run:
            continue
        if given != run:
            shown = "off" if run is False else ("unset" if run is None or run == [] else _shown(run))
            raise UsageError(f"{flag} {_shown(given)} conflicts with the resumed run's {flag} {shown}; "
                             "a resume measures the rest of the run with its own options.", remedy=remedy)


def check_options(options: RunOptions) -> None:
    """The checks RunConfig cannot make itself (it has no flags, paths or ranges of the CLI)."""
    check_suite_options(options)
    check_batch_curve(options)
    if options.compile not in COMPILE_CHOICES:
        raise UsageError(f"--compile must be {', '.join(COMPILE_CHOICES[:-1])} or {COMPILE_CHOICES[-1]}")
    if options.seed is not None and not 0 <= options.seed < 2 ** 31:
        raise UsageError(f"--seed {options.seed}: must be from 0 to 2147483647.")
    if options.tolerance is not None and options.tolerance < 0:
        raise UsageError(f"--tolerance {options.tolerance}: must be 0 or more.")
    data_dir = Path(options.data_dir)
    existing = nearest_existing(data_dir)
    if not existing.is_dir():
        where = "is a file" if existing == data_dir.absolute() else f"is under {existing}, a file"
        raise UsageError(f"--data-dir {data_dir}: {where}, not a folder.",
                         remedy="Point --data-dir (or KIT_DATA_DIR) at a folder; it is created if missing.")
    check_results_dir(options.results_dir)


def check_results_dir(path, create: bool = False) -> None:
    """A UsageError (exit 2) when runs cannot be written under ``path``.

    Without ``create`` nothing is touched: ``path`` (or its nearest existing parent)
    must be a folder this user may write in. With ``create`` the missing folders are
    made and a file written and removed there, which finds what a permission check
    cannot (``/proc``, a read-only mount); folders made for the probe are removed again,
    so a run that stops at a later check leaves nothing behind.
    """
    p = Path(path)
    flag = f"--results-dir {path}"
    existing = nearest_existing(p)
    if not existing.is_dir():
        raise UsageError(f"{flag}: {existing} is a file, not a folder.", remedy=_results_remedy())
    if not os.access(str(existing), os.W_OK | os.X_OK):
        raise UsageError(f"{flag}: {existing} is not writable by this user.", remedy=_results_remedy())
    if not create:
        return
    import tempfile

    made: List[Path] = []
    try:
        for folder in reversed([p.absolute(), *p.absolute().parents]):
            if not folder.exists():
                folder.mkdir()
                made.append(folder)
        with tempfile.TemporaryFile(dir=str(p)):
            pass
    except OSError as exc:
        raise DiskFull.from_os_error(exc, nearest_existing(p)) or UsageError(
            f"{flag}: cannot create a folder or write a file there ({exc.strerror or exc}).",
            remedy=_results_remedy()) from None
    finally:
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                pass


def nearest_existing(path: Path) -> Path:
    """``path`` itself when it exists, else its nearest parent that does."""
    existing = path.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return existing


def _results_remedy() -> str:
    from kit.runner.execute import RESULTS_DIR_REMEDY

    return RESULTS_DIR_REMEDY


def check_lstm_settings(config: RunConfig) -> None:
    """Reject bad LSTM overrides (e.g. --dropout 1.5) before any cell runs, not after the CIFAR cells."""
    if config.suite not in ("lstm", "all"):
        return
    from kit.bench.lstm.config import resolve  # torch-free: presets and validation only
    from kit.runner.plan import build_plan

    for spec in build_plan(config).cells:
        if spec.workload == "lstm":
            resolve(spec.params, config.mode)
