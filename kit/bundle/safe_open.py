"""Open a bundle that came from somewhere else, treating every byte as hostile.

Rules (documented in docs/bundles.md, "Safety"):

- Nothing is extracted: members are read into memory after their header has
  been checked, so no path in an archive can ever name a place on disk.
- Nothing is executed, unpickled or rendered: the JSON files are parsed with
  ``json`` once their nesting and number of values are known to be small
  (:mod:`kit.bundle.safe_json`); ``report.html`` and the charts are never
  rendered, but they are parsed and refused if they hold active content
  (scripts, event handlers,
  ``javascript:`` or external URLs, ``<foreignObject>``, ...;
  :mod:`kit.bundle.active_content`), because the hashes only say they were not
  changed after the sender wrote the manifest.
- Only regular files and folders are accepted; symbolic links, hard links,
  devices, FIFOs and sparse files are refused, as are absolute paths, ``..``
  components, backslashes, control characters and duplicate names.
- Caps on member count, per-file size and total size are enforced *while the
  gzip stream is being decompressed* (:class:`_CappedGunzip` counts every byte
  it produces), so a decompression bomb is stopped after at most the total cap,
  not after it has filled the disk or the memory.
- ``manifest.json`` must list every other file with its sha256 and size; a
  file that does not match, is missing, or is not listed is named in the error.
- The results schema version must be the one this kit reads, and every field
  of ``results.json`` must have its type (:class:`kit.errors.SchemaError`
  otherwise, saying both versions or the JSON path of the bad field); a member
  that is not valid JSON is a SchemaError too (exit 4, "malformed"). So is a
  throughput, time or energy per epoch outside what any device can measure,
  and a host name longer than any can be (:mod:`kit.results.plausible`).

The sha256 sums protect against damage and careless edits, not against a
forger (who can rewrite the manifest too); bundles are not signed.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from kit.bundle import safe_json
from kit.bundle.active_content import check_files as check_active_content
from kit.errors import NEWER_KIT_REMEDY, BundleError, SchemaError, UsageError
from kit.results.run_files import ENV_NAME, RESULTS_NAME
from kit.results.plausible import check_host_name, check_results as check_plausible
from kit.results.schema import RunResults, check_version

MANIFEST_NAME = "manifest.json"
#: Version of the bundle *layout* (which files, the manifest's keys). The
#: results inside carry their own schema version (kit.results.schema).
BUNDLE_FORMAT = 1

_MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Caps for opening untrusted bundles. A real bundle is well under 1 MiB."""

    max_members: int = 1000
    max_file_bytes: int = 64 * _MiB
    max_total_bytes: int = 256 * _MiB

    @property
    def stream_budget(self) -> int:
        """Most decompressed bytes the tar stream may need: the files, plus a
        512-byte header and up to 511 bytes of padding per member (x3 for long
        name / pax records), plus the end-of-archive blocks and record padding."""
        return self.max_total_bytes + self.max_members * 3 * 1024 + 64 * 1024


DEFAULT_LIMITS = Limits()


@dataclass
class Bundle:
    """A bundle that passed every check, held in memory."""

    path: Path
    manifest: dict
    files: dict[str, bytes]
    results: RunResults
    environment: dict = field(default_factory=dict)

    @property
    def interrupted(self) -> bool:
        return bool(self.manifest.get("interrupted")) or self.results.status != "complete"

    def text(self, name: str) -> str:
        return self.files[name].decode("utf-8", errors="replace")


class _CappedGunzip:
    """A read-only, forward-only gunzip stream that refuses to produce more
    than ``budget`` bytes. tarfile reads the archive through it, so a member
    header that lies, a pax record that is huge, or a stream of zeros after
    the last member all hit the cap while decompressing."""

    def __init__(self, raw: BinaryIO, budget: int, label: str):
        self._raw = raw
        self._budget = budget
        self._label = label
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip wrapper only
        self._tail = b""
        self.produced = 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = 1 * _MiB
        out = bytearray()
        try:
            while len(out) < size and not self._z.eof:
                if not self._tail:
                    self._tail = self._raw.read(64 * 1024)
                    if not self._tail:
                        raise BundleError(
                            f"{self._label}: the gzip stream is truncated (the file ends before the archive does).",
                            remedy="Copy the bundle again; the download or transfer was cut short.",
                        )
                chunk = self._z.decompress(self._tail, size - len(out))
                self._tail = self._z.unconsumed_tail
                out += chunk
                self.produced += len(chunk)
                if self.produced > self._budget:
                    raise BundleError(
                        f"{self._label}: decompresses to more than {self._budget // _MiB} MiB; "
                        "refused as a possible decompression bomb (a real bundle is well under 1 MiB)."
                    )
        except zlib.error as exc:
            raise BundleError(f"{self._label}: the gzip data is corrupt ({exc}).") from None
        return bytes(out)


def _member_kind(m: tarfile.TarInfo) -> str:
    if m.issym():
        return f"a symbolic link (to {m.linkname!r})"
    if m.islnk():
        return f"a hard link (to {m.linkname!r})"
    if m.ischr():
        return "a character device"
    if m.isblk():
        return "a block device"
    if m.isfifo():
        return "a FIFO (named pipe)"
    if m.issparse():
        return "a sparse file"
    return f"an entry of tar type {m.type!r}"


def _clean_name(raw: str, label: str) -> str:
    """The member's relative path, or BundleError if it could point anywhere else."""
    bad = f"{label}: member {raw!r}"
    if not raw or len(raw) > 255:
        raise BundleError(f"{bad} has an empty or over-long name; refused.")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in raw):
        raise BundleError(f"{bad} has control characters in its name; refused.")
    if "\\" in raw:
        raise BundleError(f"{bad} contains a backslash; refused (paths in bundles use '/').")
    if raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
        raise BundleError(f"{bad} is an absolute path; refused (it could write outside the destination).")
    parts = [p for p in PurePosixPath(raw).parts if p != "."]
    if ".." in parts:
        raise BundleError(f"{bad} has a '..' component (path traversal); refused.")
    if not parts:
        raise BundleError(f"{bad} names no file; refused.")
    return "/".join(parts)


def read_members(path: Path, limits: Limits = DEFAULT_LIMITS) -> dict[str, bytes]:
    """Every regular file of the archive, by relative path, after the checks
    above. Folders are accepted and dropped. A single top-level folder holding
    everything (the layout ``kit bundle export`` writes) is stripped."""
    label = path.name
    # A path that is not there, or not a file, is a bad argument (exit 2), not a bad bundle.
    if path.exists() and not path.is_dir() and not path.is_file():
        raise UsageError(f"{path} is not a regular file (a device, FIFO or socket), so not a bundle.")
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file.", remedy="Pass the .tar.gz that `kit run` or `kit bundle export` wrote.") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a folder, not a bundle (.tar.gz).",
                         remedy="To make a bundle from a run folder: kit bundle export RUN_DIR") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror}).") from None
    with fh:
        if fh.read(2) != b"\x1f\x8b":
            raise BundleError(
                f"{label} is not a gzip file, so not a kit bundle (bundles are .tar.gz archives).",
                remedy="Pass the .tar.gz that `kit run` or `kit bundle export` wrote.",
            )
        fh.seek(0)
        stream = _CappedGunzip(fh, limits.stream_budget, label)
        files: dict[str, bytes] = {}
        total = 0
        count = 0
        try:
            with tarfile.open(fileobj=stream, mode="r|") as tf:  # type: ignore[arg-type]
                for member in tf:
                    count += 1
                    if count > limits.max_members:
                        raise BundleError(f"{label} holds more than {limits.max_members} entries; refused.")
                    name = _clean_name(member.name, label)
                    if member.isdir():
                        continue
                    if not member.isreg() or member.issparse():
                        raise BundleError(
                            f"{label}: member {member.name!r} is {_member_kind(member)}; "
                            "bundles may hold only regular files and folders."
                        )
                    if member.size > limits.max_file_bytes:
                        raise BundleError(
                            f"{label}: member {name!r} is {member.size / _MiB:.1f} MiB, over the "
                            f"{limits.max_file_bytes // _MiB} MiB limit per file; refused."
                        )
                    total += member.size
                    if total > limits.max_total_bytes:
                        raise BundleError(
                            f"{label}: its files add up to more than {limits.max_total_bytes // _MiB} MiB; refused."
                        )
                    if name in files:
                        raise BundleError(f"{label}: member {name!r} appears twice; refused (the second copy would hide the first).")
                    src = tf.extractfile(member)
                    data = src.read(member.size) if src is not None else b""
                    if len(data) != member.size:
                        raise BundleError(f"{label}: member {name!r} is truncated.")
                    files[name] = data
        except tarfile.TarError as exc:
            raise BundleError(f"{label}: not a valid tar archive inside the gzip ({exc}).") from None
        except EOFError:
            raise BundleError(f"{label}: the archive is truncated.") from None
    if not files:
        raise BundleError(f"{label} holds no files.")
    return _strip_top_folder(files)


def _strip_top_folder(files: dict[str, bytes]) -> dict[str, bytes]:
    tops = {name.split("/", 1)[0] for name in files}
    if len(tops) == 1 and all("/" in name for name in files):
        return {name.split("/", 1)[1]: data for name, data in files.items()}
    return files


def parse_json(data: bytes, name: str, label: str) -> Any:
    """The parsed JSON of a member; SchemaError (exit 4: malformed) when it is not JSON, or nests
    deeper or holds more values than the kit reads (kit.bundle.safe_json, measured before parsing)."""
    try:
        return safe_json.loads(data)
    except UnicodeDecodeError:
        raise SchemaError(f"{label}: {name} is not UTF-8 text.") from None
    except safe_json.TooLarge as exc:
        raise SchemaError(f"{label}: {name} is not results the kit reads: {exc}.") from None
    except json.JSONDecodeError as exc:
        raise SchemaError(
            f"{label}: {name} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})."
        ) from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise SchemaError(f"{label}: {name} is not usable JSON ({exc}).") from None


def check_manifest(files: dict[str, bytes], label: str) -> dict:
    """Parse manifest.json and check every file against it; return the manifest."""
    if MANIFEST_NAME not in files:
        raise BundleError(
            f"{label} has no {MANIFEST_NAME}: it is not a kit bundle, or it was repacked without one.",
            remedy="Ask for the original bundle, or rebuild one from the run folder with `kit bundle export RUN_DIR`.",
        )
    manifest = parse_json(files[MANIFEST_NAME], MANIFEST_NAME, label)
    if not isinstance(manifest, dict):
        raise SchemaError(f"{label}: {MANIFEST_NAME} is not a JSON object.")
    fmt = manifest.get("bundle_format", BUNDLE_FORMAT)
    if not isinstance(fmt, int) or fmt > BUNDLE_FORMAT:
        raise SchemaError(
            f"{label} uses bundle format {fmt!r}; this kit reads format {BUNDLE_FORMAT}.",
            remedy=NEWER_KIT_REMEDY,
        )
    check_version(manifest.get("schema_version"), source=f"{label} ({MANIFEST_NAME})")
    listed = manifest.get("files")
    if not isinstance(listed, dict) or not listed:
        raise BundleError(f"{label}: {MANIFEST_NAME} has no 'files' table.")
    problems: list[str] = []
    for name, entry in sorted(listed.items()):
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str) or not isinstance(entry.get("size"), int):
            problems.append(f"{name}: manifest entry is malformed (needs sha256 and size)")
            continue
        if name not in files:
            problems.append(f"{name}: listed in the manifest but missing from the archive")
            continue
        data = files[name]
        if len(data) != entry["size"]:
            problems.append(f"{name}: size {len(data)} bytes, manifest says {entry['size']} (file was changed)")
        elif hashlib.sha256(data).hexdigest() != entry["sha256"].lower():
            problems.append(f"{name}: sha256 does not match the manifest (file was changed)")
    for name in sorted(set(files) - set(listed) - {MANIFEST_NAME}):
        problems.append(f"{name}: in the archive but not listed in the manifest")
    if problems:
        raise BundleError(
            f"{label} failed verification:\n  " + "\n  ".join(problems),
            remedy="The bundle was damaged or edited after it was made; ask for the original.",
        )
    if RESULTS_NAME not in listed:
        raise BundleError(f"{label} has no {RESULTS_NAME}; a bundle without results is not usable.")
    return manifest


def open_bundle(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> Bundle:
    """Read, check and parse a bundle. Raises BundleError or SchemaError, saying
    exactly what is wrong; writes nothing anywhere."""
    path = Path(path)
    label = path.name
    files = read_members(path, limits)
    manifest = check_manifest(files, label)
    check_active_content(files, label)
    results_obj = parse_json(files[RESULTS_NAME], RESULTS_NAME, label)
    results = RunResults.from_dict(results_obj, source=f"{label} ({RESULTS_NAME})")
    check_plausible(results, f"{label} ({RESULTS_NAME})")
    environment: dict = {}
    if ENV_NAME in files:
        env_obj = parse_json(files[ENV_NAME], ENV_NAME, label)
        if not isinstance(env_obj, dict):
            raise SchemaError(f"{label}: {ENV_NAME} is not a JSON object.")
        environment = env_obj
    if not environment and isinstance(results.environment, dict):
        environment = results.environment
    check_host_name(environment, f"{label} ({ENV_NAME if ENV_NAME in files else RESULTS_NAME})")
    return Bundle(path=path, manifest=manifest, files=files, results=results, environment=environment)


def is_bundle_file(path: Path) -> bool:
    """True when the file starts with the gzip magic bytes (cheap sniff)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == b"\x1f\x8b"
    except OSError:
        return False
