"""`kit run`'s command line parsed into RunOptions and rendered back (argparse), and the rules
that turn option values into what RunConfig keeps: comma lists, the device, batch sizes.

Python 3.7 syntax (the cuda10 image imports this module): typing's ``Optional``/``List``.
"""

import argparse
import re
from pathlib import Path
from typing import List

from kit.errors import UsageError
from kit.runner.option_fields import RunOptions, option_specs

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
