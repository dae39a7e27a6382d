"""The checks of `kit run`'s options (exit 2 before anything is written) and the RunConfig a run
gets from them (:func:`config_from_options`): the suite, options of another suite, engines,
precisions, an option given with the one it replaces, paths, and the options given with ``--resume``;
and :func:`options_for_suite`, the suite rule's other use. Each suite's options pass their own checks
in the config (kit.results.option_fields), and each suite checks its cells' settings as the plan is
built (kit.runner.plan).

Python 3.7 syntax (the cuda10 image imports this module): typing's ``Optional``/``List``.
"""

import os
import re
from dataclasses import fields, replace
from pathlib import Path
from typing import List, Tuple

from kit.errors import DiskFull, UsageError
from kit.results.schema import RunConfig
from kit.results.schema_names import COMPILE_CHOICES
from kit.results import suites
from kit.results.option_fields import OptionSpec, specs_of
from kit.runner.options import RunOptions, normalise_device, option_specs, smoke_preset, split_list, split_names

def engines_of_suite(engines, suite: str) -> list:
    """The names in ``engines`` that are engines of ``suite`` (its descriptor, kit.results.suites)."""
    return [e for e in engines or () if e in suites.suite(suite).engines]


def check_engines(config: RunConfig) -> None:
    """``--engines`` naming no engine of the run's suites (``--suite lstm --engines torch``) is refused in
    one line (exit 2), not run with the suite's default engines."""
    if not config.engines:
        return
    run = suites.run_names(config.suite)
    if not any(engines_of_suite(config.engines, s) for s in run):
        allowed = [e for s in run for e in suites.suite(s).engines if len(suites.suite(s).engines) > 1]
        choosable = [s for s in suites.all_suites() if len(s.engines) > 1]
        raise UsageError(f"--engines {','.join(config.engines)}: no engine of --suite {config.suite}"
                         + (f"; choose from {', '.join(allowed)}" if allowed else " (its cells have one engine)"),
                         remedy="; ".join(f"{s.name}: {', '.join(s.engines)}" for s in choosable) + ".")


def check_precisions(config: RunConfig) -> None:
    """A precision that a suite of the run does not measure is refused (exit 2), not run: fp8 outside
    the gpt suite (the others would train plain bf16 under an fp8 name), the 2018 schemes in the gpt
    suite (kit.results.precisions: each row names the suites it belongs to)."""
    from kit.results.precisions import defaults, mode

    for s in suites.run_names(config.suite):
        foreign = [p for p in config.precisions if p not in defaults(s)]
        if foreign:
            owners = sorted({o for p in foreign for o in mode(p).suites})
            raise UsageError(f"--precisions {','.join(foreign)}: not a precision of the {s} suite"
                             + (f" (measured by the {' and '.join(owners)} suite{'s' if len(owners) > 1 else ''} only)." if owners else "."),
                             remedy=f"Choose from {', '.join(defaults(s))}"
                             + (f", or run {'them' if len(foreign) > 1 else 'it'} with --suite {owners[0]}." if owners else "."))


def check_replaced(options: RunOptions) -> None:
    """An option given with one it replaces (``--batch-sizes`` with ``--batch-size``) is refused: the
    run would measure only one of them."""
    specs = {spec.name: spec for spec in option_specs()}
    for spec in specs.values():
        for other in spec.replaces:
            if options.value(spec.name) != spec.default and options.value(other) is not None:
                them = specs[other].flag
                raise UsageError(f"{them} and {spec.flag} both given; {spec.flag} stands in for {them}.",
                                 remedy=f"Give one of them: {them} or {spec.flag}.")


def check_suite(options: RunOptions) -> None:
    """``--suite`` names a suite, ``all``, or a plugin that loads (a broken one: its own line)."""
    if options.suite in suites.choices():
        return
    problem = suites.broken().get(options.suite)
    if problem:
        raise UsageError(problem, remedy="Fix or uninstall the plugin; `kit run --help` lists the suites that load.")
    raise UsageError(f"unknown suite {options.suite!r}; choose {', '.join(suites.choices())}",
                     remedy="A suite of your own is a plugin in a package of yours (docs/your-model.md).")


def check_suite_options(options: RunOptions) -> None:
    """An option of another suite (--seq-len with --suite cifar, --models with --suite gpt) is
    refused, not silently ignored: the run would not measure what its command line says."""
    run = suites.run_names(options.suite)
    for spec in option_specs():
        if spec.suites and spec.name in options.given and not set(spec.suites) & set(run):
            owner = " and ".join(spec.suites)
            usable = [name for name in suites.choices() if set(spec.suites) & set(suites.run_names(name))]
            raise UsageError(f"{spec.flag} is an option of the {owner} suite{'s' if len(spec.suites) > 1 else ''}; --suite {options.suite} has no cell that reads it.",
                             remedy=f"Leave {spec.flag} out, or use it with --suite {', '.join(usable[:-1]) + ' or ' if len(usable) > 1 else ''}{usable[-1]}.")


def options_for_suite(options: RunOptions, suite: str) -> Tuple[RunOptions, List[str]]:
    """``options`` with those of other suites than ``suite`` left out (back to their defaults, no
    longer given), and the flags left out: what one suite's task of a sweep that shares its options
    between suites runs (kit.fleet.sweep). ``suite`` itself is not set."""
    run = suites.run_names(suite)
    foreign = [spec for spec in option_specs()
               if spec.suites and spec.name in options.given and not set(spec.suites) & set(run)]
    # --engines names each suite's own engines (torch, fastai; kit, graphed): a suite none of whose
    # engines it names runs its defaults, as if it had not been given
    if "engines" in options.given and not any(engines_of_suite(split_list(options.engines or [], "--engines"), s) for s in run):
        foreign += [spec for spec in option_specs() if spec.name == "engines"]
    if not foreign:
        return options, []
    names = {spec.name for spec in foreign}
    kept = replace(options.replaced(**{spec.name: spec.default for spec in foreign}),
                   given=tuple(n for n in options.given if n not in names))
    return kept, [spec.flag for spec in foreign]


#: Options that shape no run (what this command does, not what the run measures): given with
#: --resume they keep their meaning. Every other option given with --resume must equal the
#: resumed run's own value (from its journal), or is refused: a resume measures the rest of the
#: run it continues, so its cells stay comparable with the finished ones.
RESUME_NEUTRAL = ("resume", "skip_checks", "dry_run", "time_limit")
_NO_FIELD = object()


def _run_value(config: RunConfig, spec: OptionSpec):
    """The resumed run's value of an option as its config keeps it (_NO_FIELD: it keeps none)."""
    if spec.name == "smoke":  # a preset of many fields, not a field
        return _NO_FIELD
    if not spec.suites:
        return getattr(config, spec.name, _NO_FIELD)
    for suite in suites.run_names(config.suite):
        own = config.options_of(suite) if suite in spec.suites else None
        if own is not None:
            return getattr(own, spec.name)
    return _NO_FIELD


def as_config(options: RunOptions, name: str):
    """Option ``name`` as the run's config keeps it (lists split and checked, items of the option's
    type, the device normalised): the one rule from an option to the run's config."""
    spec = next(s for s in option_specs() if s.name == name)
    value = options.value(name)
    if spec.kind == "list":
        return [_item(spec, x, value) for x in split_names(value, spec.flag)] if value is not None else (
            [] if not spec.suites else None)
    if name == "device":
        return normalise_device(value)
    if name == "data_dir":
        return str(value)
    if name == "isolate":
        return value or "apex"
    if name == "profile_window":
        return value  # None: on where the cells run on a GPU (RunConfig.profiles)
    return value


def _item(spec: OptionSpec, text: str, given) -> object:
    """One item of a list option in its type (a whole number for ``List[int]``), or a UsageError."""
    if spec.type is int:
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            shown = ",".join(split_list(given, spec.flag))
            raise UsageError(f"{spec.flag} {shown}: {text!r} is not a whole number.",
                             remedy=f"List whole numbers, comma-separated, e.g. {spec.flag} 256,512")
        return int(text)
    if spec.type is float:
        try:
            return float(text)
        except ValueError:
            raise UsageError(f"{spec.flag}: {text!r} is not a number.") from None
    return text


def suite_options(options: RunOptions) -> dict:
    """Each suite of the run's own options, as its config keeps them (:func:`as_config` of each)."""
    out = {}
    for s in suites.run_by(options.suite):
        if s.options is not None:
            names = [spec.name for spec in specs_of(s.options)]
            out[s.name] = replace(options.own[s.name], **{n: as_config(options, n) for n in names})
    return out


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
        run = _run_value(config, specs[name])
        if run is _NO_FIELD:
            raise UsageError(f"{flag} conflicts with the resumed run's options (from its journal: "
                             f"{' '.join(config.command_line[1:]) or 'not recorded'}); a resume keeps them.", remedy=remedy)
        given = as_config(options, name)
        if isinstance(run, list) and isinstance(given, list) and not given and not run:
            continue
        if given != run:
            shown = ("off" if run is False else "the default" if run is None and name == "profile_window"
                     else "unset" if run is None or run == [] else _shown(run))
            raise UsageError(f"{flag} {_shown(given)} conflicts with the resumed run's {flag} {shown}; "
                             "a resume measures the rest of the run with its own options.", remedy=remedy)


def check_options(options: RunOptions) -> None:
    """The checks RunConfig cannot make itself (it has no flags, paths or ranges of the CLI)."""
    check_suite(options)
    check_suite_options(options)
    check_replaced(options)
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


#: `kit run`'s options that shape this command, not the run: its config keeps no field of them
NOT_IN_CONFIG = ("results_dir", "resume", "time_limit", "smoke", "skip_checks", "dry_run")


def config_from_options(options: RunOptions, argv=None) -> RunConfig:
    """Every option of `kit run` checked in one place (UsageError, exit 2), before anything is
    printed or written, and turned into the run's RunConfig (``--smoke``: its preset first): each
    of `kit run`'s own options to its RunConfig field, each suite's to the options of the suites of
    the run that have it (RunConfig.suite_options), by the one rule :func:`as_config` (which
    ``--resume``'s check uses too). An option of `kit run` that its config has no field for (nor
    NOT_IN_CONFIG names) is an error of the kit, never a silent drop."""
    check_options(options)
    if options.smoke:
        options = smoke_preset(options)
    if options.global_batch_size is not None and options.batch_size is not None:
        raise UsageError("give --batch-size (per GPU) or --global-batch-size, not both.")
    kept = {f.name for f in fields(RunConfig)}
    own = [spec.name for spec in option_specs() if not spec.suites and spec.name not in NOT_IN_CONFIG]
    dropped = [name for name in own if name not in kept]
    if dropped:
        raise TypeError(f"kit run's option(s) {', '.join(dropped)} have no RunConfig field (kit.results.schema)")
    config = RunConfig(**{name: as_config(options, name) for name in own}, suite_options=suite_options(options),
                       command_line=list(argv or []))
    check_engines(config)
    check_precisions(config)
    return config
