"""How the command line ends after a command that made something large: at once, without freeing it.

A fleet's comparison is a million small objects; freeing them one by one and shutting Python down
is a tenth of `kit compare --index`'s time. A command hands such an object to
:func:`keep_until_exit`; :func:`kit.cli.main.main`, run as the command line, then ends the process
with :func:`exit_now`. Called with arguments (as the tests call it), ``main`` returns as usual.
"""

from __future__ import annotations

import sys

#: what a command holds until the process ends (:func:`keep_until_exit`)
_KEPT: list = []
#: whether kit.cli.main.main runs as the command line (its arguments from ``sys.argv``), which ends
#: with :func:`exit_now` where something was kept
_COMMAND_LINE = False


def begin(command_line: bool) -> None:
    """A command starts: as the command line, or called in-process with its arguments."""
    global _COMMAND_LINE
    _COMMAND_LINE = command_line


def kept() -> bool:
    """Whether the command kept something until the end (the command line then ends with :func:`exit_now`)."""
    return bool(_KEPT)


def release() -> None:
    """The command is over: drop what it kept (in-process callers go on)."""
    global _COMMAND_LINE
    _KEPT.clear()
    _COMMAND_LINE = False


def keep_until_exit(obj: object) -> bool:
    """Hold ``obj`` until the process ends, where the command line then ends at once (:func:`exit_now`)
    instead of freeing it object by object. True where the process does end so (the command line;
    not ``main(argv)`` in a test): then nothing made before the end needs the garbage collector either."""
    _KEPT.append(obj)
    return _COMMAND_LINE


def exit_now(code: int) -> None:
    """End the process now, its output flushed: no freeing of what was kept, no interpreter shutdown
    (the kit registers no atexit handler; logging is shut down here). Only for the command line:
    ``main(argv)`` called with arguments (the tests) returns as usual."""
    import logging
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (kit compare ... | head): nothing more to say
            pass
    logging.shutdown()
    os._exit(code)
