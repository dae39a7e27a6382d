"""Append-only event journal: one JSON object per line, fixed key order.

Every line starts with ``seq``, ``time`` (Unix seconds), ``event`` and
``cell_id`` (or null), followed by the event's own fields. Lines are flushed as
they are written; epoch, cell and run events are also fsynced, so a crash or a
power cut loses at most the step lines of the epoch in flight.

Step lines are rate-limited (at most one every ``step_interval_s`` seconds,
default 0.5 s) so that journaling never costs a fast GPU measurable time; the
last step of every epoch is always recorded. ``kit run --resume`` reads the
journal back with :func:`read_journal`, which ignores a truncated last line.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from kit.errors import DiskFull

JOURNAL_NAME = "journal.jsonl"
_DURABLE = {"run_start", "run_end", "cell_start", "cell_end", "epoch", "run_interrupted", "note"}


class Journal:
    def __init__(self, path: str | os.PathLike, step_interval_s: float = 0.5):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existing = list(read_journal(self.path)) if self.path.exists() else []
        self._seq = (existing[-1]["seq"] + 1) if existing else 0
        self._truncate_partial_tail()
        self._fh = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._step_interval = step_interval_s
        self._last_step_at = float("-inf")
        self.listeners: list = []

    def _truncate_partial_tail(self) -> None:
        """Cut a half-written last line (from a crash) so new lines start clean."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with open(self.path, "r+b") as fh:
                fh.truncate(cut)

    def write(self, event: str, cell_id: str | None = None, **fields: Any) -> dict:
        if event == "step" and not fields.get("force"):
            now = time.monotonic()
            if now - self._last_step_at < self._step_interval:
                return {}
            self._last_step_at = now
        fields.pop("force", None)
        with self._lock:
            record = {"seq": self._seq, "time": round(time.time(), 6), "event": event, "cell_id": cell_id}
            record.update(fields)
            self._seq += 1
            try:
                self._fh.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
                self._fh.flush()
                if event in _DURABLE:
                    os.fsync(self._fh.fileno())
            except OSError as exc:
                # a full disk: one line naming the folder; read_journal ignores a half-written last line
                raise DiskFull.from_os_error(exc, self.path.parent) or exc from None
        for listener in self.listeners:
            listener(record)
        return record

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                try:
                    self._fh.flush()
                    os.fsync(self._fh.fileno())
                except OSError as exc:
                    full = DiskFull.from_os_error(exc, self.path.parent)
                    if full is None:
                        raise
                    try:
                        self._fh.close()  # what did not fit is lost; the lines before it are whole
                    except OSError:
                        pass
                    raise full from None
                self._fh.close()

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_journal(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the journal's events; a truncated or garbled *last* line is ignored.

    A garbled line anywhere else means the file was edited or damaged, and is
    reported rather than skipped.
    """
    yield from parse_journal(Path(path).read_bytes(), Path(path))


def parse_journal(data: bytes, path: str | os.PathLike = JOURNAL_NAME) -> Iterator[dict]:
    """:func:`read_journal` of a journal's bytes already read (``path`` names it in errors)."""
    from kit.errors import SchemaError

    lines = data.split(b"\n")
    # A file that ends in "\n" yields a final empty element.
    last_index = len(lines) - 1
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            if i >= last_index - 1 and not data.endswith(b"\n"):
                return  # the writer died mid-line: ignore the fragment
            raise SchemaError(f"{path}: line {i + 1} of the journal is not valid JSON; the file was damaged or edited.")
        if not isinstance(obj, dict) or "event" not in obj:
            raise SchemaError(f"{path}: line {i + 1} of the journal is not an event object.")
        yield obj
