"""SIGTERM (``docker stop``, kill) turned into a KeyboardInterrupt for the run's process only,
never for its forked children, and the name of the signal that stopped the run.

Ctrl-C (SIGINT) raises KeyboardInterrupt as Python's own handler does, and is also recorded: a
KeyboardInterrupt raised where Python cannot pass it on (a weakref or ``__del__`` callback, which
PyTorch's compiler runs: "Exception ignored in ... KeyboardInterrupt") is lost, and the run would go
on measuring. Every engine asks whether to stop before each step (``CellContext.should_stop``, which is
:func:`stop_requested`), and the run asks before each cell."""

from __future__ import annotations

import os
import signal


#: names of the stop signals (SIGTERM, SIGINT) that arrived during the run in this process
_signals_received: list[str] = []


def _stop_reason() -> tuple[str, str]:
    """(signal name, the words for the journal and the message) for the interrupt just caught."""
    terms = [n for n in _signals_received if n != "SIGINT"]
    if terms:
        return terms[-1], f"terminated ({terms[-1]})"
    return "SIGINT", "interrupted (Ctrl-C)"


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
