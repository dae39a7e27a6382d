"""The one shape every environment probe uses for a value it could not get.

A probe that fails records ``{"value": "unknown", "reason": "<why>"}`` in
place of the value, everywhere in the environment record, the doctor report
and the telemetry summary. It never writes an empty string, a zero or a
guess. Readers test with :func:`is_unknown`.
"""

from __future__ import annotations

from typing import Any, Callable

UNKNOWN = "unknown"


def unknown(reason: str) -> dict[str, str]:
    return {"value": UNKNOWN, "reason": reason}


def is_unknown(value: Any) -> bool:
    return isinstance(value, dict) and value.get("value") == UNKNOWN and "reason" in value


def known(value: Any, default: Any = None) -> Any:
    """The value itself, or ``default`` when it is an unknown marker."""
    return default if is_unknown(value) else value


def describe_exception(exc: BaseException) -> str:
    """'NVMLError_NotSupported: Not Supported' -- class and message, for a reason field."""
    text = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {text}" if text and text != name else name


def attempt(fn: Callable[..., Any], *args: Any, convert: Callable[[Any], Any] | None = None) -> Any:
    """Call ``fn(*args)``; on any exception return an unknown marker with the reason.

    Probes talk to drivers and the OS, where any call can fail for reasons
    outside the kit (not supported on this GPU, no permission, lost GPU); the
    failure is data, not a crash.
    """
    try:
        value = fn(*args)
        return convert(value) if convert is not None else value
    except Exception as exc:  # noqa: BLE001 -- recorded, never swallowed silently
        return unknown(describe_exception(exc))
