"""CIFAR-100, python version: the CIFAR suite's images (kit.facts.datasets.CIFAR100)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from kit.data.cifar import cache_path, load_cifar100, missing_archive_error
from kit.data.files import checksum_check, require_ok, verify_file
from kit.data.registry import DataSet
from kit.data.synthetic import cifar100_like
from kit.facts.datasets import CIFAR100, DatasetFacts


def present(folder: Path, facts: DatasetFacts, ver: Any, splits: Optional[Sequence[str]]) -> dict:
    """The decoded cache of a verified archive stands in for the archive, once it is removed."""
    cache = cache_path(folder, facts)
    if ver.present or not cache.is_file():
        return {}
    return {"checksum_verified": True, "verified": "decoded cache of the verified archive (archive since removed)",
            "problem": None, "path": str(cache)}


def verify(folder: Path, facts: DatasetFacts) -> list:
    """The archive hashed in full, then its published sizes (numpy reads the pickles: without it,
    that check is reported as skipped)."""
    ver = verify_file(folder / facts.filename, facts, trust_stamp=False)
    if not ver.present:
        raise missing_archive_error(facts, folder)
    require_ok(ver, facts)
    checks = [checksum_check(ver, facts)]
    try:
        import numpy  # noqa: F401  (the pickles hold numpy arrays)
    except ImportError:
        return checks + [{"check": "sizes", "ok": None, "detail": "not checked: numpy is not installed (pip install numpy)"}]
    s = load_cifar100(folder, "real", facts=facts).info["sizes"]
    return checks + [{"check": "sizes", "ok": True, "detail": f"train {s['train']:,}, test {s['test']:,} images; {s['classes']} classes"}]


DATASET = DataSet(
    facts=CIFAR100, help="60,000 32x32 colour images in 100 classes (the CIFAR suite's)",
    aliases=("cifar-100", "cifar"), load=load_cifar100, synthetic=cifar100_like, verify=verify, present=present,
)
