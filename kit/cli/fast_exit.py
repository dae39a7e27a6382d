"""How the command line ends after a command whose interpreter teardown is slow or can hang: at once.

A fleet's comparison is a million small objects; freeing them one by one and shutting Python down
is a tenth of `kit compare --index`'s time. A command hands such an object to
:func:`keep_until_exit`. `kit run` loads torch with CUDA and the profiler, whose teardown at
interpreter exit can hang after every file is written (a complete `kit run` of the `kit` LSTM engine on
an H100 sat more than six minutes after printing its bundle, until `timeout` stopped it:
references/h100/parts/logs/console-20261206-155202.log); it calls :func:`skip_teardown`.
:func:`kit.cli.main.main`, run as the command line, then ends the process with :func:`exit_now`, after
the command returns or fails. Called with arguments (as the tests call it), ``main`` returns as usual.
"""

from __future__ import annotations

import sys

#: what a command holds until the process ends (:func:`keep_until_exit`)
_KEPT: list = []
#: whether the command asked to end without the interpreter's teardown (:func:`skip_teardown`)
_SKIP_TEARDOWN = False
#: whether kit.cli.main.main runs as the command line (its arguments from ``sys.argv``), which ends
#: with :func:`exit_now` where something was kept
_COMMAND_LINE = False


def begin(command_line: bool) -> None:
    """A command starts: as the command line, or called in-process with its arguments (whatever an
    earlier in-process command asked, e.g. through Typer's test runner, which bypasses ``main``)."""
    global _COMMAND_LINE, _SKIP_TEARDOWN
    _COMMAND_LINE = command_line
    _SKIP_TEARDOWN = False


def ends_now() -> bool:
    """Whether the command line ends with :func:`exit_now`: the command kept something until the end,
    or asked to skip the interpreter's teardown."""
    return bool(_KEPT) or _SKIP_TEARDOWN


def release() -> None:
    """The command is over: drop what it kept (in-process callers go on)."""
    global _COMMAND_LINE, _SKIP_TEARDOWN
    _KEPT.clear()
    _COMMAND_LINE = _SKIP_TEARDOWN = False


def skip_teardown() -> None:
    """End the command line with :func:`exit_now` once the command returns or fails (its output is
    flushed, and a command that asks this writes its files whole before it returns): no library's
    teardown can hold the process after the work is done (in-process callers return as usual)."""
    global _SKIP_TEARDOWN
    _SKIP_TEARDOWN = True


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
