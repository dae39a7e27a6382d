"""The container's exit code and log, read on the host: the same error class and exit
code as `kit run` would give, with the kit's own message and remedy where it printed one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from kit.errors import (
    DataError,
    EXIT_CODES,
    EnvironmentCheckError,
    KitError,
    RunFailed,
    UsageError,
    without_parser_prefix,
)
from kit.launch.container import LOG_TAIL_LINES

#: Exit codes of the kit in the container that mean the same on the host (the
#: docs/troubleshooting.md's table): `kit launch` ends with the same code and error class, so
#: `kit launch -- --suite nope` is a usage error (2) like `kit run --suite nope`.
#: Any other non-zero code is "the run failed" (8).
PASSED_THROUGH: dict[int, type[KitError]] = {2: UsageError, 3: DataError, 6: EnvironmentCheckError}

_ERROR_LINE = re.compile(r"^(?:Error|error|[\w.]+: error): (?P<text>.+)$")
_REMEDY_LINE = re.compile(r"^what to do: (?P<text>.+)$")
def clean_error_text(text: str) -> str:
    """An error line without the parser's internals (pydantic's "Value error, ")."""
    return without_parser_prefix(text).strip()


def error_from_log(lines: Sequence[str]) -> tuple[str | None, str | None]:
    """(message, remedy) of the last error the kit (or Click, or argparse) printed
    in the container's log, or (None, None) when there is none."""
    message = remedy = None
    for i, raw in enumerate(lines):
        m = _ERROR_LINE.match(raw.strip())
        if m:
            message, remedy = clean_error_text(m.group("text")), None
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            r = _REMEDY_LINE.match(nxt)
            if r:
                remedy = r.group("text").strip()
    return message, remedy


def container_error(exit_code: int, stack: str, tail: Sequence[str], run_dir: Path | None, bundle: Path | None,
                    resume: str | None = None) -> KitError:
    """The host-side error for a container that exited with ``exit_code`` (not 0, 124, 130 or 143);
    ``resume``: the command that continues the run (kit.launch.resume.resume_command)."""
    kept = (f" Finished cells are kept in {run_dir}." if run_dir else "") + (f" Bundle: {bundle}." if bundle else "")
    cls = PASSED_THROUGH.get(exit_code)
    if cls is UsageError:
        message, remedy = error_from_log(tail)
        return UsageError(
            f"kit run in the {stack} container refused its options: {message or 'see its log above'}" + kept,
            remedy=remedy or "Fix the options after `--` (they go to `kit run` in the container; `kit run --help` lists them).",
        )
    text = "\n".join(clean_error_text(t) for t in tail) or "(the container printed nothing)"
    meaning = EXIT_CODES.get(exit_code, "see the log")
    what = "stopped" if cls is not None else "failed"
    message = (f"The run in the {stack} container {what} (exit code {exit_code}: {meaning})." + kept
               + f"\nLast {LOG_TAIL_LINES} lines of the container's log:\n{text}")
    if cls is not None:
        _, remedy = error_from_log(tail)
        return cls(message, remedy=remedy or "Fix what the log says and run again.")
    return RunFailed(
        message,
        remedy="Fix what the log says and run again" + (f"; finished cells are skipped with: {resume}" if resume else ""),
    )
