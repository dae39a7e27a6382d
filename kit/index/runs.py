"""Each run counted once: which rows of the index are another row's run.

A bundle's identity is its sha256, but one run can reach the index as more than one bundle:

- **the same run under another tarball** (exported twice, repacked, copied with a new manifest
  date): the same run id and the same results.json and env.json. ``kit index add`` records the
  first and says the others are already in the index; where an index holds such copies anyway
  (added by an older kit, or by two writers at once), all but the earliest are left out.
- **an interrupted run and its completed resume**: ``X.interrupted.tar.gz`` (what had finished)
  beside ``X.tar.gz`` (the whole run), the same run id. Both are kept, and the interrupted one is
  marked superseded by the complete one (``kit index list``) and left out of what
  ``kit compare --index`` and ``kit index history`` read, so the run counts once.

Which rows are left out is worked out when the index is read (:func:`left_out`), from the rows
alone, so it holds whatever order the bundles were added in and needs no column of its own.
"""

from __future__ import annotations

import hashlib
import sqlite3

from kit.index.figures_codec import Damaged, inflate


def content_digest(results_json: bytes, env_json: bytes) -> str:
    """What makes two bundles of one run id the same run: their results.json and env.json, byte for byte."""
    h = hashlib.sha256(results_json)
    h.update(b"\0")
    h.update(env_json)
    return h.hexdigest()


def stored_digest(results_z: bytes, env_z: bytes) -> str | None:
    """:func:`content_digest` of a row's stored copies; None where they are damaged (never the same run)."""
    try:
        return content_digest(inflate(results_z), inflate(env_z))
    except Damaged:
        return None


def left_out(con: sqlite3.Connection) -> dict:
    """bundle id -> why compare and history leave it out: ``("superseded", FILE)`` for an interrupted
    bundle whose run id has a complete bundle (FILE, the earliest such), ``("same run", FILE)`` for a
    copy of the earlier row FILE (same run id, same content). Only run ids held by more than one row
    are looked at, and only their rows' blobs are read."""
    rows = con.execute(
        "SELECT id, run_id, interrupted, file_name FROM bundles WHERE run_id IN "
        "(SELECT run_id FROM bundles GROUP BY run_id HAVING COUNT(*) > 1) ORDER BY id").fetchall()
    groups: dict = {}
    for bundle_id, run_id, interrupted, file_name in rows:
        groups.setdefault(run_id, []).append((bundle_id, bool(interrupted), file_name))
    out: dict = {}
    for members in groups.values():
        complete = [m for m in members if not m[1]]
        if complete:
            for bundle_id, interrupted, _ in members:
                if interrupted:
                    out[bundle_id] = ("superseded", complete[0][2])
        seen: dict = {}
        for bundle_id, _interrupted, file_name in (m for m in members if m[0] not in out):
            digest = stored_digest(*con.execute("SELECT results_z, env_z FROM bundles WHERE id = ?",
                                                (bundle_id,)).fetchone())
            if digest is not None and digest in seen:
                out[bundle_id] = ("same run", seen[digest])
            elif digest is not None:
                seen[digest] = file_name
    return out
