"""Follow a containerised run through its journal, from the host.

The run inside the container writes ``<results>/<run_id>/journal.jsonl`` (one
JSON object per line, see kit/results/journal.py) into the bind-mounted results
folder. The launcher does not know the run id in advance, so it remembers
which entries the folder had before the container started and watches for the
new run folder; then it reads the journal's complete lines as they appear
(a half-written last line is left for the next poll).
"""

from __future__ import annotations

import json
from pathlib import Path

JOURNAL_NAME = "journal.jsonl"


class JournalFollower:
    def __init__(self, results_dir: Path, existing: set[str] | None = None):
        self.results_dir = Path(results_dir)
        self.existing = set(existing) if existing is not None else snapshot(self.results_dir)
        self.run_dir: Path | None = None
        self._offset = 0
        self._partial = b""

    def _find_run_dir(self) -> Path | None:
        if not self.results_dir.is_dir():
            return None
        fresh = [p for p in self.results_dir.iterdir() if p.name not in self.existing and p.is_dir() and (p / JOURNAL_NAME).exists()]
        if not fresh:
            return None
        # One container runs one `kit run`; should two appear, follow the newest.
        return max(fresh, key=lambda p: (p / JOURNAL_NAME).stat().st_mtime)

    def poll(self) -> list[dict]:
        """New journal events since the last call (possibly none)."""
        if self.run_dir is None:
            self.run_dir = self._find_run_dir()
            if self.run_dir is None:
                return []
        path = self.run_dir / JOURNAL_NAME
        try:
            with open(path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # b"" when the chunk ended with a newline
        events: list[dict] = []
        for raw in lines:
            if not raw.strip():
                continue
            try:
                ev = json.loads(raw)
            except ValueError:
                continue  # a torn line from a crash; the journal reader skips those too
            if isinstance(ev, dict) and "event" in ev:
                events.append(ev)
        return events


def snapshot(results_dir: Path) -> set[str]:
    """Names in the results folder now (run folders and bundles)."""
    try:
        return {p.name for p in Path(results_dir).iterdir()}
    except FileNotFoundError:
        return set()


def new_bundles(results_dir: Path, before: set[str]) -> list[Path]:
    """Bundles (``*.tar.gz``) written to the results folder since ``before``."""
    try:
        found = [p for p in Path(results_dir).glob("*.tar.gz") if p.name not in before and p.is_file()]
    except FileNotFoundError:
        return []
    return sorted(found, key=lambda p: p.stat().st_mtime)
