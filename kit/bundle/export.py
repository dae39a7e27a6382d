"""Make a bundle from a run folder: ``<machine>_<gpu>_<stack>_<YYYYmmdd-HHMMSS>.tar.gz``
(``....interrupted.tar.gz`` for a run that did not finish: the plain name is a complete run's).

A bundle holds, under one top-level folder named like the file::

    manifest.json   bundle format, results schema version, kit version,
                    created_at, interrupted flag, sha256 + size of every other file
    results.json    RunResults (rebuilt from the journal if the run died before writing it)
    env.json        the environment record
    journal.jsonl   the event journal
    run.log         the run's log
    charts/*.svg    the report's charts
    report.html     a self-contained report (inline CSS and SVG, no scripts)

The archive is built in memory (a bundle is kilobytes to a few MiB) and
written with a temporary file + ``os.replace``, so a reader never sees half a
bundle. Archive entries are plain ustar regular files and folders, which is
all :mod:`kit.bundle.safe_open` accepts.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict

from kit import __version__
from kit.bundle.envinfo import safe_name, summarise_environment
from kit.bundle.safe_open import BUNDLE_FORMAT, MANIFEST_NAME
from kit.errors import BundleError, KitError, SchemaError, UsageError
from kit.results.atomic import atomic_write_bytes
from kit.results.journal import JOURNAL_NAME, parse_journal
from kit.results.run_files import ENV_NAME, LOG_NAME, RESULTS_NAME
from kit.results.schema import SCHEMA_VERSION, CellResult, RunConfig, RunResults

REPORT_NAME = "report.html"
#: Logs and journals past this size keep only their tail (safe_open refuses
#: members over 64 MiB; the whole bundle must stay far below 256 MiB).
MAX_LOG_BYTES = 16 * 1024 * 1024
#: in the name of an interrupted run's bundle, before .tar.gz (the plain name is a complete run's)
INTERRUPTED_MARK = ".interrupted"
#: what a bundle's folder is told when it cannot be written in
OUT_REMEDY = "Give --out a folder you can write in (it is made if missing); nothing was written."
#: the errors of a folder that cannot be written in: its mode, a read-only mount, a file in the way
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EEXIST, errno.EISDIR, errno.ENOENT)


@dataclass
class RunFolder:
    """What a run folder holds, with the results rebuilt where needed."""

    path: Path
    results: RunResults
    environment: dict
    rebuilt_from_journal: bool = False
    recovered_cells: int = 0
    raw: dict[str, bytes] = field(default_factory=dict)  # journal.jsonl, run.log, env.json as found

    @property
    def interrupted(self) -> bool:
        return self.results.status != "complete"


MEMBER_REMEDY = ("A bundle takes only regular files inside the run folder; replace the link with the run's own "
                 "file (or remove it) and export again.")


def read_member(run_dir: Path, name: str) -> bytes | None:
    """The bytes of the run folder's file ``name`` (a plain name, no folders), or None when
    it does not exist. A symbolic link (even a dangling one) or anything but a regular file
    is refused (BundleError): the file is opened without following links (O_NOFOLLOW) and
    checked on the open descriptor, so a link swapped in after the check is refused too,
    and a stranger's link in a shared sweep folder cannot put /etc/shadow in a bundle."""
    path = run_dir / name
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(before.st_mode):
        raise BundleError(f"{path} is a symbolic link; refused (not a regular file inside the run folder).",
                          remedy=MEMBER_REMEDY)
    if not stat.S_ISREG(before.st_mode):
        raise BundleError(f"{path} is not a regular file; refused.", remedy=MEMBER_REMEDY)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # replaced by a link since the lstat
            raise BundleError(f"{path} is a symbolic link; refused (not a regular file inside the run folder).",
                              remedy=MEMBER_REMEDY) from None
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise BundleError(f"{path} is not a regular file; refused.", remedy=MEMBER_REMEDY)
        return fh.read()


def _read_results(run_dir: Path, results_json: bytes | None, events: list) -> tuple[RunResults, bool]:
    """(the run's results, whether they were rebuilt): its results.json where there is one, else the
    run's start in its ``events`` (the journal), its cells still to be added back."""
    results_path, journal_path = run_dir / RESULTS_NAME, run_dir / JOURNAL_NAME
    if results_json is not None:
        try:
            obj = json.loads(results_json.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise SchemaError(f"{results_path}: not valid JSON ({exc})") from None
        return RunResults.from_dict(obj, source=str(results_path)), False
    start = next((e for e in events if e.get("event") == "run_start"), None)
    if start is None:
        raise UsageError(f"{journal_path} has no run_start event; there is nothing to rebuild a bundle from.",
                         remedy="Pass the folder of a run that started (results/<run id>/).")
    try:
        config = RunConfig.from_dict(start.get("config") if isinstance(start.get("config"), dict) else {})
    except (UsageError, TypeError) as exc:
        raise SchemaError(f"{journal_path}: the run_start event's config is malformed ({exc})") from None
    results = RunResults(
        run_id=str(start.get("run_id") or run_dir.name),
        config=config,
        started_at=start.get("time"),
        status="interrupted",
    )
    return results, True


def load_run_folder(run_dir: str | Path) -> RunFolder:
    """Results, environment and raw files of a finished or interrupted run.

    ``results.json`` is used when present; cells that the journal recorded
    as finished (``cell_end``) but that are missing from it (the run died
    between the two writes) are added back. Without ``results.json`` the
    results are rebuilt from the journal alone and the run is marked
    interrupted unless the journal recorded its end.
    """
    run_dir = Path(run_dir)
    # Not a folder, or not a run's folder: a bad argument (exit 2), like `kit run --resume`.
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir} is not a folder; `kit bundle export` takes a run folder (results/<run id>/).")
    journal_path = run_dir / JOURNAL_NAME
    members = {name: read_member(run_dir, name) for name in (RESULTS_NAME, JOURNAL_NAME, ENV_NAME, LOG_NAME)}
    if members[RESULTS_NAME] is None and members[JOURNAL_NAME] is None:
        raise UsageError(
            f"{run_dir} has neither {RESULTS_NAME} nor {JOURNAL_NAME}: it is not a run folder.",
            remedy="Pass the folder `kit run` printed (results/<run id>/).",
        )
    journal_bytes = members[JOURNAL_NAME]
    events = list(parse_journal(journal_bytes, journal_path)) if journal_bytes is not None else []
    results, rebuilt = _read_results(run_dir, members[RESULTS_NAME], events)
    have = {c.cell_id for c in results.cells}
    recovered = 0
    for ev in events:
        if ev.get("event") != "cell_end" or not isinstance(ev.get("result"), dict):
            continue
        cell = CellResult.from_dict(ev["result"], source=str(journal_path), path=f"event {ev.get('seq')} (cell_end).result")
        if cell.cell_id not in have:
            results.cells.append(cell)
            have.add(cell.cell_id)
            recovered += 1
    end = next((e for e in reversed(events) if e.get("event") == "run_end"), None)
    if rebuilt:
        results.status = str(end.get("status")) if end and end.get("status") else "interrupted"
        results.finished_at = end.get("time") if end else None
    elif recovered and results.status == "complete":
        results.status = "interrupted"  # results.json and the journal disagree: be conservative
    if results.status == "running":
        results.status = "interrupted"  # the process died with the run in flight

    raw: dict[str, bytes] = {}
    environment: dict = {}
    if members[ENV_NAME] is not None:
        raw[ENV_NAME] = members[ENV_NAME]
        try:
            loaded = json.loads(raw[ENV_NAME].decode("utf-8"))
            environment = loaded if isinstance(loaded, dict) else {}
        except (ValueError, UnicodeDecodeError):
            environment = {}
    if not environment and isinstance(results.environment, dict):
        environment = results.environment
    if rebuilt and not results.environment:
        results.environment = environment
    for name in (JOURNAL_NAME, LOG_NAME):
        if members[name] is not None:
            raw[name] = _tail(members[name])
    return RunFolder(run_dir, results, environment, rebuilt, recovered, raw)


def _tail(data: bytes) -> bytes:
    if len(data) <= MAX_LOG_BYTES:
        return data
    cut = data[-MAX_LOG_BYTES:]
    nl = cut.find(b"\n")
    return b"[earlier lines dropped: file over 16 MiB]\n" + (cut[nl + 1 :] if nl >= 0 else cut)


def bundle_stem(folder: RunFolder) -> str:
    env = summarise_environment(folder.environment, folder.results.config, folder.results.cells)
    when = folder.results.started_at or time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(when))
    return "_".join((safe_name(env.machine), safe_name(env.gpu), safe_name(env.stack), stamp))


#: Renders the files a bundle shows beside its data (charts/*.svg, report.html) for a run
#: folder and the bundle's file name. The bundle package only writes and reads bundles: the
#: renderer comes from the caller (kit.report.export.bundle_files), so writing a bundle does
#: not depend on the report, and the report on comparisons.
Renderer = Callable[[RunFolder, str], Dict[str, bytes]]


def build_bundle(folder: RunFolder, stem: str, render: Renderer, created_at: float | None = None,
                 resumed_from: list[str] | None = None) -> bytes:
    """The bundle's bytes (.tar.gz) for a loaded run folder, with ``render``'s files."""
    created_at = time.time() if created_at is None else created_at
    files: dict[str, bytes] = {RESULTS_NAME: (json.dumps(folder.results.to_dict(), indent=2) + "\n").encode("utf-8")}
    files[ENV_NAME] = folder.raw.get(ENV_NAME) or (json.dumps(folder.environment, indent=2) + "\n").encode("utf-8")
    for name in (JOURNAL_NAME, LOG_NAME):
        if name in folder.raw:
            files[name] = folder.raw[name]
    for name, data in render(folder, f"{stem}.tar.gz").items():
        if name in files:
            raise ValueError(f"the renderer may not replace the bundle's {name}")
        files[name] = data
    manifest = {
        "bundle_format": BUNDLE_FORMAT,
        "schema_version": SCHEMA_VERSION,
        "kit_version": __version__,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created_at)),
        "run_id": folder.results.run_id,
        "run_status": folder.results.status,
        "interrupted": folder.interrupted,
        "rebuilt_from_journal": folder.rebuilt_from_journal,
        # the bundles of this run's earlier, interrupted sessions found beside this one
        "resumed_from": list(resumed_from or []),
        "files": {
            name: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)} for name, data in sorted(files.items())
        },
    }
    files[MANIFEST_NAME] = (json.dumps(manifest, indent=2) + "\n").encode("utf-8")
    return _targz(stem, files, int(created_at))


def _targz(top: str, files: dict[str, bytes], mtime: int) -> bytes:
    tar_buf = io.BytesIO()
    with tarfile.open(fileobj=tar_buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        folders = {top} | {f"{top}/{n.rsplit('/', 1)[0]}" for n in files if "/" in n}
        for folder in sorted(folders):
            info = tarfile.TarInfo(folder)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, mtime
            tf.addfile(info)
        order = [MANIFEST_NAME] + sorted(n for n in files if n != MANIFEST_NAME)
        for name in order:
            data = files[name]
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, mtime
            tf.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=mtime, compresslevel=9) as gz:
        gz.write(tar_buf.getvalue())
    return out.getvalue()


def export_run(run_dir: Path, results_root: Path, render: Renderer) -> Path:
    """Write the bundle for ``run_dir`` into ``results_root`` and return its path.

    Works on interrupted runs too (see :func:`load_run_folder`); their bundle is named
    ``<stem>.interrupted.tar.gz``. Never overwrites an existing bundle: a name clash gets
    ``-2``, ``-3``... added.
    """
    return write_bundle(load_run_folder(run_dir), results_root, render)


def write_bundle(folder: RunFolder, results_root: Path, render: Renderer) -> Path:
    """Write the bundle of a loaded (or, for ``kit bundle merge``, assembled) run folder
    into ``results_root``; never overwrites (a name clash gets ``-2``, ``-3``...)."""
    stem = bundle_stem(folder)
    results_root = Path(results_root)
    if results_root.exists() and not results_root.is_dir():
        raise UsageError(f"--out {results_root} is a file, not a folder.", remedy=OUT_REMEDY)
    # an interrupted run's bundle is marked in its name, so the plain name is always a complete
    # run's: after a resume, X.interrupted.tar.gz (what had finished) beside X.tar.gz (the whole run)
    base = f"{stem}{INTERRUPTED_MARK}" if folder.interrupted else stem
    target = results_root / f"{base}.tar.gz"
    n = 2
    while target.exists():
        target = results_root / f"{base}-{n}.tar.gz"
        n += 1
    resumed_from = [] if folder.interrupted else sorted(
        p.name for p in results_root.glob(f"{stem}{INTERRUPTED_MARK}*.tar.gz") if p.is_file())
    data = build_bundle(folder, target.name[: -len(".tar.gz")], render, resumed_from=resumed_from)
    return write_out(target, data, "the bundle")


def write_out(target: Path, data: bytes, what: str) -> Path:
    """Write ``data`` to ``target`` atomically (its folder made if missing), for a command's ``--out``:
    ``what`` ("the bundle", "the report") names it in the error."""
    try:
        return atomic_write_bytes(target, data)
    except OSError as exc:  # a full disk is DiskFull already (exit 10), raised as it is
        # a folder this user cannot write in (its mode, a read-only mount, a file in the way): the
        # folder given is the problem (exit 2, as `kit run --results-dir` says); anything else is the disk's
        error = UsageError if exc.errno in _NOT_WRITABLE else KitError
        raise error(f"cannot write {what} to {target}: {exc.strerror or exc}.", remedy=OUT_REMEDY) from None
