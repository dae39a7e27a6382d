"""The type rules of a results file: each dataclass field's check read from its annotation, the
per-repeat metric names (numbers, positive numbers, lists), and the SchemaError of a field that
breaks them (kit.results.schema's check_cell and check_results apply them)."""

from __future__ import annotations

import functools
import re
from dataclasses import MISSING, fields
from typing import Any

from kit.errors import SchemaError
from kit.results.cell_ids import cell_id

# --- type checks: one rule per field, read from the dataclasses' annotations ----------------------

def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: annotation (as written in kit.results.schema's dataclasses) -> (test, what it expects)
_RULES: dict[str, tuple[Any, str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "float": (_is_number, "a number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "dict": (lambda v: isinstance(v, dict), "an object"),
    "list": (lambda v: isinstance(v, list), "a list"),
}
#: containers: annotation -> (outer rule, rule for each element)
_CONTAINERS: dict[str, tuple[str, str | None]] = {
    "dict[str, Any]": ("dict", None),
    "dict[str, dict]": ("dict", "dict"),
    "list[str]": ("list", "str"),
    "list[int]": ("list", "int"),
    "list[dict]": ("list", "dict"),
}


def _check_value(value: Any, annotation: str, source: str, path: str) -> None:
    optional = annotation.endswith(" | None")
    base = annotation[: -len(" | None")] if optional else annotation
    if value is None and optional:
        return
    outer, inner = _CONTAINERS.get(base, (base, None))
    rule = _RULES.get(outer)
    if rule is None:
        return  # a dataclass-typed field: checked by its own rules
    if not rule[0](value):
        what = {"list[str]": "a list of strings", "list[dict]": "a list of objects",
                "dict[str, dict]": "an object of objects"}.get(base, rule[1])
        _fail(source, path, what + (" or null" if optional else ""), value)
    if inner is not None:
        test, what = _RULES[inner]
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if not test(item):
                _fail(source, f"{path}.{key}" if isinstance(value, dict) else f"{path}[{key}]", what, item)


#: Per-repeat metrics the reports and comparisons read: numbers (or null where not measured).
REPEAT_NUMBERS = (
    "epoch_seconds_median", "throughput_items_per_s", "time_to_first_step_s", "data_wait_s", "compute_s",
    "peak_memory_bytes", "overflow_steps", "nan_losses", "final_loss", "final_metric", "loss_scale_final",
    "steady_seconds", "steady_items", "steady_tokens", "warmup_steps", "warmup_batches", "steps",
    "achieved_tflops", "items_per_j", "fit_seconds", "train_batches_per_epoch", "num_workers", "seed", "repeat",
)
#: Per-repeat measures no run can produce as zero, negative, NaN or infinite (a time or a rate:
#: the timer and the counters give a positive finite number, or null where nothing was timed).
#: A results file holding another value was damaged or made by hand: refused, naming the field.
REPEAT_POSITIVE = ("epoch_seconds_median", "throughput_items_per_s", "steady_seconds", "time_to_first_step_s",
                   "fit_seconds", "epoch_seconds")
#: Per-repeat metrics that are a list of numbers (one per epoch)...
REPEAT_NUMBER_LISTS = ("epoch_seconds",)
#: ... or either a number or such a list.
REPEAT_NUMBER_OR_LISTS = ("energy_j_per_epoch",)
STATS_NUMBERS = ("median", "mean", "min", "max", "stdev", "cv")
#: A cell's knobs that comparisons line up across machines: integers (or null).
PARAM_INTEGERS = ("batch_size", "image_size", "epochs", "steps", "max_batches", "bptt", "seq_len")


def _fail(source: str, path: str, expected: str, value: Any) -> None:
    raise SchemaError(
        f"{source}: malformed results at {path}: expected {expected}, found {_kind(value)}",
        remedy="The file was damaged or edited by hand; use the results.json or bundle the kit wrote.",
    )


@functools.lru_cache(maxsize=None)
def _field_rules(cls: Any) -> tuple[tuple[str, str, bool], ...]:
    """(name, annotation as written, required) of each field of a dataclass, read once per class."""
    return tuple(
        (f.name, f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type)),
         f.default is MISSING and f.default_factory is MISSING)  # type: ignore[misc]
        for f in fields(cls))


@functools.lru_cache(maxsize=None)
def _field_names(cls: Any) -> frozenset:
    return frozenset(name for name, _, _ in _field_rules(cls))


@functools.lru_cache(maxsize=None)
def _compiled_rules(cls: Any) -> tuple:
    """Per field of a dataclass: (name, annotation, required, optional, test of the value, has an
    element rule): the annotation read once per class, not once per value (a fleet's comparison
    checks tens of thousands of cells)."""
    out = []
    for name, annotation, required in _field_rules(cls):
        optional = annotation.endswith(" | None")
        base = annotation[: -len(" | None")] if optional else annotation
        outer, inner = _CONTAINERS.get(base, (base, None))
        rule = _RULES.get(outer)
        out.append((name, annotation, required, optional, rule[0] if rule else None, inner is not None))
    return tuple(out)


def _check_fields(cls: Any, d: Any, source: str, path: str, may_lack: tuple[str, ...] = ()) -> None:
    """Each dataclass field present in ``d`` has its annotated type; required ones
    (but those in ``may_lack``) are present."""
    if not isinstance(d, dict):
        _fail(source, path, "an object", d)
    for name, annotation, required, optional, test, has_inner in _compiled_rules(cls):
        if name not in d:
            if required and name not in may_lack:
                raise SchemaError(f"{source}: malformed results at {path or 'the top level'}: "
                                  f"'{name}' is missing")
            continue
        value = d[name]
        if test is None or (value is None and optional) or (not has_inner and test(value)):
            continue  # what _check_value would pass without a word
        _check_value(value, annotation, source, f"{path}.{name}" if path else name)


_PLAIN_ID = re.compile(r"[A-Za-z0-9._/@=+-]{1,200}")


def _impossible(source: str, path: str, cell: dict, value: float) -> None:
    """SchemaError (exit 4) for a time or rate no run can produce (zero, negative, NaN, infinite, too
    large for a float)."""
    try:
        name = cell_id(cell["workload"], cell["model"], cell["precision"], cell["engine"], cell.get("params"))
    except (KeyError, TypeError, AttributeError):
        name = ""
    # a stranger's file: its cell id is shown only when it is plain (letters, digits, . _ / -)
    shown = f" (cell {name})" if _PLAIN_ID.fullmatch(name) else ""
    said = repr(value) if len(repr(value)) <= 40 else f"a number of {len(repr(value))} digits"
    raise SchemaError(
        f"{source}: impossible value at {path}{shown}: {said}; a time or a rate is positive and finite",
        remedy="The file was damaged or edited by hand; use the results.json or bundle the kit wrote.",
    )
