"""Downloading: mirrors in turn, checksum before rename, never a partial file, clear offline errors.

No test touches the network: downloads come from an injected opener or from an
http.server on 127.0.0.1 started by the test.
"""

from __future__ import annotations

import dataclasses
import functools
import http.server
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from kit.data.fetch import fetch_file, mirror_urls
from kit.errors import DownloadError
from kit.facts.datasets import CIFAR100
from test_data_support import FakeResponse, make_cifar_tarball, md5_sha256, opener_serving


@pytest.fixture
def payload(tmp_path) -> tuple[bytes, object]:
    """A fixture CIFAR archive's bytes and facts whose mirrors are two fake URLs."""
    src = make_cifar_tarball(tmp_path / "src" / CIFAR100.filename, 12, 6)
    md5, sha = md5_sha256(src)
    facts = dataclasses.replace(CIFAR100, md5=md5, sha256=sha, mirrors=("http://mirror-a.invalid/c.tgz", "http://mirror-b.invalid/c.tgz"))
    return src.read_bytes(), facts


def _parts(folder: Path) -> list[Path]:
    return list(folder.glob(".*.part"))


def test_download_tries_the_next_mirror_and_verifies(tmp_path, payload):
    data, facts = payload
    calls: list[str] = []
    result = fetch_file(facts, tmp_path / "d", opener=opener_serving({facts.mirrors[1]: data}, calls), progress=False)
    assert calls == list(facts.mirrors)
    assert result.downloaded and result.url == facts.mirrors[1]
    assert (tmp_path / "d" / facts.filename).read_bytes() == data
    assert result.failures and "unreachable" in result.failures[0][1]
    assert not _parts(tmp_path / "d")


def test_verified_file_already_present_is_not_downloaded_again(tmp_path, payload):
    data, facts = payload
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / facts.filename).write_bytes(data)

    def no_network(url, timeout):
        raise AssertionError(f"tried to download {url}")

    result = fetch_file(facts, folder, opener=no_network, progress=False)
    assert not result.downloaded and result.verification.ok
    # and again, now through the verification stamp
    assert fetch_file(facts, folder, opener=no_network, progress=False).verification.how == "stamp"


def test_present_file_with_wrong_checksum_is_reported_and_replaced(tmp_path, payload):
    data, facts = payload
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / facts.filename).write_bytes(data[:-10] + b"x" * 10)
    messages: list[str] = []
    result = fetch_file(facts, folder, opener=opener_serving({facts.mirrors[0]: data}), progress=False, log=messages.append)
    assert result.downloaded and result.replaced_bad_file
    assert any("is corrupt (MD5 is" in m for m in messages), messages
    assert (folder / facts.filename).read_bytes() == data


def test_tampered_file_is_detected_even_after_an_earlier_verification(tmp_path, payload):
    data, facts = payload
    folder = tmp_path / "d"
    fetch_file(facts, folder, opener=opener_serving({facts.mirrors[0]: data}), progress=False)
    target = folder / facts.filename
    target.write_bytes(b"\0" + data[1:])  # same size, new mtime: the stamp no longer applies
    with pytest.raises(DownloadError) as err:
        fetch_file(facts, folder, opener=opener_serving({}), progress=False)
    assert "is wrong" in err.value.message and "left as it is" in err.value.message
    assert target.read_bytes()[0] == 0  # the user's file is not deleted when no good copy can be had


def test_mirror_serving_wrong_bytes_is_rejected_before_the_rename(tmp_path, payload):
    data, facts = payload
    evil = data[:100] + b"\xff" + data[101:]
    calls: list[str] = []
    opener = opener_serving({facts.mirrors[0]: evil, facts.mirrors[1]: data}, calls)
    result = fetch_file(facts, tmp_path, opener=opener, progress=False)
    assert result.url == facts.mirrors[1]
    assert "wrong checksum" in result.failures[0][1]
    assert (tmp_path / facts.filename).read_bytes() == data


def test_offline_error_names_file_checksum_folder_and_synthetic(tmp_path, payload):
    _data, facts = payload
    folder = tmp_path / "my data"
    with pytest.raises(DownloadError) as err:
        fetch_file(facts, folder, opener=opener_serving({}), progress=False)
    msg = err.value.message
    assert facts.filename in msg
    assert facts.md5 in msg
    assert str(folder.absolute()) in msg
    assert "--data synthetic" in msg
    assert all(url in msg for url in facts.mirrors)
    assert err.value.exit_code == 3
    assert "kit data verify cifar100" in err.value.remedy
    assert not (folder / facts.filename).exists() and not _parts(folder)


@pytest.mark.parametrize("old", [None, b"previous contents"], ids=["no-old-file", "old-file"])
def test_download_failing_halfway_leaves_old_file_or_nothing(tmp_path, payload, old):
    data, facts = payload
    folder = tmp_path / "d"
    folder.mkdir()
    target = folder / facts.filename
    if old is not None:
        target.write_bytes(old)
    half = len(data) // 2
    opener = opener_serving({facts.mirrors[0]: data, facts.mirrors[1]: data}, fail_after=half)
    with pytest.raises(DownloadError) as err:
        fetch_file(facts, folder, opener=opener, progress=False)
    assert "Connection reset" in err.value.message
    assert (target.read_bytes() == old) if old is not None else not target.exists()
    assert not _parts(folder)


def test_interrupt_during_download_removes_the_partial_file(tmp_path, payload):
    data, facts = payload
    opener = opener_serving({facts.mirrors[0]: data}, fail_after=len(data) // 3, exc=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        fetch_file(facts, tmp_path, opener=opener, progress=False)
    assert not (tmp_path / facts.filename).exists()
    assert not _parts(tmp_path)


def test_connection_closed_early_is_a_failed_mirror(tmp_path, payload):
    data, facts = payload

    def short(url, timeout):
        r = FakeResponse(data[: len(data) // 2])
        r.headers = {"Content-Length": str(len(data))}
        return r

    with pytest.raises(DownloadError) as err:
        fetch_file(facts, tmp_path, opener=short, progress=False)
    assert "connection ended after" in err.value.message
    assert not (tmp_path / facts.filename).exists()


def test_mirror_override_from_environment(monkeypatch, payload):
    _data, facts = payload
    monkeypatch.setenv("KIT_DATA_MIRRORS", "http://intranet.example/datasets, http://cache.example/x/cifar-100-python.tar.gz")
    assert mirror_urls(facts) == [
        "http://intranet.example/datasets/cifar-100-python.tar.gz",
        "http://cache.example/x/cifar-100-python.tar.gz",
    ]
    assert mirror_urls(facts, ["http://given/file.tgz"]) == ["http://given/file.tgz"]
    monkeypatch.delenv("KIT_DATA_MIRRORS")
    assert mirror_urls(facts) == list(facts.mirrors)


def test_data_dir_comes_from_environment_when_not_given(tmp_path, monkeypatch, payload):
    data, facts = payload
    monkeypatch.setenv("KIT_DATA_DIR", str(tmp_path / "from-env"))
    result = fetch_file(facts, None, opener=opener_serving({facts.mirrors[0]: data}), progress=False)
    assert result.path == tmp_path / "from-env" / facts.filename


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass


def test_real_http_download_from_localhost_with_progress_bar(tmp_path, payload):
    data, facts = payload
    served = tmp_path / "served"
    served.mkdir()
    (served / facts.filename).write_bytes(data)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(served)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        closed = _closed_port()
        urls = [f"http://127.0.0.1:{closed}/{facts.filename}", f"http://127.0.0.1:{port}/missing.tgz", f"http://127.0.0.1:{port}/{facts.filename}"]
        result = fetch_file(facts, tmp_path / "d", urls=urls, progress=True, timeout=5)
    finally:
        server.shutdown()
        server.server_close()
    assert result.url == urls[2]
    assert [reason.split(" ")[0] for _u, reason in result.failures] == ["cannot", "HTTP"]
    assert "404" in result.failures[1][1]
    assert (tmp_path / "d" / facts.filename).read_bytes() == data


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_stale_partial_files_from_a_killed_fetch_are_cleaned_up(tmp_path, payload):
    data, facts = payload
    stale = tmp_path / f".{facts.filename}.abc123.part"
    stale.write_bytes(b"half")
    os.utime(stale, (1, 1))
    fetch_file(facts, tmp_path, opener=opener_serving({facts.mirrors[0]: data}), progress=False)
    assert not stale.exists()


def test_downloaded_file_is_readable_by_other_users(tmp_path, payload):
    # A data folder is often shared with a container's user; mkstemp alone would leave mode 0600.
    data, facts = payload
    old_mask = os.umask(0o022)
    try:
        result = fetch_file(facts, tmp_path, opener=opener_serving({facts.mirrors[0]: data}), progress=False)
    finally:
        os.umask(old_mask)
    assert stat.S_IMODE(result.path.stat().st_mode) == 0o644


def test_disk_error_while_writing_is_a_clear_error_not_a_traceback(tmp_path, payload, monkeypatch):
    data, facts = payload
    import kit.data.fetch as fetch_mod

    real_fsync = os.fsync

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fetch_mod.os, "fsync", disk_full)
    with pytest.raises(DownloadError) as err:
        fetch_file(facts, tmp_path, opener=opener_serving({facts.mirrors[0]: data}), progress=False)
    monkeypatch.setattr(fetch_mod.os, "fsync", real_fsync)
    assert "No space left on device" in err.value.message and "--data-dir" in err.value.remedy
    assert not (tmp_path / facts.filename).exists() and not _parts(tmp_path)


def test_a_run_with_a_corrupt_data_file_says_corrupt_not_missing(tmp_path):
    """`kit run --data real` with a damaged archive in the data folder names it corrupt
    (with the checksum it has), never 'not in the data folder yet'."""
    import subprocess
    import sys

    from kit.facts.datasets import CIFAR100 as REAL

    data = tmp_path / "data"
    data.mkdir()
    (data / REAL.filename).write_bytes(b"not the archive" * 100)
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(repo), KIT_DATA_MIRRORS=f"http://127.0.0.1:{_closed_port()}/")
    proc = subprocess.run(
        [sys.executable, "-m", "kit", "run", "--suite", "cifar", "--data", "real", "--data-dir", str(data),
         "--device", "cpu", "--skip-checks", "--results-dir", str(tmp_path / "results")],
        capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    err = " ".join(proc.stderr.split())  # rich wraps long lines
    assert proc.returncode == 3, proc.stderr
    assert "is corrupt: MD5 is" in err, err
    assert "not in" not in err, err
    assert (data / REAL.filename).read_bytes().startswith(b"not the archive")  # left as it was


def test_a_missing_data_file_is_reported_missing(tmp_path):
    from kit.data.service import describe, fetch_reason

    assert fetch_reason(describe(tmp_path, "cifar100", "real")) == f"cifar100: not in {tmp_path} yet; fetching it"


def test_a_failed_fetch_leaves_no_empty_data_folder_behind(tmp_path, payload):
    """Offline, the folders made for the download go again (the data folder and a missing parent);
    a folder that was there before stays, and so does anything in it."""
    data, facts = payload
    made = tmp_path / "new" / "data"
    with pytest.raises(DownloadError) as err:
        fetch_file(facts, made, opener=opener_serving({}), progress=False)
    assert not (tmp_path / "new").exists()
    assert str(made) in err.value.message and "make the folder first" in err.value.message
    kept = tmp_path / "kept"
    kept.mkdir()
    with pytest.raises(DownloadError):
        fetch_file(facts, kept / "data", opener=opener_serving({}), progress=False)
    assert kept.is_dir() and not (kept / "data").exists()
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C during the download: the same
        fetch_file(facts, tmp_path / "cut", opener=opener_serving({facts.mirrors[0]: data}, fail_after=10,
                                                                   exc=KeyboardInterrupt()), progress=False)
    assert not (tmp_path / "cut").exists()
