"""Each engine's revision (each suite's descriptor keeps its engines', with what each revision
changed), and the method record a cell carries.

An engine's revision is bumped whenever what it measures, or how, changes: a ratio between two of
its cells is a comparison of machines only when both were measured by the same revision with the
same settings (:mod:`kit.results.method` holds the rule and the record's form). A bump also bumps
the kit's version (``kit/__init__.py``) and gets a CHANGELOG.md entry; ``tests/test_methods.py``
checks both, and that the shipped references (``references/h100/``, ``references/h200/``) were
measured by today's revisions.

Torch-free: the tests, the docs and the record builders read it without the benchmark stack.
"""

from __future__ import annotations

from typing import Any

from kit.results import precisions as precision_modes
from kit.results import suites

def revisions() -> dict:
    """"suite/engine" -> (its revision today, the changelog: (revision, what it changed), oldest first),
    from each suite's descriptor (kit.results.suites: ``revisions``)."""
    return {f"{s.name}/{engine}": log for s in suites.all_suites() for engine, log in s.revisions.items()}


def host_paced() -> tuple:
    """The faithful engines ("suite/engine"), whose loop runs on the host step by step as the original
    tools' did: on a fast GPU the host sets their pace (the H200 reference: GPU busy 7-46% of the
    time), so their figures measure the host's CPU as much as the GPU; kit compare labels their cells
    "host-paced". Each suite's descriptor names its own (``host_paced``)."""
    return tuple(f"{s.name}/{engine}" for s in suites.all_suites() for engine in s.host_paced)


def revision(engine: str) -> int:
    """Today's revision of ``engine`` ("cifar/torch")."""
    return revisions()[engine][0]


def record(engine: str, settings: dict[str, Any], details: dict[str, Any] | None = None) -> dict:
    """The method record of a cell (kit.results.method's form): ``settings`` as the cell actually
    ran; ``details`` shown but not compared."""
    out: dict[str, Any] = {"engine": engine, "revision": revision(engine), "settings": dict(settings)}
    if engine in host_paced():
        out["paced_by"] = "host"
    if details:
        out["details"] = dict(details)
    return out


def loss_scale(precision: str, on_device: bool = False) -> str:
    """The loss-scale scheme of a precision mode, in the words the records use."""
    scheme = precision_modes.mode(precision).loss_scale  # kit.results.precisions
    if scheme == "dynamic":
        return "dynamic, on the device" if on_device else "dynamic"
    if scheme == "static or dynamic":  # the caller words the 2018 scheme's own choice where it knows it
        return "dynamic, decided on the host (the 2018 scheme)"
    return "none"


def warmup_excluded(repeats: list[dict], key: str = "warmup_steps") -> int | None:
    """The steps (or batches) each repeat left out of its steady state (the most, where repeats differ)."""
    values = [r.get(key) for r in repeats if isinstance(r.get(key), int)]
    return max(values) if values else None
