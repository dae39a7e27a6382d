"""What the runner's fork server imports once per run (kit.runner.isolate), so that each cell's own
process starts with torch, torchvision and the bench already imported.

Each import is tried on its own and a failure is left alone here: multiprocessing's fork server skips
a preload that raises ImportError but dies on any other error (a torchvision built for another torch
raises RuntimeError), which would fail every isolated cell. A module that did not import here is
imported again in the cell's process, where its error is the cell's, with its message. Nothing here
initialises CUDA (the fork server's children must be the first to).
"""

from __future__ import annotations

import importlib

MODULES = ("torch", "torchvision", "kit.bench.api", "kit.bench.caps")


def load(names) -> dict:
    """Import each of ``names``; {name: why} for those that did not import (never raises)."""
    failed = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - see the module docstring
            failed[name] = f"{exc.__class__.__name__}: {exc}"
    return failed


#: what did not import in the fork server, and why (the cell's process imports it again itself)
FAILED = load(MODULES)
