"""CIFAR-100 ("python version") reader: checksum first, then three members, then arrays.

The archive ``cifar-100-python.tar.gz`` holds pickled dicts::

    cifar-100-python/train   {"data": uint8 [50000, 3072], "fine_labels": [50000 ints], ...}
    cifar-100-python/test    {"data": uint8 [10000, 3072], "fine_labels": [10000 ints], ...}
    cifar-100-python/meta    {"fine_label_names": [100 str], "coarse_label_names": [20 str]}

    one row of "data" (3072 bytes, channel-major):
      [ R: 32x32 row by row | G: 32x32 | B: 32x32 ]  --reshape(3,32,32).transpose(1,2,0)-->  [32, 32, 3] (HWC)

Pickle can run code, so it is only opened after the archive's checksum matches the
published one, and even then through an unpickler that accepts nothing but numpy
arrays and plain containers. Nothing is extracted to disk: the three members are
read by exact name, regular files only. The decoded arrays are cached as a plain
``.npz`` (loaded with ``allow_pickle=False``) named after the archive's checksum, so
later loads take a fraction of a second and never touch pickle again.
"""

from __future__ import annotations

import io
import os
import pickle
import zlib
from pathlib import Path
from typing import Any

from kit.data.files import find_nearby, kit_dir, resolve_data_dir, verify_file
from kit.data.forms import CifarData
from kit.errors import DataError, UsageError
from kit.facts.datasets import CIFAR100, CIFAR_IMAGE_SHAPE, DatasetFacts
from kit.results.atomic import atomic_open

#: A member bigger than this is not CIFAR (the real train pickle is about 155 MB).
_MAX_MEMBER_BYTES = 512 * 1024 * 1024
_ROW_BYTES = CIFAR_IMAGE_SHAPE[0] * CIFAR_IMAGE_SHAPE[1] * CIFAR_IMAGE_SHAPE[2]


def load_cifar100(
    data_dir: str | os.PathLike | None = None,
    source: str = "real",
    seed: int = 0,
    *,
    facts: DatasetFacts = CIFAR100,
) -> CifarData:
    """Load CIFAR-100 from ``data_dir`` (``source="real"``) or generate its synthetic stand-in.

    ``facts`` carries the expected checksum and sizes; tests pass a small fixture's.
    Raises :class:`DataError` for a missing, wrong, truncated or malformed archive."""
    if source == "synthetic":
        from kit.data.synthetic import cifar100_like

        return cifar100_like(seed=seed)
    if source != "real":
        raise UsageError(f"unknown data source {source!r}; choose real or synthetic")

    folder = resolve_data_dir(data_dir)
    archive = folder / facts.filename
    cache = cache_path(folder, facts)
    cached = _load_cache(cache, facts)
    if cached is not None:
        cached.info.update(_info(facts, archive, cache, loaded_from="cache", how="when the cache was built"))
        return cached

    ver = verify_file(archive, facts)
    if not ver.present:
        raise missing_archive_error(facts, folder)
    if not ver.ok:
        raise DataError(
            f"{archive} is not the published {facts.filename}: {ver.problem}. It was not opened.",
            remedy=f"Delete it and run `kit data fetch {facts.name}` (or put a good copy there by hand).",
        )
    arrays = read_archive(archive, facts)
    _write_cache(cache, arrays, facts)
    data = CifarData(*arrays)
    data.info.update(_info(facts, archive, cache if cache.is_file() else None, loaded_from="archive", how=ver.how))
    data.info["sizes"] = _sizes(data)
    return data


def read_archive(archive: Path, facts: DatasetFacts = CIFAR100) -> tuple[Any, Any, Any, Any, list[str]]:
    """Decode a checksum-verified archive: (train_x, train_y, test_x, test_y, classes).

    Call only on a verified archive; it unpickles."""
    blobs = _read_members(archive, facts)
    import numpy as np

    meta = _unpickle(blobs["meta"], archive, "meta")
    classes = _label_names(meta, archive)
    splits = {}
    for split in ("train", "test"):
        splits[split] = _decode_split(_unpickle(blobs[split], archive, split), archive, split, len(classes), np)
    del blobs

    sizes = facts.sizes
    if sizes is not None:
        for split in ("train", "test"):
            n = len(splits[split][1])
            if n != sizes[split]:
                raise DataError(f"{archive.name}: the {split} split has {n:,} images; the published CIFAR-100 has {sizes[split]:,}.")
        if len(classes) != sizes["classes"]:
            raise DataError(f"{archive.name}: {len(classes)} fine label names; the published CIFAR-100 has {sizes['classes']}.")
    return splits["train"][0], splits["train"][1], splits["test"][0], splits["test"][1], classes


def cache_path(folder: Path, facts: DatasetFacts = CIFAR100) -> Path:
    """The decoded-array cache for the archive with ``facts.md5``."""
    return kit_dir(folder) / f"{facts.name}-{facts.md5}.npz"


def missing_archive_error(facts: DatasetFacts, folder: Path) -> DataError:
    """A missing archive, with a hint when it (or its extracted folder) is somewhere else."""
    target = folder / facts.filename
    elsewhere = [p for p in find_nearby(folder, facts.filename) if p != target]
    extracted = folder / facts.member_dir
    if extracted.is_dir():
        hint = (
            f" There is an extracted {facts.member_dir}{os.sep} folder in {folder}, but the kit reads the archive itself "
            f"(its checksum is what makes the pickled contents safe to open): put {facts.filename} beside it."
        )
    elif elsewhere:
        hint = f" Found {facts.filename} at {elsewhere[0]}: move it into {folder}{os.sep}."
    else:
        hint = ""
    return DataError(
        f"{facts.title} not found: expected {target} (MD5 {facts.md5}).{hint}",
        remedy=(
            f"Run `kit data fetch {facts.name} --data-dir {folder}`, or place the file there by hand; "
            "or use `--data synthetic` (same shapes; throughput only)."
        ),
    )


# ---------------------------------------------------------------------------
# reading the archive
# ---------------------------------------------------------------------------
def _read_members(archive: Path, facts: DatasetFacts) -> dict[str, bytes]:
    import tarfile

    wanted = {f"{facts.member_dir}/{m}": m for m in facts.members}
    blobs: dict[str, bytes] = {}
    others: list[str] = []
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:  # streaming: no index of the whole archive, nothing extracted
                name = member.name[2:] if member.name.startswith("./") else member.name
                if name not in wanted:
                    if len(others) < 8:
                        others.append(name)
                    continue
                short = wanted[name]
                if not member.isreg():
                    raise DataError(f"{archive.name}: {name} is not a regular file; refusing to read it.")
                if member.size > _MAX_MEMBER_BYTES:
                    raise DataError(f"{archive.name}: {name} is {member.size:,} bytes, far larger than CIFAR-100's; refusing to read it.")
                if short in blobs:
                    raise DataError(f"{archive.name}: {name} appears twice; refusing to guess which one is meant.")
                fh = tar.extractfile(member)
                blobs[short] = fh.read() if fh is not None else b""
    except DataError:
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise DataError(
            f"{archive} is truncated or not a gzip-compressed tar archive ({type(exc).__name__}: {exc}).",
            remedy=f"Delete it and run `kit data fetch {facts.name}`.",
        ) from None
    missing = [f"{facts.member_dir}/{m}" for m in facts.members if m not in blobs]
    if missing:
        found = ", ".join(others) if others else "nothing else"
        raise DataError(
            f"{archive.name} does not hold {', '.join(missing)} (it holds {found}). "
            f"The kit expects the 'python version' of {facts.title}.",
            remedy=f"Delete it and run `kit data fetch {facts.name}`.",
        )
    return blobs


class _ArraysOnlyUnpickler(pickle.Unpickler):
    """Accepts numpy arrays, dtypes and builtin containers; refuses every other global."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        # protocol 5 re-packs store arrays via _frombuffer; protocol 2 from Python 3 stores bytes via _codecs.encode
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("_codecs", "encode"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        return super().find_class(module, name)


def _unpickle(blob: bytes, archive: Path, member: str) -> dict:
    try:
        # latin1: the archive was written by Python 2; numpy arrays and str labels decode correctly.
        obj = _ArraysOnlyUnpickler(io.BytesIO(blob), encoding="latin1").load()
    except Exception as exc:  # pickle raises many types for damaged input
        raise DataError(f"{archive.name}: member {member} is not a readable CIFAR pickle ({type(exc).__name__}: {exc}).") from None
    if not isinstance(obj, dict):
        raise DataError(f"{archive.name}: member {member} holds a {type(obj).__name__}, not a dict.")
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}


def _label_names(meta: dict, archive: Path) -> list[str]:
    names = meta.get("fine_label_names")
    if not isinstance(names, (list, tuple)) or not names:
        raise DataError(f"{archive.name}: meta has no fine_label_names list.")
    return [n.decode("latin1") if isinstance(n, bytes) else str(n) for n in names]


def _decode_split(d: dict, archive: Path, split: str, n_classes: int, np: Any) -> tuple[Any, Any]:
    data, labels = d.get("data"), d.get("fine_labels")
    if not isinstance(data, np.ndarray) or labels is None:
        raise DataError(f"{archive.name}: {split} lacks a 'data' array or 'fine_labels'.")
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != _ROW_BYTES:
        raise DataError(f"{archive.name}: {split} 'data' is {data.dtype} {list(data.shape)}; expected uint8 [N, {_ROW_BYTES}].")
    y = np.asarray(labels, dtype=np.int64)
    if y.shape != (data.shape[0],):
        raise DataError(f"{archive.name}: {split} has {data.shape[0]} images but {y.size} labels.")
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise DataError(f"{archive.name}: {split} labels run from {y.min()} to {y.max()}; expected 0..{n_classes - 1}.")
    h, w, c = CIFAR_IMAGE_SHAPE
    x = np.ascontiguousarray(data.reshape(-1, c, h, w).transpose(0, 2, 3, 1))
    return x, y


# ---------------------------------------------------------------------------
# the .npz cache
# ---------------------------------------------------------------------------
_CACHE_KEYS = ("train_x", "train_y", "test_x", "test_y", "classes", "source_md5")


def _write_cache(path: Path, arrays: tuple, facts: DatasetFacts) -> None:
    import numpy as np

    train_x, train_y, test_x, test_y, classes = arrays
    try:
        with atomic_open(path, public=True) as fh:
            np.savez(fh, train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y, classes=np.array(classes), source_md5=np.array(facts.md5))
    except OSError:
        return  # read-only folder, disk full or similar: carry on without a cache (the archive is decoded each time)


def _load_cache(path: Path, facts: DatasetFacts) -> CifarData | None:
    """The cached arrays, or None (missing, damaged or for another archive: then rebuilt)."""
    if not path.is_file():
        return None
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as npz:
            if set(npz.files) != set(_CACHE_KEYS) or str(npz["source_md5"]) != facts.md5:
                raise ValueError("cache for another archive")
            data = CifarData(npz["train_x"], npz["train_y"], npz["test_x"], npz["test_y"], [str(c) for c in npz["classes"]])
    except Exception:
        try:
            path.unlink()
        except OSError:
            pass
        return None
    sizes = facts.sizes
    h, w, c = CIFAR_IMAGE_SHAPE
    ok = data.train_x.shape[1:] == (h, w, c) and data.train_x.dtype == np.uint8 and len(data.train_y) == len(data.train_x)
    if sizes is not None:
        ok = ok and len(data.train_x) == sizes["train"] and len(data.test_x) == sizes["test"] and len(data.classes) == sizes["classes"]
    if not ok:
        try:  # Path.unlink has no missing_ok before Python 3.8, which the cuda10 image runs
            path.unlink()
        except FileNotFoundError:
            pass
        return None
    data.info["sizes"] = _sizes(data)
    return data


def _sizes(data: CifarData) -> dict[str, int]:
    return {"train": int(len(data.train_x)), "test": int(len(data.test_x)), "classes": len(data.classes)}


def _info(facts: DatasetFacts, archive: Path, cache: Path | None, *, loaded_from: str, how: str) -> dict[str, Any]:
    return {
        "dataset": facts.name,
        "source": "real",
        "file": facts.filename,
        "path": str(archive),
        "md5": facts.md5,
        "sha256": facts.sha256,
        "checksum_verified": True,
        "verified": how,
        "loaded_from": loaded_from,
        "cache": str(cache) if cache else None,
    }
