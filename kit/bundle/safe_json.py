"""JSON from a stranger, parsed only when what it would build is known to be small.

``json.loads`` builds whatever the text describes: a few MiB of ``[[[[...`` nest past the
interpreter's recursion limit (a RecursionError), and 64 MiB of ``[],[],[],...`` become twenty
million lists (gigabytes). :func:`loads` counts first, without building anything: every value of
a JSON text but the first follows a comma or opens an array or object, so the number of commas and
opening brackets bounds the number of values (from above: those inside strings count too), in
three ``bytes.count`` passes. Text with more than :data:`MAX_VALUES` is refused before it is parsed
(:class:`TooLarge`, a ValueError). Nesting is limited while parsing (the parser's recursion limit
stops a bomb after a thousand levels, with nothing large built) and checked after: deeper than
:data:`MAX_DEPTH` is refused too.

The limits are far above what the kit writes: the largest results.json of the shipped references
(the H200 reference's, 1.4 MB) nests 10 levels deep and holds 37,000 values. At the limit, the
values take at most about 100 MB once parsed.
"""

from __future__ import annotations

import json
from typing import Any

#: the deepest nesting of arrays and objects a document may have
MAX_DEPTH = 64
#: the most values (numbers, strings, arrays, objects...) a document may hold: 27 times the largest
#: results.json the kit has written
MAX_VALUES = 1_000_000


class TooLarge(ValueError):
    """The text nests deeper, or holds more values, than the limits."""


def count_bound(data: bytes) -> int:
    """At least the number of values the JSON text ``data`` holds (commas and opening brackets,
    in strings too, plus one), counted without parsing it."""
    return data.count(b",") + data.count(b"[") + data.count(b"{") + 1


def depth(value: Any, limit: int) -> int:
    """The nesting of arrays and objects in ``value`` (a scalar: 0), walked without recursion and
    stopping once past ``limit``."""
    deepest, todo = 0, [(value, 1)]
    while todo and deepest <= limit:
        v, level = todo.pop()
        items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if items is None:
            continue
        deepest = max(deepest, level)
        todo.extend((x, level + 1) for x in items if isinstance(x, (dict, list)))
    return deepest


def loads(data: bytes, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> Any:
    """``json.loads`` of UTF-8 text whose values are fewer than ``max_values`` (counted first) and
    whose nesting is at most ``max_depth``; :class:`TooLarge` otherwise, UnicodeDecodeError for bytes
    that are not UTF-8 and json's own errors (ValueError) for text that is not JSON."""
    if count_bound(data) > max_values:
        raise TooLarge(f"it holds more than {max_values:,} values, more than the kit reads")
    too_deep = f"it nests more than {max_depth} levels deep, deeper than the kit reads"
    try:
        value = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise TooLarge(too_deep) from None
    if depth(value, max_depth) > max_depth:
        raise TooLarge(too_deep)
    return value
