"""WikiText-2, word level, v1: the LSTM and GPT suites' text (kit.facts.datasets.WIKITEXT2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from kit.data.files import checksum_check, require_ok, verify_file
from kit.data.registry import DataSet
from kit.data.synthetic import wikitext2_like
from kit.data.wikitext import (SPLITS, check_wikitext2, load_wikitext2, marker_matches, prepare_wikitext2, read_corpus,
                               split_members)
from kit.facts.datasets import WIKITEXT2, DatasetFacts


def present(folder: Path, facts: DatasetFacts, ver: Any, splits: Optional[Sequence[str]]) -> dict:
    """The extracted token files where the zip does not verify: those of a verified zip (its
    extraction record matches), or files placed by hand, all three or those of ``splits`` (their
    published token counts are checked when loaded)."""
    if ver.ok:
        return {}
    token_dir = folder / facts.member_dir
    wanted = split_members(facts, SPLITS if splits is None else splits)
    if all((token_dir / m).is_file() for m in facts.members):
        extracted_ok = marker_matches(token_dir, facts)
        return {"path": str(token_dir), "present": True, "checksum_verified": extracted_ok,
                "verified": "files match the extraction record of the verified zip" if extracted_ok else None,
                "problem": None if extracted_ok else "placed by hand: no archive checksum (token counts are checked when loaded)",
                "placed_by_hand": not extracted_ok}
    if len(wanted) < len(facts.members) and all((token_dir / m).is_file() for m in wanted):
        return {"path": str(token_dir), "present": True, "checksum_verified": False, "verified": None,
                "splits": [split for split in SPLITS if split in splits],
                "problem": f"placed by hand, {', '.join(wanted)} only: no archive checksum (token counts are checked when loaded)",
                "placed_by_hand": True}
    return {}


def prepare(folder: Path, facts: DatasetFacts) -> Path:
    """The zip's three token files, extracted beside it."""
    return prepare_wikitext2(folder, facts)[0]


def verify(folder: Path, facts: DatasetFacts) -> list:
    """The zip hashed in full if present (else a folder placed by hand), then the published token
    counts and vocabulary."""
    archive = folder / facts.filename
    checks = []
    if archive.exists():
        ver = verify_file(archive, facts, trust_stamp=False)
        require_ok(ver, facts)
        checks.append(checksum_check(ver, facts))
    token_dir, prov = prepare_wikitext2(folder, facts)
    if not archive.exists():
        checks.append({"check": "checksum", "ok": prov["checksum_verified"], "detail": prov["verified"]})
    dictionary, ids = read_corpus(token_dir, facts)
    counts = ", ".join(f"{s} {len(ids[s]):,}" for s in SPLITS)
    return checks + [{"check": "sizes", "ok": True, "detail": f"tokens {counts}; vocabulary {len(dictionary):,}"}]


def check_placed(data_dir: Any, splits: Optional[Sequence[str]]) -> None:
    """Files placed by hand: their published token counts, before a run folder exists (exit 3)."""
    check_wikitext2(data_dir, tuple(splits or SPLITS))


DATASET = DataSet(
    facts=WIKITEXT2, help="2 million words of Wikipedia text, tokenised (the LSTM and GPT suites')",
    aliases=("wikitext-2", "wikitext"), load=load_wikitext2, synthetic=wikitext2_like, verify=verify,
    prepare=prepare, present=present, check_placed=check_placed,
)
