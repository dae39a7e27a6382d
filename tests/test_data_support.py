"""Builders for small data set files in the real on-disk formats (used by the other test_data_* modules).

FIXTURES: every archive here is made up by the test (random pixels, a few lines
of text); their checksums and sizes are computed here, never the published ones.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import pickle
import tarfile
import zipfile
from pathlib import Path

from kit.facts.datasets import CIFAR100, WIKITEXT2, DatasetFacts

FIXTURE_MIRROR = "http://fixture.invalid/"


def md5_sha256(path: Path) -> tuple[str, str]:
    data = Path(path).read_bytes()
    return hashlib.md5(data).hexdigest(), hashlib.sha256(data).hexdigest()


def facts_for(base: DatasetFacts, archive: Path, sizes: dict | None) -> DatasetFacts:
    """The real facts with the fixture archive's checksums and sizes swapped in."""
    md5, sha = md5_sha256(archive)
    return dataclasses.replace(base, md5=md5, sha256=sha if base.sha256 else None, sizes=sizes, mirrors=(FIXTURE_MIRROR + base.filename,))


# ---------------------------------------------------------------------------
# CIFAR-100 "python version": tar.gz of pickled dicts (Python 2 style global names)
# ---------------------------------------------------------------------------
def cifar_split(n: int, n_classes: int = 100, seed: int = 0) -> dict:
    import numpy as np

    rng = np.random.default_rng(seed)
    return {
        "batch_label": "fixture batch",
        "filenames": [f"img_{i}.png" for i in range(n)],
        "fine_labels": [int(v) for v in rng.integers(0, n_classes, n)],
        "coarse_labels": [int(v) for v in rng.integers(0, 20, n)],
        "data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
    }


def py2_style_pickle(obj: object) -> bytes:
    """Protocol 2, with numpy's pre-2.0 module name as in the real (Python 2) archive."""
    return pickle.dumps(obj, protocol=2).replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")


def make_cifar_tarball(
    path: Path,
    n_train: int = 20,
    n_test: int = 10,
    *,
    prefix: str = "cifar-100-python/",
    members: dict[str, bytes] | None = None,
    seed: int = 0,
) -> Path:
    """A cifar-100-python.tar.gz with ``n_train``/``n_test`` images; ``members`` overrides contents."""
    contents = {
        "train": py2_style_pickle(cifar_split(n_train, seed=seed)),
        "test": py2_style_pickle(cifar_split(n_test, seed=seed + 1)),
        "meta": py2_style_pickle({"fine_label_names": [f"class_{i}" for i in range(100)], "coarse_label_names": [f"super_{i}" for i in range(20)]}),
        "file.txt~": b"",
    }
    if members is not None:
        contents = members
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        if prefix:
            d = tarfile.TarInfo(prefix.rstrip("/"))
            d.type = tarfile.DIRTYPE
            tar.addfile(d)
        for name, blob in contents.items():
            info = tarfile.TarInfo(prefix + name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


def cifar_fixture(data_dir: Path, n_train: int = 20, n_test: int = 10, **kw) -> DatasetFacts:
    archive = make_cifar_tarball(data_dir / CIFAR100.filename, n_train, n_test, **kw)
    return facts_for(CIFAR100, archive, {"train": n_train, "test": n_test, "classes": 100, "coarse_classes": 20})


# ---------------------------------------------------------------------------
# WikiText-2: wikitext-2/wiki.{train,valid,test}.tokens, and a zip of that folder
# ---------------------------------------------------------------------------
#: Lines shaped like the real files (leading space, " = heading = ", blank " " lines).
WIKI_TEXTS = {
    "train": " \n = Valkyria Chronicles III = \n \n Senjō no Valkyria 3 : <unk> Chronicles \n",
    "valid": " \n = Homarus gammarus = \n the lobster \n",
    "test": " \n = Robert Boulter = \n Robert is an actor \n",
}
#: Hand-counted, one <eos> per line: train 1+6+1+8 = 16, valid 1+5+3 = 9, test 1+5+5 = 11.
#: Distinct words: train 10 (<eos> = Valkyria Chronicles III Senjō no 3 : <unk>), valid adds 4
#: (Homarus gammarus the lobster), test adds 5 (Robert Boulter is an actor): 19.
WIKI_SIZES = {"train": 16, "valid": 9, "test": 11, "vocab": 19}


def write_wikitext_folder(token_dir: Path, texts: dict[str, str] | None = None, encoding: str = "utf-8") -> Path:
    texts = texts or WIKI_TEXTS
    token_dir.mkdir(parents=True, exist_ok=True)
    for split, text in texts.items():
        (token_dir / f"wiki.{split}.tokens").write_bytes(text.encode(encoding))
    return token_dir


def make_wikitext_zip(path: Path, texts: dict[str, str] | None = None, *, prefix: str = "wikitext-2/") -> Path:
    texts = texts or WIKI_TEXTS
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(prefix, b"")
        for split, text in texts.items():
            zf.writestr(f"{prefix}wiki.{split}.tokens", text.encode("utf-8"))
    return path


def wikitext_fixture(data_dir: Path, **kw) -> DatasetFacts:
    archive = make_wikitext_zip(data_dir / WIKITEXT2.filename, **kw)
    return facts_for(WIKITEXT2, archive, dict(WIKI_SIZES))


# ---------------------------------------------------------------------------
# Download stand-ins: no network
# ---------------------------------------------------------------------------
class FakeResponse:
    """A urllib-like response that serves ``data`` in chunks, optionally failing after ``fail_after`` bytes."""

    def __init__(self, data: bytes, *, fail_after: int | None = None, exc: BaseException | None = None, chunk: int = 1000):
        self.data, self.fail_after, self.exc, self.chunk = data, fail_after, exc, chunk
        self.pos = 0
        self.headers = {"Content-Length": str(len(data))}
        self.closed = False

    def read(self, n: int = -1) -> bytes:
        if self.fail_after is not None and self.pos >= self.fail_after:
            raise self.exc or ConnectionResetError(104, "Connection reset by peer")
        n = min(n if n > 0 else len(self.data), self.chunk)
        out = self.data[self.pos : self.pos + n]
        self.pos += len(out)
        return out

    def close(self) -> None:
        self.closed = True


def opener_serving(files: dict[str, bytes], calls: list[str] | None = None, **response_kw):
    """An opener that serves ``files`` by URL and refuses every other URL like an offline machine."""

    def opener(url: str, timeout: float):
        if calls is not None:
            calls.append(url)
        if url in files:
            return FakeResponse(files[url], **response_kw)
        raise OSError(101, "Network is unreachable")

    return opener


def test_fixture_archives_are_in_the_real_formats(tmp_path):
    facts = cifar_fixture(tmp_path)
    with tarfile.open(tmp_path / facts.filename, "r:gz") as tar:
        names = tar.getnames()
        train = tar.extractfile("cifar-100-python/train").read()
    assert {"cifar-100-python/train", "cifar-100-python/test", "cifar-100-python/meta"} <= set(names)
    assert b"cnumpy.core.multiarray\n_reconstruct" in train  # the Python 2 era global name
    wfacts = wikitext_fixture(tmp_path)
    with zipfile.ZipFile(tmp_path / wfacts.filename) as zf:
        assert "wikitext-2/wiki.valid.tokens" in zf.namelist()
    assert wfacts.md5 != WIKITEXT2.md5 and facts.md5 != CIFAR100.md5
