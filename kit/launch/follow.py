"""Follow a containerised run through its journal, from the host.

The run inside the container writes ``<results>/<run_id>/journal.jsonl`` (one
JSON object per line, see kit/results/journal.py) into the bind-mounted results
folder. For a new run the launcher does not know the run id in advance, so it
remembers which entries the folder had before the container started and watches
for the new run folder. A resumed run (``-- --resume /results/<run>``) writes into
a folder that is already there: the follower is given it, reads what its journal
holds before the container starts (the earlier sessions: the cells, those already
finished) and then follows what the resume appends. Either way it reads the
journal's complete lines as they appear (a half-written last line is left for
the next poll).
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Sequence

from kit.results.journal import JOURNAL_NAME

#: where the results folder is mounted in the container
CONTAINER_RESULTS = PurePosixPath("/results")
#: cell statuses, as the runner writes them (kit.results.schema)
FINISHED = ("ok", "skipped")


class JournalFollower:
    def __init__(self, results_dir: Path, existing: set[str] | None = None, run_dir: Path | None = None):
        self.results_dir = Path(results_dir)
        self.existing = set(existing) if existing is not None else snapshot(self.results_dir)
        self.run_dir: Path | None = None
        self._offset = 0
        self._partial = b""
        #: the cells of the run (its run_start event) and its run id
        self.run_id: str | None = None
        self.cells: list[str] = []
        #: every cell's latest status in the journal (a resume measures failed cells again)
        self.statuses: dict[str, str] = {}
        #: the journal's events before the container started (a resumed run's earlier sessions)
        self.earlier: list[dict] = []
        if run_dir is not None:
            self.run_dir = Path(run_dir)
            self.earlier = self.poll()
            # A torn last line (a crash) is cut by the resumed run before it appends: the
            # next line then starts where the last complete one ended.
            self._offset -= len(self._partial)
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
                self._note(ev)
                events.append(ev)
        return events

    def _note(self, ev: dict) -> None:
        kind = ev.get("event")
        if kind == "run_start":
            self.run_id = str(ev.get("run_id", "?"))
            self.cells = [str(c) for c in ev.get("cells") or []]
        elif kind == "cell_end":
            result = ev.get("result") if isinstance(ev.get("result"), dict) else {}
            self.statuses[str(ev.get("cell_id"))] = str(result.get("status", "?"))

    def counts(self) -> dict[str, int]:
        """The run's cells by their latest status: ok (measured), skipped, failed."""
        out = {"ok": 0, "skipped": 0, "failed": 0}
        for status in self.statuses.values():
            if status in out:
                out[status] += 1
        return out

    def finished_earlier(self) -> int:
        """Cells a resumed run had finished before this session (measured or skipped)."""
        done: dict[str, str] = {}
        for ev in self.earlier:
            if ev.get("event") == "cell_end" and isinstance(ev.get("result"), dict):
                done[str(ev.get("cell_id"))] = str(ev["result"].get("status"))
        return sum(s in FINISHED for s in done.values())


def snapshot(results_dir: Path) -> set[str]:
    """Names in the results folder now (run folders and bundles)."""
    try:
        return {p.name for p in Path(results_dir).iterdir()}
    except FileNotFoundError:
        return set()


def new_bundles(results_dir: Path, before: set[str], since: float | None = None) -> list[Path]:
    """Bundles (``*.tar.gz``) written to the results folder since ``before`` (names not there then)
    or, with ``since``, modified since that time (a resume's bundle may take a name an earlier one
    had, which is renamed, keeping its time), oldest first."""
    try:
        found = [p for p in Path(results_dir).glob("*.tar.gz")
                 if p.is_file() and (p.name not in before or (since is not None and p.stat().st_mtime >= since))]
    except FileNotFoundError:
        return []
    return sorted(found, key=lambda p: p.stat().st_mtime)


#: `kit run` prints the bundle's path alone; the cuda10 runner (kit.runner.legacy) as "Bundle: <path>"
_BUNDLE_LINE = re.compile(r"^(?:Bundle: )?(?P<path>/results/\S.*\.tar\.gz)$")


def bundle_from_output(stdout_lines: Sequence[str], results_dir: Path) -> Path | None:
    """The bundle the run in the container printed on its stdout (`kit run` prints only the
    bundle's path there: ``/results/<name>.tar.gz``), as a host path in ``results_dir``, when
    that file is there; else None."""
    for line in reversed(list(stdout_lines)):
        m = _BUNDLE_LINE.match(line.strip())
        if not m:
            continue
        rel = PurePosixPath(m.group("path")).relative_to(CONTAINER_RESULTS)
        if ".." in rel.parts:
            continue
        host = Path(results_dir).joinpath(*rel.parts)
        if host.is_file():
            return host
    return None
