"""The environment record attached to every result (placeholder; see issue 5)."""

from __future__ import annotations

import platform
import sys

from kit import __version__


def collect(config=None) -> dict:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "kit_version": __version__,
        "command_line": list(getattr(config, "command_line", []) or []),
    }
