"""Where data files live, and whether a file is the one we expect.

Layout of the data folder (default ``./data``, env ``KIT_DATA_DIR``)::

    data/
      cifar-100-python.tar.gz        the archive, exactly as published
      wikitext-2-v1.zip              the archive, exactly as published
      wikitext-2/wiki.*.tokens       extracted from the zip (or placed by hand)
      .kit/                          the kit's own bookkeeping (safe to delete)
        verified/<file>.json         "this size+mtime hashed to this MD5" stamps
        cifar100-<md5>.npz           decoded arrays, so later loads skip the archive

Hashing the 169 MB CIFAR archive costs about half a second; a stamp lets later
loads skip that when the file's size and modification time are unchanged.
``kit data verify`` always hashes in full.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from kit.errors import DataError
from kit.facts.datasets import DatasetFacts
from kit.results.atomic import atomic_write_json

DATA_DIR_ENV = "KIT_DATA_DIR"
DEFAULT_DATA_DIR = "data"
KIT_SUBDIR = ".kit"
_CHUNK = 1 << 20


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The data folder: the argument, else ``$KIT_DATA_DIR``, else ``./data`` (absolute)."""
    if data_dir is None or str(data_dir) == "":
        data_dir = os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR
    return Path(data_dir).expanduser().absolute()


def kit_dir(data_dir: Path) -> Path:
    return data_dir / KIT_SUBDIR


@dataclass
class Checksums:
    md5: str
    sha256: str
    size: int


def hash_file(path: Path) -> Checksums:
    md5, sha = hashlib.md5(), hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            md5.update(chunk)
            sha.update(chunk)
            size += len(chunk)
    return Checksums(md5.hexdigest(), sha.hexdigest(), size)


@dataclass
class Verification:
    """The outcome of checking one archive against its facts."""

    path: Path
    present: bool
    ok: bool
    md5: str | None = None
    sha256: str | None = None
    size: int | None = None
    #: "hashed" (read in full just now) or "stamp" (unchanged since it was hashed)
    how: str = "hashed"
    problem: str | None = None

    def as_dict(self) -> dict:
        return {
            "path": str(self.path),
            "present": self.present,
            "checksum_verified": self.ok,
            "md5": self.md5,
            "sha256": self.sha256,
            "size_bytes": self.size,
            "how": self.how if self.present else None,
            "problem": self.problem,
        }


def _stamp_path(data_dir: Path, filename: str) -> Path:
    return kit_dir(data_dir) / "verified" / f"{filename}.json"


def _read_stamp(data_dir: Path, filename: str) -> dict | None:
    try:
        return json.loads(_stamp_path(data_dir, filename).read_text())
    except (OSError, ValueError):
        return None


def write_stamp(path: Path, sums: Checksums) -> None:
    """Remember that ``path`` (as it is now) hashed to ``sums``."""
    st = path.stat()
    record = {"file": path.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "md5": sums.md5, "sha256": sums.sha256}
    try:
        atomic_write_json(_stamp_path(path.parent, path.name), record)
    except OSError:
        pass  # a read-only data folder still works; we just hash again next time


def stamp_ok(path: Path, facts: DatasetFacts) -> bool:
    """True when ``path`` is unchanged since it last hashed to ``facts``' checksums (no hashing)."""
    try:
        st = Path(path).stat()
    except OSError:
        return False
    stamp = _read_stamp(Path(path).parent, Path(path).name)
    return bool(
        stamp
        and stamp.get("size") == st.st_size
        and stamp.get("mtime_ns") == st.st_mtime_ns
        and stamp.get("md5") == facts.md5
        and (facts.sha256 is None or stamp.get("sha256") == facts.sha256)
    )


def verify_file(path: Path, facts: DatasetFacts, *, trust_stamp: bool = True) -> Verification:
    """Check ``path`` against ``facts`` (MD5, and SHA-256 where known). Never raises for a bad file."""
    path = Path(path)
    if not path.is_file():
        return Verification(path, present=False, ok=False, problem="missing")
    if trust_stamp and stamp_ok(path, facts):
        return Verification(path, True, True, facts.md5, facts.sha256, path.stat().st_size, how="stamp")
    try:
        sums = hash_file(path)
    except OSError as exc:
        return Verification(path, True, False, problem=f"cannot be read ({exc.strerror or exc})")
    problem = None
    if sums.md5 != facts.md5:
        problem = f"MD5 is {sums.md5}, expected {facts.md5}"
    elif facts.sha256 is not None and sums.sha256 != facts.sha256:
        problem = f"SHA-256 is {sums.sha256}, expected {facts.sha256}"
    if problem is None:
        write_stamp(path, sums)
    return Verification(path, True, problem is None, sums.md5, sums.sha256, sums.size, "hashed", problem)


def require_ok(ver: Verification, facts: DatasetFacts) -> None:
    """DataError (exit 3) unless the archive checked is the published one."""
    if not ver.ok:
        raise DataError(
            f"{ver.path} is not the published {facts.filename}: {ver.problem}.",
            remedy=f"Delete it and run `kit data fetch {facts.name}` (or put a good copy there by hand).",
        )


def checksum_check(ver: Verification, facts: DatasetFacts) -> dict:
    """``kit data verify``'s checksum line of a verified archive."""
    detail = f"MD5 {ver.md5}" + (f", SHA-256 {ver.sha256}" if facts.sha256 else "") + f" ({human_size(ver.size)})"
    return {"check": "checksum", "ok": True, "detail": detail}


def set_public_mode(path: str | os.PathLike) -> None:
    """Give a file made by ``mkstemp`` (mode 0600) the usual mode for new files (0666 minus umask),
    so a data folder shared with other users or a container's user stays readable."""
    mask = os.umask(0)
    os.umask(mask)
    try:
        os.chmod(path, 0o666 & ~mask)
    except OSError:
        pass


def human_size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def find_nearby(data_dir: Path, name: str, *, depth: int = 3, limit: int = 5) -> list[Path]:
    """Files called ``name`` up to ``depth`` folders below ``data_dir``, or one level
    below its parent (a file saved beside the data folder instead of into it).

    Used only to make "wrong folder layout" errors say where the file actually is."""
    found: list[Path] = []
    for root, max_depth in ((data_dir, depth), (data_dir.parent, 1)):
        if not root.is_dir():
            continue
        base_depth = len(root.parts)
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            if len(here.parts) - base_depth >= max_depth:
                dirnames[:] = []
            # Hidden folders (.git, .venv, the kit's own .kit) never hold user data.
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            if name in filenames:
                p = (here / name).absolute()
                if p not in found:
                    found.append(p)
                    if len(found) >= limit:
                        return found
    return found
