"""A `kit run` option as a field of a dataclass (:func:`option`: its flags, help, menu and check), and
what the front ends read of it (:class:`OptionSpec`, :func:`specs_of`).

`kit run`'s own options (kit.runner.options.RunOptions) and each suite's (the ``options`` class of its
descriptor, kit.results.suites) are made the same way, so `kit run` (Typer), the cuda10 front end and
`kit launch` (argparse), the run's config, the plan and the resume check read them alike. A suite's
options class is a plain dataclass in the suite's folder::

    @dataclass
    class ToyOptions:
        width: int = option(64, "Toy: the layer's width.", check=at_least(1))
        layers: Optional[List[str]] = option(None, "Toy: which layers (comma-separated).")

Annotations use typing's ``Optional``/``List`` (the cuda10 image reads them on Python 3.7). A field's
kind follows from its annotation: a value, a list (repeatable, comma-separated), a switch (``bool``),
or a yes/no/unset option (``Optional[bool]``, with the flag that says no in ``off``).

Python 3.7 syntax, torch-free.
"""

import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, List, Optional, Tuple

from kit.errors import UsageError

#: an option's ``absent`` when a run recorded without it means nothing of its own (its default)
NO_ABSENT = object()


def option(default=MISSING, help="", names=(), off="", choices=(), host_only=False, default_factory=MISSING,
           check=None, replaces=(), absent=NO_ABSENT, recorded_in=""):
    """A field of an options class: its default and what the command line shows of it.

    names        the flags, long one first (default ``--`` + the field's name with dashes);
    off          for a yes/no/unset option (``Optional[bool]``), the flag that says no;
    choices      offered as a fixed menu by `kit run` (Typer shows and checks them), checked by the
                 run's config for the other front ends;
    host_only    not taken by the cuda10 image's front end (it has no use there);
    check        ``check(value, flag)``: raises UsageError (exit 2) for a value the option refuses
                 (:func:`at_least`, :func:`one_of`); run on the value the run's config keeps;
    replaces     `kit run` options this one stands in for: given together they are refused, and
                 ``--smoke`` leaves them unset when this one is given (``--batch-sizes`` replaces
                 ``batch_size``);
    absent       what a run recorded before the option existed meant by it (its config has no value);
    recorded_in  where kits before suites owned their options kept it in a run's config: the name
                 of a dict of the config's (the preset overrides), "" at the top level.
    """
    meta = {"option": {"help": help, "names": tuple(names), "off": off, "choices": tuple(choices),
                       "host_only": host_only, "check": check, "replaces": tuple(replaces),
                       "absent": absent, "recorded_in": recorded_in}}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class OptionSpec:
    """One option as the command line sees it, from a field of an options class."""

    name: str          # the field's name
    kind: str          # "value" | "list" (repeatable) | "switch" (a flag) | "yes-no" (on/off flags, or unset)
    type: type         # of a value or list item: str, int, float or Path
    names: Tuple[str, ...]
    off: str
    help: str
    choices: Tuple[str, ...]
    host_only: bool
    default: object    # for default_factory fields, what it gives now
    #: the suites whose options class declares it (empty: one of `kit run`'s own)
    suites: Tuple[str, ...] = ()
    check: Optional[Callable[[Any, str], None]] = None
    replaces: Tuple[str, ...] = ()
    absent: object = NO_ABSENT
    recorded_in: str = ""

    @property
    def flag(self) -> str:
        return self.names[0]


def specs_of(cls: type, suites: Tuple[str, ...] = ()) -> List[OptionSpec]:
    """The options of an options class (``suites``: whose it is), in the order of its fields."""
    hints = typing.get_type_hints(cls)
    specs = []
    for f in fields(cls):
        meta = f.metadata.get("option")
        if meta is None:
            continue
        kind, typ = field_kind(hints[f.name])
        default = f.default_factory() if f.default is MISSING else f.default  # type: ignore[misc]
        specs.append(OptionSpec(f.name, kind, typ, meta["names"] or ("--" + f.name.replace("_", "-"),), meta["off"],
                                meta["help"], meta["choices"], meta["host_only"], default, tuple(suites),
                                meta["check"], meta["replaces"], meta["absent"], meta["recorded_in"]))
    return specs


def field_kind(annotation) -> Tuple[str, type]:
    """(kind, type of a value or list item) of an annotation: ``Optional[List[int]]`` -> ("list", int)."""
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


def type_problem(spec: OptionSpec, value: Any) -> Optional[str]:
    """What is wrong with the type of ``value`` for ``spec`` (a recorded config's), or None."""
    if value is None:
        return None if spec.default is None or spec.kind == "yes-no" else "null"
    items = value if spec.kind == "list" else [value]
    if spec.kind == "list" and not isinstance(value, list):
        return f"{type(value).__name__}, not a list"
    for item in items:
        if spec.type is bool:
            ok = isinstance(item, bool)
        elif spec.type is float:
            ok = isinstance(item, (int, float)) and not isinstance(item, bool)
        elif spec.type is int:
            ok = isinstance(item, int) and not isinstance(item, bool)
        else:
            ok = isinstance(item, str)
        if not ok:
            return f"{type(item).__name__}, not {spec.type.__name__}"
    return None


def recorded_options(cls: type, values: dict, where: str) -> Any:
    """An options class of the values a results file recorded at ``where``: each type checked (a
    UsageError naming it), names the class does not have left out."""
    kept = {}
    for spec in specs_of(cls):
        if spec.name in values:
            problem = type_problem(spec, values[spec.name])
            if problem:
                raise UsageError(f"{where}.{spec.name}: {problem}")
            kept[spec.name] = values[spec.name]
    return cls(**kept)


def recorded_before_options(cls: type, config: dict) -> dict:
    """The values of an options class in a run config recorded before suites owned their options:
    each at the config's top level or in its ``recorded_in`` dict; one it lacks takes its ``absent``
    value, if the option has one."""
    out = {}
    for spec in specs_of(cls):
        where = config.get(spec.recorded_in) if spec.recorded_in else config
        if isinstance(where, dict) and spec.name in where:
            out[spec.name] = where[spec.name]
        elif spec.absent is not NO_ABSENT:
            out[spec.name] = spec.absent
    return out


# -- checks an option can name --------------------------------------------------------------------


def at_least(low: int) -> Callable[[Any, str], None]:
    """A check: the value (each item of a list) is at least ``low``."""

    def check(value: Any, flag: str) -> None:
        for item in value if isinstance(value, list) else [value]:
            if item is not None and item < low:
                raise UsageError(f"{flag} must be at least {low}" + (f" (got {item})" if isinstance(value, list) else ""))

    return check


def one_of(*allowed: Any) -> Callable[[Any, str], None]:
    """A check: the value (each item of a list) is one of ``allowed``."""

    def check(value: Any, flag: str) -> None:
        for item in value if isinstance(value, list) else [value]:
            if item is not None and item not in allowed:
                shown = ", ".join(map(str, allowed[:-1])) + f" or {allowed[-1]}" if len(allowed) > 1 else str(allowed[0])
                raise UsageError(f"unknown {flag} {item!r}; choose {shown}")

    return check
