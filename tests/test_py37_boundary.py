"""The cuda10 image runs the kit's runner, bench code, bundle writer and report on
Python 3.7 (kit/runner/legacy.py). Every module of the kit must therefore parse as
Python 3.7: no walrus, no match, no positional-only parameters, no parenthesised
context managers. (What parses can still fail at run time on 3.7 or torch 1.4;
CI's container job runs the real cuda10 image for that.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[1] / "kit"
MODULES = sorted(KIT.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(KIT.parent)))
def test_module_parses_as_python_37(path):
    ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 7))


def test_the_guard_catches_newer_syntax():
    with pytest.raises(SyntaxError):
        ast.parse("if (n := 3):\n    pass\n", feature_version=(3, 7))


def test_no_runtime_only_3_8_plus_names_in_the_runner():
    """Names that parse on 3.7 but fail when called there (found while porting)."""
    banned = ("statistics.fmean", ".removeprefix(", ".removesuffix(", "from typing import Literal",
              "from importlib import metadata", "math.prod(", "functools.cached_property", "shlex.join(",
              "missing_ok=")
    offenders = []
    for path in MODULES:
        if "cli" in path.relative_to(KIT).parts or path.name == "compat.py":
            continue  # the command line never runs in the cuda10 image; compat.py holds the fallback
        text = path.read_text(encoding="utf-8")
        offenders += [f"{path.relative_to(KIT.parent)}: {b}" for b in banned if b in text]
    assert not offenders, offenders
