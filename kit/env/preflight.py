"""Checks run before `kit run` / `kit launch` start anything (placeholder; see issue 5)."""

from __future__ import annotations


def check_native_run(device: str, console=None) -> None:
    return None
