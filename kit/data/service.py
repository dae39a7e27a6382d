"""What ``kit data`` and the rest of the kit call: fetch, verify, describe, info.

Each function takes a data set name (``cifar100``, ``wikitext2``, or an alias such
as ``cifar`` / ``lstm``), returns a plain dict for printing or for the results'
data provenance, and raises the :class:`kit.errors.DataError` family on failure.
None of them needs numpy except the size check in :func:`verify_dataset` for
CIFAR-100 (its pickles hold numpy arrays); without numpy that check is reported as
skipped rather than failing.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from kit.data.fetch import Opener, fetch_file
from kit.data.files import human_size, kit_dir, resolve_data_dir, stamp_ok, verify_file
from kit.errors import DataError, UsageError
from kit.facts.datasets import DATASETS, DatasetFacts

_ALIASES = {
    "cifar100": "cifar100",
    "cifar-100": "cifar100",
    "cifar": "cifar100",
    "wikitext2": "wikitext2",
    "wikitext-2": "wikitext2",
    "wikitext": "wikitext2",
}


def _suite_data(name: str) -> str | None:
    """A suite's name stands for the one data set it reads (``kit data fetch lstm``)."""
    from kit.results import suites

    found = suites.find(name)
    return found.datasets[0] if found is not None and len(found.datasets) == 1 else None


def dataset_facts(name: str) -> DatasetFacts:
    key = _ALIASES.get(name.lower().strip()) or _suite_data(name.lower().strip())
    if key is None:
        raise UsageError(f"unknown data set {name!r}; choose {' or '.join(DATASETS)}")
    return DATASETS[key]


def describe(data_dir: str | os.PathLike | None, dataset: str, source: str,
             splits: Sequence[str] | None = None) -> dict[str, Any]:
    """Data provenance for results: which data, from which file, checksum verified or not.

    Cheap: uses the verification stamp when the file is unchanged since it was hashed
    (hashing happens once, at fetch or first load). Never raises for missing data.
    ``splits`` (WikiText-2): the splits a run reads, where fewer than all three; a folder
    placed by hand with only those is present (``placed_by_hand``: the loader checks their
    published token counts instead of a checksum)."""
    facts = dataset_facts(dataset)
    if source == "synthetic":
        from kit.data.synthetic import GENERATOR_VERSION, SYNTHETIC_NOTE

        gen = "cifar100_like" if facts.name == "cifar100" else "wikitext2_like"
        return {
            "dataset": facts.name,
            "source": "synthetic",
            "generator": f"kit.data.synthetic.{gen} v{GENERATOR_VERSION}",
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
    if facts.name == "wikitext2" and not ver.ok:
        token_dir = folder / facts.member_dir
        from kit.data.wikitext import SPLITS, _marker_matches, split_members

        wanted = split_members(facts, SPLITS if splits is None else splits)
        if all((token_dir / m).is_file() for m in facts.members):
            extracted_ok = _marker_matches(token_dir, facts)
            out.update(
                path=str(token_dir),
                present=True,
                checksum_verified=extracted_ok,
                verified="files match the extraction record of the verified zip" if extracted_ok else None,
                problem=None if extracted_ok else "placed by hand: no archive checksum (token counts are checked when loaded)",
                placed_by_hand=not extracted_ok,
            )
        elif len(wanted) < len(facts.members) and all((token_dir / m).is_file() for m in wanted):
            out.update(
                path=str(token_dir),
                present=True,
                checksum_verified=False,
                verified=None,
                splits=[split for split in SPLITS if split in splits],
                problem=f"placed by hand, {', '.join(wanted)} only: no archive checksum (token counts are checked when loaded)",
                placed_by_hand=True,
            )
    if facts.name == "cifar100" and not ver.present:
        from kit.data.cifar import cache_path

        cache = cache_path(folder, facts)
        if cache.is_file():
            out.update(checksum_verified=True, verified="decoded cache of the verified archive (archive since removed)", problem=None, path=str(cache))
    return out


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
    """Download (if needed) and verify one data set; WikiText-2 is also extracted."""
    facts = dataset_facts(name)
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
    if facts.name == "wikitext2":
        from kit.data.wikitext import prepare_wikitext2

        token_dir, _prov = prepare_wikitext2(result.path.parent, facts)
        out["extracted_to"] = str(token_dir)
    return out


def verify_dataset(name: str, data_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Hash the archive in full and check the published sizes. Raises DataError on any mismatch."""
    facts = dataset_facts(name)
    folder = resolve_data_dir(data_dir)
    archive = folder / facts.filename
    report: dict[str, Any] = {"dataset": facts.name, "title": facts.title, "data_dir": str(folder), "checks": []}
    checks: list[dict[str, Any]] = report["checks"]

    if facts.name == "cifar100":
        ver = verify_file(archive, facts, trust_stamp=False)
        if not ver.present:
            from kit.data.cifar import missing_archive_error

            raise missing_archive_error(facts, folder)
        _require_ok(ver, facts)
        checks.append(_checksum_check(ver, facts))
        try:
            import numpy  # noqa: F401  (the pickles hold numpy arrays)
        except ImportError:
            checks.append({"check": "sizes", "ok": None, "detail": "not checked: numpy is not installed (pip install numpy)"})
            return report
        from kit.data.cifar import load_cifar100

        data = load_cifar100(folder, "real", facts=facts)
        s = data.info["sizes"]
        checks.append({"check": "sizes", "ok": True, "detail": f"train {s['train']:,}, test {s['test']:,} images; {s['classes']} classes"})
        return report

    # WikiText-2: the zip if present, else a folder placed by hand.
    from kit.data.wikitext import prepare_wikitext2, read_corpus

    if archive.exists():
        ver = verify_file(archive, facts, trust_stamp=False)
        _require_ok(ver, facts)
        checks.append(_checksum_check(ver, facts))
    token_dir, prov = prepare_wikitext2(folder, facts)
    if not archive.exists():
        checks.append({"check": "checksum", "ok": prov["checksum_verified"], "detail": prov["verified"]})
    dictionary, ids = read_corpus(token_dir, facts)
    counts = ", ".join(f"{s} {len(ids[s]):,}" for s in ("train", "valid", "test"))
    checks.append({"check": "sizes", "ok": True, "detail": f"tokens {counts}; vocabulary {len(dictionary):,}"})
    return report


def _require_ok(ver: Any, facts: DatasetFacts) -> None:
    if not ver.ok:
        raise DataError(
            f"{ver.path} is not the published {facts.filename}: {ver.problem}.",
            remedy=f"Delete it and run `kit data fetch {facts.name}` (or put a good copy there by hand).",
        )


def _checksum_check(ver: Any, facts: DatasetFacts) -> dict[str, Any]:
    detail = f"MD5 {ver.md5}" + (f", SHA-256 {ver.sha256}" if facts.sha256 else "") + f" ({human_size(ver.size)})"
    return {"check": "checksum", "ok": True, "detail": detail}


def data_info(data_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """What is in the data folder, without reading any archive (``kit data info``)."""
    folder = resolve_data_dir(data_dir)
    out: dict[str, Any] = {"data_dir": str(folder), "exists": folder.is_dir(), "datasets": [], "leftovers": []}
    for facts in DATASETS.values():
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
        if facts.name == "wikitext2" and all((member_dir / m).is_file() for m in facts.members):
            entry["extracted"] = str(member_dir)
        cache_dir = kit_dir(folder)
        if cache_dir.is_dir():
            entry["caches"] = [{"path": str(p), "size_bytes": p.stat().st_size} for p in sorted(cache_dir.glob(f"{facts.name}-*.npz"))]
        out["datasets"].append(entry)
    if folder.is_dir():
        out["leftovers"] = [str(p) for p in sorted(folder.glob(".*.part"))]
    return out

