"""Download a data set archive from its mirrors, verified, without ever leaving half a file.

The flow for one archive::

    present and verified?  -- yes --> done (nothing downloaded)
          | no (missing, or wrong checksum: reported, and replaced only by a good copy)
          v
    for each mirror:  stream into data/.<file>.<random>.part  (hashing as it goes)
                      checksum matches?  -- yes --> fsync, os.replace(part, file), done
                      any failure        -------->  delete the .part, try the next mirror
    every mirror failed --> DownloadError naming the file, its checksum, the folder to
                            put it in by hand, and the ``--data synthetic`` alternative.

``os.replace`` within one folder is atomic, so a download killed at any moment
leaves the previous file (or none) under the real name, never a partial one.

Mirrors: the public list in ``kit.facts.datasets``; ``$KIT_DATA_MIRRORS`` (base
URLs, space- or comma-separated) or ``urls=`` (full URLs, ``kit data fetch --url``)
replace it, for an internal mirror or an air-gapped cache server.
Tests pass ``opener=`` so nothing touches the network.
"""

from __future__ import annotations

from kit.results.atomic import fsync_dir

import hashlib
import http.client
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from kit.data.files import Checksums, Verification, human_size, resolve_data_dir, set_public_mode, verify_file, write_stamp
from kit.errors import DownloadError
from kit.facts.datasets import DatasetFacts

MIRRORS_ENV = "KIT_DATA_MIRRORS"
#: Seconds to wait for a connection (and for each read). Short, so that an offline
#: machine fails over to the next mirror quickly instead of hanging.
DEFAULT_TIMEOUT_S = 15.0
_CHUNK = 1 << 16
#: Leftover ``.part`` files older than this are from a killed fetch and are removed.
_STALE_PART_S = 600

#: ``opener(url, timeout) -> response``; the response needs ``read(n)`` and may have
#: ``headers`` (for Content-Length) and ``close()``.
Opener = Callable[[str, float], Any]


def default_opener(url: str, timeout: float) -> Any:
    import urllib.request

    from kit import __version__

    req = urllib.request.Request(url, headers={"User-Agent": f"mpkit/{__version__} (kit data fetch)"})
    return urllib.request.urlopen(req, timeout=timeout)  # noqa: S310 (https/http URLs from facts or the user)


def mirror_urls(facts: DatasetFacts, urls: Sequence[str] | None = None) -> list[str]:
    """The URLs to try, in order: ``urls`` as given, else ``$KIT_DATA_MIRRORS`` bases, else the facts."""
    if urls:
        return [u for u in urls if u]
    env = os.environ.get(MIRRORS_ENV, "").replace(",", " ").split()
    if env:
        return [u if u.endswith("/" + facts.filename) else u.rstrip("/") + "/" + facts.filename for u in env]
    return list(facts.mirrors)


@dataclass
class FetchResult:
    path: Path
    #: False when a verified copy was already there.
    downloaded: bool
    url: str | None
    verification: Verification
    #: A file with the wrong checksum was present and has been replaced.
    replaced_bad_file: bool = False
    #: Per-mirror failures before the one that worked (url, reason).
    failures: list[tuple[str, str]] | None = None


def fetch_file(
    facts: DatasetFacts,
    data_dir: str | os.PathLike | None = None,
    *,
    urls: Sequence[str] | None = None,
    opener: Opener | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> FetchResult:
    """Make sure ``data_dir/facts.filename`` is present and verified, downloading it if needed.

    Raises :class:`DownloadError` when every mirror fails; a bad file already present
    is then left as it was (and the error says so)."""
    folder = resolve_data_dir(data_dir)
    target = folder / facts.filename
    say = log or (lambda _msg: None)

    present = verify_file(target, facts)
    if present.ok:
        return FetchResult(target, downloaded=False, url=None, verification=present)
    if present.present:
        what = "is corrupt" if present.problem.startswith(("MD5 is", "SHA-256 is")) else "is present but unusable"
        say(f"{target} {what} ({present.problem}); fetching a good copy.")

    made = _make_folder(folder)
    try:
        _remove_stale_parts(folder, facts.filename)
        opener = opener or default_opener
        failures: list[tuple[str, str]] = []
        candidates = mirror_urls(facts, urls)
        for i, url in enumerate(candidates):
            try:
                sums = _download_to(target, url, facts, opener, timeout, progress)
            except _MirrorFailed as exc:
                failures.append((url, exc.reason))
                if i + 1 < len(candidates):
                    say(f"{url}: {exc.reason}; trying the next mirror.")
                continue
            write_stamp(target, sums)
            ver = Verification(target, True, True, sums.md5, sums.sha256, sums.size, "hashed")
            return FetchResult(target, True, url, ver, replaced_bad_file=present.present, failures=failures)
    except BaseException:  # Ctrl-C, a local write error: the folders made for this fetch go again
        _remove_empty(made)
        raise
    _remove_empty(made)  # a failed fetch leaves no empty data folder behind
    raise _all_failed(facts, folder, failures, present)


def _make_folder(folder: Path) -> list[Path]:
    """Make ``folder`` and its missing parents; returns the folders made, innermost first (for
    :func:`_remove_empty`). A DownloadError when it cannot be made."""
    made = [p for p in [folder, *folder.parents] if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _remove_empty(made)
        raise DownloadError(f"Cannot create the data folder {folder}: {exc.strerror or exc}.",
                            remedy="Pick another folder with --data-dir or $KIT_DATA_DIR.") from None
    return made


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders (innermost first) that are still empty; a folder with anything in it stays."""
    for p in folders:
        try:
            p.rmdir()
        except OSError:
            return


class _MirrorFailed(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _download_to(target: Path, url: str, facts: DatasetFacts, opener: Opener, timeout: float, progress: bool) -> Checksums:
    """Stream ``url`` into a temporary file beside ``target``; on a checksum match, rename it over ``target``."""
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{facts.filename}.", suffix=".part", dir=target.parent)
    except OSError as exc:
        raise _local_write_error(target, exc) from None
    tmp = Path(tmp_name)
    md5, sha = hashlib.md5(), hashlib.sha256()
    received = 0
    try:
        try:
            response = opener(url, timeout)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise _MirrorFailed(_reason(exc)) from None
        try:
            expected_len = _content_length(response)
            with os.fdopen(fd, "wb") as out, _ProgressBar(progress, facts.filename, expected_len) as advance:
                fd = -1  # owned by ``out`` now
                while True:
                    try:
                        chunk = response.read(_CHUNK)
                    except (OSError, http.client.HTTPException, ValueError) as exc:
                        raise _MirrorFailed(f"{_reason(exc)} after {human_size(received)}") from None
                    if not chunk:
                        break
                    out.write(chunk)
                    md5.update(chunk)
                    sha.update(chunk)
                    received += len(chunk)
                    advance(len(chunk))
                out.flush()
                os.fsync(out.fileno())
        finally:
            close = getattr(response, "close", None)
            if close:
                close()
        if expected_len is not None and received != expected_len:
            raise _MirrorFailed(f"connection ended after {human_size(received)} of {human_size(expected_len)}")
        got_md5, got_sha = md5.hexdigest(), sha.hexdigest()
        if got_md5 != facts.md5:
            raise _MirrorFailed(f"served a file with the wrong checksum (MD5 {got_md5}, {human_size(received)}); discarded")
        if facts.sha256 is not None and got_sha != facts.sha256:
            raise _MirrorFailed(f"served a file with the wrong SHA-256 ({got_sha}); discarded")
        set_public_mode(tmp)
        os.replace(tmp, target)
    except BaseException as exc:
        # Ctrl-C, a kill signal turned into an exception, a failed mirror or a full
        # disk: the partial file goes, the real name is untouched.
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):  # network errors became _MirrorFailed above: this one is local
            raise _local_write_error(target, exc) from None
        raise
    fsync_dir(target.parent)
    return Checksums(got_md5, got_sha, received)


def _local_write_error(target: Path, exc: OSError) -> DownloadError:
    return DownloadError(
        f"Cannot write {target.name} into {target.parent}: {exc.strerror or exc}.",
        remedy="Free some disk space or fix the folder's permissions, or choose another folder with --data-dir / $KIT_DATA_DIR.",
    )


def _content_length(response: Any) -> int | None:
    headers = getattr(response, "headers", None)
    value = headers.get("Content-Length") if headers is not None else None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _reason(exc: BaseException) -> str:
    import urllib.error

    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return f"cannot connect ({exc.reason})"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class _ProgressBar:
    """A rich download bar on stderr (or nothing); yields ``advance(nbytes)``."""

    def __init__(self, enabled: bool, name: str, total: int | None):
        self.enabled, self.name, self.total = enabled, name, total
        self._progress: Any = None

    def __enter__(self) -> Callable[[int], None]:
        if not self.enabled:
            return lambda _n: None
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._progress.start()
        task = self._progress.add_task(self.name, total=self.total)
        return lambda n: self._progress.advance(task, n)

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()


def _remove_stale_parts(folder: Path, filename: str) -> None:
    now = time.time()
    for part in folder.glob(f".{filename}.*.part"):
        try:
            if now - part.stat().st_mtime > _STALE_PART_S:
                part.unlink()
        except OSError:
            pass


def _all_failed(facts: DatasetFacts, folder: Path, failures: list[tuple[str, str]], present: Verification) -> DownloadError:
    checks = f"MD5 {facts.md5}" + (f", SHA-256 {facts.sha256}" if facts.sha256 else "")
    lines = [f"Could not download {facts.filename} ({facts.title}) from any mirror:"]
    lines += [f"  - {url}: {reason}" for url, reason in failures] or ["  (no mirrors to try)"]
    if present.present:
        lines.append(f"The copy already at {present.path} is wrong ({present.problem}) and was left as it is.")
    lines.append(f"Expected file: {facts.filename} ({checks}).")
    missing = "" if folder.is_dir() else "; make the folder first"
    lines.append(f"To continue offline, put it by hand into the folder {folder}{os.sep} (as {folder / facts.filename}{missing}),")
    lines.append("or run the benchmark on synthetic data with `--data synthetic` (same shapes; good for throughput only).")
    remedy = (
        f"On a machine with internet, download {facts.mirrors[0]} , copy it into {folder}{os.sep} and run "
        f"`kit data verify {facts.name}`; or point $KIT_DATA_MIRRORS / --url at a mirror you can reach."
    )
    return DownloadError("\n".join(lines), remedy=remedy)
