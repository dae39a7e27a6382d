"""SIGTERM (``docker stop``, kill) turned into a KeyboardInterrupt for the run's process only,
never for its forked children, and the name of the signal that stopped the run; ``--time-limit``'s
stop (:func:`arm_time_limit`: SIGALRM at the limit, as Ctrl-C; :func:`stop_at_time_limit` before a
cell that would not finish in time) is recorded the same way.

Ctrl-C (SIGINT) raises KeyboardInterrupt as Python's own handler does, and is also recorded: a
KeyboardInterrupt raised where Python cannot pass it on (a weakref or ``__del__`` callback, which
PyTorch's compiler runs: "Exception ignored in ... KeyboardInterrupt") is lost, and the run would go
on measuring. Every engine asks whether to stop before each step (``CellContext.should_stop``, which is
:func:`stop_requested`), and the run asks before each cell."""

from __future__ import annotations

import os
import signal
import sys
import time

#: what _signals_received records for a stop at ``--time-limit`` (the journal's ``signal``)
TIME_LIMIT = "time-limit"

#: names of the stops (SIGTERM, SIGINT, TIME_LIMIT) that reached the run in this process
_signals_received: list[str] = []
#: the words on a time-limit stop: the limit, and the cell not started, if any
_time_limit_words: list[str] = []


def _stop_reason() -> tuple[str, str]:
    """(signal name, the words for the journal and the message) for the interrupt just caught: a
    SIGTERM first, then the time limit, then Ctrl-C."""
    terms = [n for n in _signals_received if n not in ("SIGINT", TIME_LIMIT)]
    if terms:
        return terms[-1], f"terminated ({terms[-1]})"
    if TIME_LIMIT in _signals_received:
        return TIME_LIMIT, "stopped at its time limit" + (f" ({'; '.join(_time_limit_words)})" if _time_limit_words else "")
    return "SIGINT", "interrupted (Ctrl-C)"


def reset_stops(limit_words: "str | None" = None) -> None:
    """A run starts (or has ended): no stop recorded; ``limit_words`` name its time limit in a stop's
    message (e.g. "--time-limit 9m")."""
    del _signals_received[:]
    _time_limit_words[:] = [limit_words] if limit_words else []


def arm_time_limit(deadline: float) -> None:
    """At ``deadline`` (time.monotonic()), stop the run as Ctrl-C does: SIGALRM, in this process (a
    forked child inherits no timer). Call from the main thread, after :func:`_install_stop_handlers`;
    :func:`disarm_time_limit` ends it."""
    previous = signal.signal(signal.SIGALRM, _time_up)
    if previous is not _time_up:
        _alarm_before[:] = [signal.SIG_DFL if previous is None else previous]  # None: set from C
    signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 0.001))


def disarm_time_limit() -> None:
    """No time limit any more: the timer off, SIGALRM's handler as it was before :func:`arm_time_limit`."""
    signal.setitimer(signal.ITIMER_REAL, 0)
    if signal.getsignal(signal.SIGALRM) is _time_up:
        signal.signal(signal.SIGALRM, _alarm_before.pop() if _alarm_before else signal.SIG_DFL)


#: SIGALRM's handler before the time limit's
_alarm_before: list = []


def _time_up(signum, frame) -> None:
    """The limit: recorded, then a KeyboardInterrupt. Nothing when the run is already stopping (a stop
    is recorded: it keeps its own reason); no interrupt where an exception is being handled (the run's
    own handlers may be writing down a stop): the run asks before each step and each cell
    (:func:`stop_requested`) and stops there."""
    if _signals_received:
        return
    _signals_received.append(TIME_LIMIT)
    if sys.exc_info()[0] is None:
        raise KeyboardInterrupt("time limit")


def stop_at_time_limit(words: str) -> None:
    """Stop the run before a cell that would not finish by the limit (``words`` say which, and why)."""
    _time_limit_words.append(words)
    _signals_received.append(TIME_LIMIT)
    raise KeyboardInterrupt("time limit")


def stop_requested() -> bool:
    """Whether a stop signal reached the run, whether or not its KeyboardInterrupt got through."""
    return bool(_signals_received)


def _raise_interrupt(signum, frame) -> None:
    _signals_received.append(signal.Signals(signum).name)
    raise KeyboardInterrupt(f"signal {signum}")


def _ours() -> bool:
    return signal.getsignal(signal.SIGTERM) is _raise_interrupt


def _before_fork() -> None:
    # hold SIGTERM back across fork(): one that arrived in the child before the
    # reset below would still meet the inherited handler
    if _ours():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _after_fork_in_parent() -> None:
    if _ours():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _after_fork_in_child() -> None:
    """In a forked child (a DataLoader worker), SIGTERM kills again.

    PyTorch stops a worker that is slow to exit with SIGTERM; a worker that had
    inherited :func:`_raise_interrupt` turned that into a KeyboardInterrupt at an
    arbitrary point (once inside ``logging``'s at-fork hook) and could die in a
    way its parent reported as "DataLoader worker exited unexpectedly".
    """
    if _ours():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if signal.getsignal(signal.SIGINT) is _raise_interrupt:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if signal.getsignal(signal.SIGALRM) is _time_up:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


_AT_FORK_REGISTERED = False


def _install_stop_handlers():
    """SIGTERM -> KeyboardInterrupt in this process only, and Ctrl-C recorded as it raises one (where
    it still raises one: a SIGINT the caller ignores stays ignored); returns the previous handlers,
    for :func:`_restore_handlers`."""
    global _AT_FORK_REGISTERED
    if not _AT_FORK_REGISTERED:
        os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                            after_in_child=_after_fork_in_child)
        _AT_FORK_REGISTERED = True
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:
        signal.signal(signal.SIGINT, _raise_interrupt)
    return signal.signal(signal.SIGTERM, _raise_interrupt), previous_int


def _restore_handlers(previous) -> None:
    term, sigint = previous
    signal.signal(signal.SIGTERM, term)
    if signal.getsignal(signal.SIGINT) is _raise_interrupt:
        signal.signal(signal.SIGINT, sigint)
