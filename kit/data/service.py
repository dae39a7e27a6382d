"""What ``kit data`` and the rest of the kit call: fetch, verify, describe, info.

Each function takes a data set name (``cifar100``, ``wikitext2``, an alias such as ``cifar``, or a
suite that reads one data set such as ``lstm``: kit.data.registry), returns a plain dict for
printing or for the results' data provenance, and raises the :class:`kit.errors.DataError` family
on failure. What differs between data sets is their descriptor's (kit/data/sets/): none of these
functions names one.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from kit.data.fetch import Opener, fetch_file
from kit.data.files import kit_dir, resolve_data_dir, stamp_ok, verify_file
from kit.data.registry import all_datasets, dataset, generator_name
from kit.data.synthetic import GENERATOR_VERSION, SYNTHETIC_NOTE
from kit.errors import UsageError


def describe(data_dir: str | os.PathLike | None, name: str, source: str,
             splits: Sequence[str] | None = None) -> dict[str, Any]:
    """Data provenance for results: which data, from which file, checksum verified or not.

    Cheap: uses the verification stamp when the file is unchanged since it was hashed
    (hashing happens once, at fetch or first load). Never raises for missing data.
    ``splits``: the parts a run reads, where fewer than all; what the folder holds where the
    archive does not verify is the data set's to say (its descriptor's ``present``: a decoded cache,
    files placed by hand, ``placed_by_hand`` when the loader checks them instead of a checksum)."""
    d = dataset(name)
    facts = d.facts
    if source == "synthetic":
        return {
            "dataset": facts.name,
            "source": "synthetic",
            "generator": f"{generator_name(d)} v{GENERATOR_VERSION}",
            "file": None,
            "checksum_verified": None,
            "note": SYNTHETIC_NOTE,
        }
    if source != "real":
        raise UsageError(f"unknown data source {source!r}; choose real or synthetic")

    folder = resolve_data_dir(data_dir)
    archive = folder / facts.filename
    out: dict[str, Any] = {
        "dataset": facts.name,
        "source": "real",
        "title": facts.title,
        "file": facts.filename,
        "path": str(archive),
        "md5_expected": facts.md5,
        "sha256_expected": facts.sha256,
    }
    ver = verify_file(archive, facts, trust_stamp=True)
    out.update(present=ver.present, checksum_verified=ver.ok, verified=ver.how if ver.ok else None, problem=ver.problem)
    if d.present is not None:
        out.update(d.present(folder, facts, ver, splits))
    return out


def check_placed(name: str, data_dir: str | os.PathLike | None, splits: Sequence[str] | None = None) -> None:
    """Files placed by hand (:func:`describe` said ``placed_by_hand``): DataError (exit 3) for what
    the reader would refuse, checked before a run folder exists."""
    d = dataset(name)
    if d.check_placed is not None:
        d.check_placed(data_dir, splits)


def fetch_reason(described: dict[str, Any]) -> str:
    """One line saying why a run fetches a real data set, from :func:`describe`'s answer:
    it is missing, or the file there is corrupt (its checksum does not match), or
    something else is wrong with what is there (unreadable, placed by hand)."""
    name = described["dataset"]
    path = described.get("path")
    problem = described.get("problem") or ""
    if not described.get("present"):
        folder = os.path.dirname(path) if path else "the data folder"
        return f"{name}: not in {folder} yet; fetching it"
    if problem.startswith(("MD5 is", "SHA-256 is")):
        return f"{name}: {path} is corrupt: {problem}; fetching a good copy"
    return f"{name}: {path}: {problem}; fetching a good copy"


def fetch_dataset(
    name: str,
    data_dir: str | os.PathLike | None = None,
    *,
    urls: Sequence[str] | None = None,
    opener: Opener | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Download (if needed) and verify one data set, then prepare it (its descriptor's: WikiText-2
    is extracted)."""
    d = dataset(name)
    facts = d.facts
    result = fetch_file(facts, data_dir, urls=urls, opener=opener, progress=progress, log=log)
    out: dict[str, Any] = {
        "dataset": facts.name,
        "title": facts.title,
        "path": str(result.path),
        "downloaded": result.downloaded,
        "url": result.url,
        "checksum_verified": result.verification.ok,
        "md5": result.verification.md5,
        "sha256": result.verification.sha256,
        "size_bytes": result.verification.size,
        "replaced_bad_file": result.replaced_bad_file,
        "failed_mirrors": result.failures or [],
    }
    if d.prepare is not None:
        out["extracted_to"] = str(d.prepare(result.path.parent, facts))
    return out


def verify_dataset(name: str, data_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Hash the archive in full and check the published sizes (the data set's own checks). Raises
    DataError on any mismatch."""
    d = dataset(name)
    folder = resolve_data_dir(data_dir)
    return {"dataset": d.facts.name, "title": d.facts.title, "data_dir": str(folder), "checks": d.verify(folder, d.facts)}


def data_info(data_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """What is in the data folder, without reading any archive (``kit data info``)."""
    folder = resolve_data_dir(data_dir)
    out: dict[str, Any] = {"data_dir": str(folder), "exists": folder.is_dir(), "datasets": [], "leftovers": []}
    for d in all_datasets():
        facts = d.facts
        archive = folder / facts.filename
        entry: dict[str, Any] = {
            "dataset": facts.name,
            "title": facts.title,
            "file": facts.filename,
            "present": archive.is_file(),
            "size_bytes": archive.stat().st_size if archive.is_file() else None,
            "verified": stamp_ok(archive, facts) if archive.is_file() else None,
            "md5_expected": facts.md5,
            "sha256_expected": facts.sha256,
            "extracted": None,
            "caches": [],
        }
        member_dir = folder / facts.member_dir
        if d.prepare is not None and facts.members and all((member_dir / m).is_file() for m in facts.members):
            entry["extracted"] = str(member_dir)
        cache_dir = kit_dir(folder)
        if cache_dir.is_dir():
            entry["caches"] = [{"path": str(p), "size_bytes": p.stat().st_size} for p in sorted(cache_dir.glob(f"{facts.name}-*.npz"))]
        out["datasets"].append(entry)
    if folder.is_dir():
        out["leftovers"] = [str(p) for p in sorted(folder.glob(".*.part"))]
    return out
