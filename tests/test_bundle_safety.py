"""Opening untrusted bundles: every malicious or broken archive is refused with
its own message, and nothing is ever written outside the test's folder.

Archives are crafted here with ``tarfile`` (and by hand for the bombs); the
results inside come from the fixture factory (invented numbers).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import struct
import zlib
from pathlib import Path

import pytest

from fixtures.results.factory import (
    bundle_members as _members,
    true_manifest as _manifest_for,
    write_bundle,
    make_env,
    make_results,
    make_run_dir,
    standard_cells,
)
from kit.report.export import export_run
from kit.bundle.safe_open import Limits, open_bundle
from kit.errors import BundleError, SchemaError

MiB = 1024 * 1024


# --- helpers ----------------------------------------------------------------------------

#: what a bundle (or index) written by a newer kit is answered with, word for word
NEWER_KIT = ("Read it with a newer kit: in the kit's clone, git pull and pip install . "
             "(make run rebuilds its image after the pull by itself).")


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A sentinel folder and an empty working directory; checks both are untouched."""
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("sentinel")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return tmp_path


@pytest.fixture(scope="module")
def good_bundle(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("good")
    run = make_run_dir(root / "runs", make_results(standard_cells(), make_env()))
    return export_run(run, root / "bundles")


def _write_targz(path: Path, files: dict[str, bytes], extra: list = (), top: str = "b") -> Path:
    return write_bundle(path, files, rehash=False, top=top, extra=tuple(extra))


def _reject(path: Path, sandbox: Path, match: str, exc=BundleError, limits: Limits | None = None):
    before = _snapshot(sandbox)
    with pytest.raises(exc, match=match) as info:
        open_bundle(path, limits) if limits else open_bundle(path)
    assert _snapshot(sandbox) == before, "opening a bundle wrote or changed files"
    assert not any((sandbox / "cwd").iterdir())
    return info.value


# --- the good case ------------------------------------------------------------------------

def test_valid_bundle_opens_without_writing_anything(good_bundle, sandbox):
    before = _snapshot(sandbox)
    b = open_bundle(good_bundle)
    assert _snapshot(sandbox) == before
    assert {"manifest.json", "results.json", "env.json", "journal.jsonl", "run.log", "report.html"} <= set(b.files)
    assert any(n.startswith("charts/") and n.endswith(".svg") for n in b.files)
    assert len(b.results.cells) == 6


def test_repacked_bundle_with_fresh_manifest_still_opens(good_bundle, sandbox):
    files = _members(good_bundle)
    files["manifest.json"] = _manifest_for(files)
    b = open_bundle(_write_targz(sandbox / "ok.tar.gz", files, top=""))  # files at the root are fine too
    assert b.results.run_id.startswith("FIXTURE")


# --- unsafe members -------------------------------------------------------------------------

def _info(name: str, type_=tarfile.REGTYPE, size: int = 0, linkname: str = "") -> tarfile.TarInfo:
    i = tarfile.TarInfo(name)
    i.type, i.size, i.linkname = type_, size, linkname
    return i


def test_path_traversal_member_is_rejected(good_bundle, sandbox):
    path = _write_targz(sandbox / "t.tar.gz", _members(good_bundle), [_info("../evil", size=4)], top="")
    _reject(path, sandbox, r"'\.\./evil' has a '\.\.' component")
    assert not (sandbox / "evil").exists()


def test_nested_path_traversal_member_is_rejected(good_bundle, sandbox):
    path = _write_targz(sandbox / "t.tar.gz", _members(good_bundle), [_info("b/charts/../../../evil", size=4)])
    _reject(path, sandbox, r"path traversal")


def test_absolute_path_member_is_rejected(good_bundle, sandbox):
    target = sandbox / "abs-evil"
    path = _write_targz(sandbox / "a.tar.gz", _members(good_bundle), [_info(str(target), size=4)])
    _reject(path, sandbox, "is an absolute path")
    assert not target.exists()


def test_symlink_to_etc_passwd_is_rejected(good_bundle, sandbox):
    path = _write_targz(sandbox / "s.tar.gz", _members(good_bundle), [_info("b/passwd", tarfile.SYMTYPE, linkname="/etc/passwd")])
    _reject(path, sandbox, r"is a symbolic link \(to '/etc/passwd'\)")


def test_hard_link_is_rejected(good_bundle, sandbox):
    path = _write_targz(sandbox / "h.tar.gz", _members(good_bundle), [_info("b/copy.json", tarfile.LNKTYPE, linkname="b/results.json")])
    _reject(path, sandbox, "is a hard link")


def test_fifo_member_is_rejected(good_bundle, sandbox):
    path = _write_targz(sandbox / "f.tar.gz", _members(good_bundle), [_info("b/pipe", tarfile.FIFOTYPE)])
    _reject(path, sandbox, r"is a FIFO")


def test_device_member_is_rejected(good_bundle, sandbox):
    dev = _info("b/null", tarfile.CHRTYPE)
    dev.devmajor, dev.devminor = 1, 3
    path = _write_targz(sandbox / "d.tar.gz", _members(good_bundle), [dev])
    _reject(path, sandbox, "is a character device")


def test_duplicate_member_is_rejected(good_bundle, sandbox):
    files = _members(good_bundle)
    path = _write_targz(sandbox / "dup.tar.gz", files, [_info("b/results.json", size=3)])
    _reject(path, sandbox, "appears twice")


def test_too_many_members_are_rejected(sandbox):
    path = _write_targz(sandbox / "many.tar.gz", {f"f{i}.txt": b"" for i in range(1001)})
    _reject(path, sandbox, "more than 1000 entries")


def test_total_size_cap_is_enforced(sandbox):
    path = _write_targz(sandbox / "big.tar.gz", {f"f{i}.bin": b"\0" * MiB for i in range(3)})
    _reject(path, sandbox, "add up to more than 2 MiB", limits=Limits(max_file_bytes=MiB, max_total_bytes=2 * MiB))


# --- decompression bombs ----------------------------------------------------------------------

def _stream_bomb(path: Path, header: tarfile.TarInfo, zeros: int) -> Path:
    """A valid .tar.gz whose one member is ``zeros`` bytes of zeros, written
    streaming and never held in memory. Compressing 300 MiB takes seconds, so
    one MiB of zeros is deflated once after a full flush (which resets the
    compressor's history, so every copy of the block is identical) and the
    block is written ``zeros // MiB`` times: about 1000:1."""
    head = header.tobuf(format=tarfile.USTAR_FORMAT) if header.type != tarfile.XHDTYPE else _raw_header(header)
    chunk = b"\0" * MiB
    z = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate; the gzip wrapper is written by hand
    with open(path, "wb") as raw:
        raw.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")
        raw.write(z.compress(head) + z.flush(zlib.Z_FULL_FLUSH))
        block = z.compress(chunk) + z.flush(zlib.Z_FULL_FLUSH)
        crc = zlib.crc32(head)
        for _ in range(zeros // MiB):
            raw.write(block)
            crc = zlib.crc32(chunk, crc)
        end = b"\0" * 1024
        raw.write(z.compress(end) + z.flush())
        crc = zlib.crc32(end, crc)
        raw.write(struct.pack("<II", crc, (len(head) + zeros + len(end)) & 0xFFFFFFFF))
    return path


def _raw_header(info: tarfile.TarInfo) -> bytes:
    """A ustar header with any type flag (tarfile will not emit a bare pax header itself)."""
    info_dict = info.get_info()
    return tarfile.TarInfo._create_header(info_dict, tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")


def test_decompression_bomb_member_is_rejected_from_its_header(sandbox, monkeypatch):
    path = _stream_bomb(sandbox / "bomb.tar.gz", _info("b/zeros.bin", size=300 * MiB), 300 * MiB)
    assert path.stat().st_size < MiB  # a few hundred MiB of zeros in under 1 MiB
    opened = []
    real = tarfile.TarFile.extractfile
    monkeypatch.setattr(tarfile.TarFile, "extractfile", lambda tf, m: opened.append(m.name) or real(tf, m))
    _reject(path, sandbox, r"is 300\.0 MiB, over the 64 MiB limit per file")
    assert "b/zeros.bin" not in opened  # refused from its header, its data never read


def test_decompression_bomb_hidden_in_a_pax_header_is_stopped_while_streaming(sandbox):
    # A pax extended header is read by tarfile itself before we see a member:
    # only the byte budget of the decompressing stream can stop this one.
    path = _stream_bomb(sandbox / "pax-bomb.tar.gz", _info("b/PaxHeader", tarfile.XHDTYPE, size=300 * MiB), 300 * MiB)
    assert path.stat().st_size < MiB
    _reject(path, sandbox, "refused as a possible decompression bomb", limits=Limits(max_total_bytes=16 * MiB))


# --- integrity and format -------------------------------------------------------------------------

def test_tampered_file_is_rejected_and_named(good_bundle, sandbox):
    files = _members(good_bundle)
    results = files["results.json"]
    i = results.index(b'"throughput_items_per_s": ') + len(b'"throughput_items_per_s": ')
    files["results.json"] = results[:i] + (b"9" if results[i:i + 1] != b"9" else b"8") + results[i + 1:]  # same size
    path = _write_targz(sandbox / "tampered.tar.gz", files)
    err = _reject(path, sandbox, r"results\.json: sha256 does not match the manifest")
    assert "failed verification" in err.message


def test_manifest_that_lies_about_a_hash_is_rejected(good_bundle, sandbox):
    files = _members(good_bundle)
    manifest = json.loads(files["manifest.json"])
    manifest["files"]["report.html"]["sha256"] = "0" * 64
    files["manifest.json"] = json.dumps(manifest).encode()
    _reject(_write_targz(sandbox / "lie.tar.gz", files), sandbox, r"report\.html: sha256 does not match")


def test_file_not_listed_in_manifest_is_rejected(good_bundle, sandbox):
    files = _members(good_bundle)
    files["extra.py"] = b"print('hello')"
    _reject(_write_targz(sandbox / "extra.tar.gz", files), sandbox, r"extra\.py: in the archive but not listed")


def test_file_missing_from_archive_is_rejected(good_bundle, sandbox):
    files = _members(good_bundle)
    del files["run.log"]
    _reject(_write_targz(sandbox / "missing.tar.gz", files), sandbox, r"run\.log: listed in the manifest but missing")


def test_missing_manifest_is_rejected(good_bundle, sandbox):
    files = _members(good_bundle)
    del files["manifest.json"]
    _reject(_write_targz(sandbox / "nomanifest.tar.gz", files), sandbox, "has no manifest.json")


def test_unknown_schema_version_names_both_versions(good_bundle, sandbox):
    files = _members(good_bundle)
    files["manifest.json"] = _manifest_for(files, schema_version=99)
    err = _reject(_write_targz(sandbox / "v99.tar.gz", files), sandbox, "schema v99", exc=SchemaError)
    assert "v1" in err.message and "newer than this kit" in err.message
    assert err.remedy == NEWER_KIT


def test_a_newer_bundle_format_says_how_to_get_a_newer_kit(good_bundle, sandbox):
    """There is no `mpkit` on any package index: the remedy names what works (the clone, the image)."""
    files = _members(good_bundle)
    files["manifest.json"] = _manifest_for(files, bundle_format=99)
    err = _reject(_write_targz(sandbox / "f99.tar.gz", files), sandbox, "bundle format 99", exc=SchemaError)
    assert err.remedy == NEWER_KIT


def test_results_with_unknown_schema_version_are_rejected(good_bundle, sandbox):
    files = _members(good_bundle)
    res = json.loads(files["results.json"])
    res["schema_version"] = 0
    files["results.json"] = json.dumps(res).encode()
    files["manifest.json"] = _manifest_for(files)
    _reject(_write_targz(sandbox / "v0.tar.gz", files), sandbox, r"results schema v0, older", exc=SchemaError)


def test_malformed_json_is_rejected(good_bundle, sandbox):
    files = _members(good_bundle)
    files["results.json"] = b'{"schema_version": 1, "cells": [}'
    files["manifest.json"] = _manifest_for(files)
    err = _reject(_write_targz(sandbox / "bad.tar.gz", files), sandbox, r"results\.json is not valid JSON \(line 1", exc=SchemaError)
    assert err.exit_code == 4  # malformed, like a results file with wrong types


def test_malformed_manifest_json_is_rejected(good_bundle, sandbox):
    files = _members(good_bundle)
    files["manifest.json"] = b"{nope"
    _reject(_write_targz(sandbox / "badman.tar.gz", files), sandbox, r"manifest\.json is not valid JSON", exc=SchemaError)


def test_non_gzip_file_is_rejected(sandbox):
    path = sandbox / "plain.tar.gz"
    path.write_text("just text")
    _reject(path, sandbox, "is not a gzip file")


def test_uncompressed_tar_is_rejected(good_bundle, sandbox):
    path = sandbox / "plain.tar"
    with tarfile.open(path, "w") as tf:
        info = tarfile.TarInfo("results.json")
        tf.addfile(info, io.BytesIO(b""))
    _reject(path, sandbox, "is not a gzip file")


def test_truncated_bundle_is_rejected(good_bundle, sandbox):
    path = sandbox / "cut.tar.gz"
    path.write_bytes(good_bundle.read_bytes()[:400])
    _reject(path, sandbox, "truncated")


def test_gzip_of_garbage_is_rejected(sandbox):
    path = sandbox / "garbage.tar.gz"
    path.write_bytes(gzip.compress(os.urandom(4096)))
    _reject(path, sandbox, "not a valid tar archive")
