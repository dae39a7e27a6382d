"""An NVIDIA Apex source given as a folder or a tar archive: checked, and packed for the image build.

Machines without GitHub build Apex from a local copy of its source (``kit image
build --apex-src PATH``: a folder, or a `git archive` snapshot of github.com/NVIDIA/apex
made where GitHub can be reached). This module is the one place that decides what such a source may
hold, and it runs twice, with the same rules:

- on the host, before anything is built (``read_source``): a folder or a tar
  archive (``.tar``, ``.tar.gz``, ``.tgz``, ``.tar.xz``, ``.tar.bz2``), with
  ``setup.py`` and ``apex/`` at its top or under its one top-level folder (as
  ``git archive --prefix`` writes it); only regular files and folders, no links,
  no device files, no absolute paths and no ``..``; at most MAX_BYTES unpacked.
  It is then re-packed as one plain tar (prefix stripped, owners and modes
  normalised, the commit kept) that goes into the build context as
  ``docker/apex-src.tar``;
- inside the build (``python3 apex_archive.py unpack SRC DEST``, run by
  docker/Dockerfile's Apex step, also for an archive a Compose user put in
  ``docker/`` by hand): the same checks, then the files are written, and the
  commit id is printed.

The commit comes from the archive's pax header (``git archive`` of a commit
writes it; ``git get-tar-commit-id`` reads the same field) or, for a folder
that is a git checkout, from ``git rev-parse HEAD``; otherwise it is unknown.

Standard library only, Python 3.7 syntax: the cuda10 image's Python runs it.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
from typing import List, NamedTuple, Optional, Tuple

#: Largest unpacked source accepted (Apex 25.07 is about 5 MB without its data sets).
MAX_BYTES = 256 * 1024 * 1024
#: The plain tar the host puts into the build context (docker/Dockerfile copies docker/apex-src.tar*).
CONTEXT_NAME = "docker/apex-src.tar"
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_SKIP_DIRS = {".git", "__pycache__"}


class SourceError(ValueError):
    """The path is not an Apex source the kit builds from (the message says why, in one line)."""


class Source(NamedTuple):
    #: what the user gave, for messages and the image's record
    given: str
    #: "folder" or "archive"
    kind: str
    #: 40-hex commit id, or "" when the source does not say
    commit: str
    #: sha256 of the re-packed tar (same source -> same hash -> same image)
    sha256: str
    #: the re-packed plain tar
    data: bytes
    files: int

    def describe(self) -> str:
        """One line for the image label and the environment record."""
        what = "archive" if self.kind == "archive" else "folder"
        commit = self.commit[:12] if self.commit else "commit unknown"
        return "local {} {} ({}, sha256 {})".format(what, os.path.basename(self.given.rstrip("/")) or self.given, commit, self.sha256[:12])


def _check_name(name: str, where: str) -> None:
    if name.startswith("/") or name.startswith("\\") or re.match(r"^[A-Za-z]:", name):
        raise SourceError("{} holds an absolute path ({}): refused".format(where, name))
    if ".." in name.replace("\\", "/").split("/"):
        raise SourceError("{} holds a path that leaves its folder ({}): refused".format(where, name))


def _strip(names: List[str], where: str) -> str:
    """The prefix to strip: '' when setup.py and apex/ are at the top, 'top/' when under one folder."""
    tops = {n.split("/", 1)[0] for n in names if n}
    def has(prefix: str) -> bool:
        return prefix + "setup.py" in names and any(n.startswith(prefix + "apex/") or n == prefix + "apex" for n in names)
    if has(""):
        return ""
    if len(tops) == 1:
        prefix = tops.pop() + "/"
        if has(prefix):
            return prefix
    raise SourceError("{} is no Apex source: it has no setup.py and apex/ at its top (nor under one top-level folder)".format(where))


def _members_of_archive(path: str) -> Tuple[List[Tuple[str, tarfile.TarInfo]], str, "tarfile.TarFile"]:
    try:
        tar = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError, EOFError):
        raise SourceError("{} is neither a folder nor a readable tar archive (.tar, .tar.gz, .tar.xz, .tar.bz2)".format(path)) from None
    members = []
    total = 0
    try:
        for m in tar.getmembers():
            name = m.name[2:] if m.name.startswith("./") else m.name
            name = name.rstrip("/")
            if not name or name == ".":
                continue
            _check_name(name, path)
            if m.issym() or m.islnk():
                raise SourceError("{} holds a link ({} -> {}): refused".format(path, name, m.linkname))
            if not (m.isfile() or m.isdir()):
                raise SourceError("{} holds {} which is neither a file nor a folder: refused".format(path, name))
            total += m.size
            if total > MAX_BYTES:
                raise SourceError("{} unpacks to more than {} MB: not an Apex source".format(path, MAX_BYTES // (1024 * 1024)))
            members.append((name, m))
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise SourceError("{} is a damaged tar archive ({})".format(path, exc)) from None
    commit = str((tar.pax_headers or {}).get("comment", "")).strip()
    return members, commit if _COMMIT_RE.match(commit) else "", tar


def _folder_commit(path: str) -> str:
    if not os.path.isdir(os.path.join(path, ".git")):
        return ""
    try:
        out = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return out if _COMMIT_RE.match(out) else ""


def _pack(entries: List[Tuple[str, Optional[bytes], int]], commit: str) -> bytes:
    """A plain pax tar of (name, data or None for a folder, mtime), owners root, modes 0755/0644."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT,
                      pax_headers={"comment": commit} if commit else {}) as out:
        for name, data, mtime in sorted(entries, key=lambda e: e[0]):
            info = tarfile.TarInfo(name)
            info.mtime = mtime
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                out.addfile(info)
            else:
                info.size = len(data)
                info.mode = 0o644
                out.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _entries_from_archive(path: str) -> Tuple[List[Tuple[str, Optional[bytes], int]], str]:
    members, commit, tar = _members_of_archive(path)
    with tar:
        prefix = _strip([n for n, _ in members], path)
        entries = []
        for name, m in members:
            if prefix and not (name + "/").startswith(prefix):
                continue
            rel = name[len(prefix):] if prefix else name
            if not rel:
                continue
            if m.isdir():
                entries.append((rel, None, int(m.mtime)))
            else:
                f = tar.extractfile(m)
                entries.append((rel, f.read() if f is not None else b"", int(m.mtime)))
    return entries, commit


def _entries_from_folder(path: str) -> Tuple[List[Tuple[str, Optional[bytes], int]], str]:
    names = []
    entries = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        rel_dir = os.path.relpath(dirpath, path)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        keep = []
        for d in sorted(dirnames):
            full = os.path.join(dirpath, d)
            rel = (rel_dir + "/" + d) if rel_dir else d
            if os.path.islink(full):
                raise SourceError("{} holds a link ({}): refused".format(path, rel))
            if d in _SKIP_DIRS:
                continue
            keep.append(d)
            entries.append((rel, None, int(os.lstat(full).st_mtime)))
            names.append(rel)
        dirnames[:] = keep
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            rel = (rel_dir + "/" + fn) if rel_dir else fn
            st = os.lstat(full)
            if os.path.islink(full):
                raise SourceError("{} holds a link ({}): refused".format(path, rel))
            if not os.path.isfile(full):
                raise SourceError("{} holds {} which is neither a file nor a folder: refused".format(path, rel))
            if fn.endswith(".pyc"):
                continue
            total += st.st_size
            if total > MAX_BYTES:
                raise SourceError("{} holds more than {} MB: not an Apex source".format(path, MAX_BYTES // (1024 * 1024)))
            with open(full, "rb") as fh:
                entries.append((rel, fh.read(), int(st.st_mtime)))
            names.append(rel)
    if _strip(names, path) != "":
        raise SourceError("{} is no Apex source: setup.py and apex/ must be at the folder's top; give that folder".format(path))
    return entries, _folder_commit(path)


def read_source(path: str) -> Source:
    """Check ``path`` (folder or tar archive) and re-pack it; SourceError says what is wrong."""
    given = str(path)
    if not os.path.lexists(given):
        raise SourceError("{}: no such file or folder".format(given))
    if os.path.islink(given):
        given_real = os.path.realpath(given)
    else:
        given_real = given
    if os.path.isdir(given_real):
        entries, commit = _entries_from_folder(given_real)
        kind = "folder"
    elif os.path.isfile(given_real):
        entries, commit = _entries_from_archive(given_real)
        kind = "archive"
    else:
        raise SourceError("{} is neither a folder nor a tar archive".format(given))
    data = _pack(entries, commit)
    files = sum(1 for _, d, _ in entries if d is not None)
    return Source(given, kind, commit, hashlib.sha256(data).hexdigest(), data, files)


def unpack(archive: str, dest: str) -> Source:
    """Check ``archive`` with the same rules and write its files under ``dest`` (prefix stripped)."""
    src = read_source(archive)
    with tarfile.open(fileobj=io.BytesIO(src.data), mode="r:") as tar:
        for m in tar.getmembers():
            target = os.path.join(dest, m.name)
            if m.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            f = tar.extractfile(m)
            with open(target, "wb") as out:
                out.write(f.read() if f is not None else b"")
    return src


def _main(argv: List[str]) -> int:
    if len(argv) != 3 or argv[0] != "unpack":
        print("usage: apex_archive.py unpack ARCHIVE DEST", file=sys.stderr)
        return 2
    try:
        src = unpack(argv[1], argv[2])
    except SourceError as exc:
        print("error: Apex source " + str(exc), file=sys.stderr)
        return 2
    print("{} {} {}".format(src.commit or "unknown", src.sha256, src.files))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
