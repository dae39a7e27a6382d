"""The run folder's log file (run.log): attached to the ``kit`` logger while a run executes."""

from __future__ import annotations

import logging
from pathlib import Path

from kit.results.atomic import LogFileHandler

_handler: logging.Handler | None = None


def _attach_log(path: Path) -> None:
    global _handler
    _handler = LogFileHandler(path, encoding="utf-8")
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("kit")
    root.setLevel(logging.INFO)
    root.addHandler(_handler)


def _detach_log() -> None:
    global _handler
    if _handler is not None:
        logging.getLogger("kit").removeHandler(_handler)
        _handler.close()
        _handler = None
