"""One error family for everything the kit reports to a user.

Library code raises a subclass of :class:`KitError` with a message written for
the person at the terminal (what went wrong, and what to do about it). The CLI
catches the family, prints the message without a traceback and exits with the
class's ``exit_code``. The codes are documented in docs/troubleshooting.md ("Exit codes").
"""

from __future__ import annotations

import errno
import os
import re


class KitError(Exception):
    """Base of every error the kit reports to a user."""

    exit_code = 1
    #: A short, optional hint printed under the message ("Try: ...").
    remedy: str | None = None

    def __init__(self, message: str, remedy: str | None = None):
        super().__init__(message)
        if remedy is not None:
            self.remedy = remedy

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.__class__.__name__


class UsageError(KitError):
    """Options that do not make sense together, an unknown model, and so on."""

    exit_code = 2


class DataError(KitError):
    """A data set is missing, corrupt, truncated or in the wrong layout."""

    exit_code = 3


class DownloadError(DataError):
    """Every mirror failed (offline, refused, wrong checksum)."""

    exit_code = 3


class SchemaError(KitError):
    """A results file or bundle written with another schema version, or malformed."""

    exit_code = 4


#: The remedy for a file (results, bundle, index) written by a newer kit. The kit is installed from
#: its clone (no package index has it), and `make run` rebuilds its image when the code changed.
NEWER_KIT_REMEDY = ("Read it with a newer kit: in the kit's clone, git pull and pip install . "
                    "(make run rebuilds its image after the pull by itself).")


class BundleError(KitError):
    """A bundle failed verification or looks malicious."""

    exit_code = 5


class EnvironmentCheckError(KitError):
    """The host cannot run what was asked (driver too old, no GPU, no toolkit)."""

    exit_code = 6


class DockerError(KitError):
    """The Docker engine is unreachable, refused, or a build/run failed."""

    exit_code = 7


class RunFailed(KitError):
    """A benchmark run failed (the partial results are kept)."""

    exit_code = 8


class RegressionDetected(KitError):
    """``kit compare --fail-if-slower`` found a significant slowdown."""

    exit_code = 9


class NothingTested(KitError):
    """``kit compare --fail-if-slower`` could test no cell (one repeat, or no cell measured the same
    way on both sides): a gate that tested nothing does not pass."""

    exit_code = 11


class DiskFull(KitError):
    """No space left (ENOSPC) or over the quota (EDQUOT) where the kit writes. Every file the
    kit writes is written whole or not at all (kit.results.atomic) and the journal loses at
    most its last line, so what was written before stays valid."""

    exit_code = 10
    #: the errno values that mean "the disk (or the user's quota) is full"
    ERRNOS = frozenset(e for e in (getattr(errno, "ENOSPC", None), getattr(errno, "EDQUOT", None)) if e is not None)

    @classmethod
    def from_os_error(cls, exc: BaseException, folder: "str | os.PathLike | None" = None) -> "DiskFull | None":
        """The one-line error for ``exc`` when it is a full disk or quota, naming ``folder`` (else
        the folder of the file the error names) and its free space; None for any other error."""
        if not isinstance(exc, OSError) or exc.errno not in cls.ERRNOS:
            return None
        if folder is None and exc.filename:
            folder = os.path.dirname(os.path.abspath(os.fsdecode(exc.filename)))
        what = "over the disk quota" if exc.errno == getattr(errno, "EDQUOT", None) else "no space left on the device"
        where = f" writing in {folder}" if folder else ""
        free = _free_space(folder) if folder else None
        # a run's own folder is named by the runner, which knows it (kit.runner.execute.disk_full_remedy)
        return cls(f"{what}{where}" + (f" ({free} free)" if free else "") + "; what was written before stays valid.",
                   remedy="Free some space (or choose another folder) and run again.")


def _free_space(folder: "str | os.PathLike") -> str | None:
    import shutil

    try:
        free = shutil.disk_usage(os.fspath(folder)).free
    except OSError:
        return None
    if free < 1024:
        return f"{free} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        free /= 1024
        if free < 1024 or unit == "GiB":
            break
    return f"{free:.1f} {unit}"


class Interrupted(KitError):
    """The user pressed Ctrl-C (SIGINT); finished results were kept."""

    exit_code = 130


class Terminated(Interrupted):
    """The run was stopped by SIGTERM (``docker stop``, ``kill``); finished results were kept."""

    exit_code = 143


class TimeLimitReached(Interrupted):
    """The run stopped at its ``--time-limit`` (before a cell that would not finish by it, or at the
    limit itself, as at Ctrl-C); finished results were kept. 124, as GNU ``timeout`` ends."""

    exit_code = 124


EXIT_CODES: dict[int, str] = {
    0: "success",
    1: "other kit error",
    2: "bad options or arguments",
    3: "data set missing, corrupt or not downloadable",
    4: "results file, bundle or results index in an unknown schema version, or malformed (also figures no device can measure)",
    5: "bundle failed verification or was rejected as unsafe",
    6: "environment check failed (driver, GPU, container toolkit, or the benchmark stack is not installed or does not import)",
    7: "Docker engine unreachable, or an image build / container run failed",
    8: "a benchmark run failed (partial results kept)",
    9: "compare --fail-if-slower found a significant slowdown",
    10: "no space left on the device (or over the disk quota) where the kit writes; what was written stays valid",
    11: "compare --fail-if-slower could test no cell (one repeat, or no cell measured the same way on both sides)",
    124: "kit run stopped at its --time-limit (finished results kept; --resume goes on), or did not start: its first cell would not fit",
    130: "interrupted with Ctrl-C, SIGINT (finished results kept)",
    143: "terminated by SIGTERM (finished results kept; the journal names the signal)",
}


#: pydantic's prefix on a validator's message, which Typer (0.29, with pydantic 2) leaves in
#: its usage errors: "Invalid value for '--suite': Value error, 'nope' is not one of ..."
_PARSER_PREFIX = re.compile(r"\b(?:Value|Assertion) error, ")


def without_parser_prefix(message: str) -> str:
    """A usage error's message without the option parser's internals."""
    return _PARSER_PREFIX.sub("", message)
