"""WikiText-2 (word level) reader with pytorch/examples word_language_model semantics.

Where the text comes from, in order of preference::

    data/wikitext-2/wiki.{train,valid,test}.tokens  + .kit-extracted.json  (extracted by the kit
                                                      from the verified zip; sha256 re-checked)
    data/wikitext-2-v1.zip  (MD5-verified, then exactly three members extracted, nothing else)
    data/wikitext-2/wiki.{train,valid,test}.tokens   (placed by hand: no archive checksum to check,
                                                      so the published token counts are the check)

How a file becomes ids (word_language_model/data.py)::

    " = Valkyria Chronicles III = \\n"  ->  ["=", "Valkyria", "Chronicles", "III", "=", "<eos>"]
    " \\n"                               ->  ["<eos>"]

Each line is split on whitespace and ``<eos>`` appended; ids are given in order of
first appearance over train, then valid, then test. That is why the published
counts (2,088,628 / 217,646 / 245,569 tokens, 33,278 words) include ``<eos>``.
"""

from __future__ import annotations

import json
import os
import stat
import zlib
from array import array
from pathlib import Path
from typing import Any

from kit.data.files import find_nearby, hash_file, resolve_data_dir, verify_file
from kit.errors import DataError, UsageError
from kit.data.forms import EOS, Corpus, Dictionary, pad_vocabulary
from kit.facts.datasets import WIKITEXT2, DatasetFacts
from kit.results.atomic import atomic_open

SPLITS = ("train", "valid", "test")
MARKER = ".kit-extracted.json"
#: The real train file is about 11 MB; anything far bigger is not WikiText-2.
_MAX_MEMBER_BYTES = 64 * 1024 * 1024


def load_wikitext2(
    data_dir: str | os.PathLike | None = None,
    source: str = "real",
    seed: int = 0,
    pad_vocab_to: int = 1,
    *,
    facts: DatasetFacts = WIKITEXT2,
    splits: tuple[str, ...] = SPLITS,
) -> Corpus:
    """Load WikiText-2 (``source="real"``) or generate its synthetic stand-in.

    ``facts`` carries the zip's checksum and the published counts; tests pass a
    small fixture's (``sizes=None`` skips the count check). ``splits``: the splits the
    caller reads (all three by default). With fewer, a folder placed by hand that holds
    only those will do (the real valid and test splits without the train split, say);
    the splits not read are empty, and ids are given over the splits read, in order."""
    if pad_vocab_to < 1:
        raise UsageError("pad_vocab_to must be at least 1")
    if source == "synthetic":
        from kit.data.synthetic import wikitext2_like

        return wikitext2_like(seed=seed, pad_vocab_to=pad_vocab_to)
    if source != "real":
        raise UsageError(f"unknown data source {source!r}; choose real or synthetic")

    import numpy as np

    folder = resolve_data_dir(data_dir)
    splits = _check_splits(splits)
    token_dir, provenance = prepare_wikitext2(folder, facts, splits)
    dictionary, ids = read_corpus(token_dir, facts, splits)
    arrays = {s: np.frombuffer(ids[s], dtype=np.int64).copy() for s in SPLITS}
    n_words = len(dictionary)
    vocab_size = pad_vocabulary(dictionary, pad_vocab_to)
    info = {
        "dataset": facts.name,
        "source": "real",
        **provenance,
        "tokens": {s: int(len(arrays[s])) for s in SPLITS},
        "vocab": n_words,
        "vocab_size": vocab_size,
        "pad_vocab_to": pad_vocab_to,
    }
    if splits != SPLITS:
        info["splits_read"] = list(splits)
    return Corpus(dictionary, arrays["train"], arrays["valid"], arrays["test"], vocab_size, info)


def check_wikitext2(data_dir: str | os.PathLike | None = None, splits: tuple[str, ...] = SPLITS,
                    facts: DatasetFacts = WIKITEXT2) -> None:
    """DataError (exit 3) when the loader would refuse the real data (a folder placed by hand with
    the wrong token counts, a zip that is not the published one): what ``kit run`` checks before
    it makes a run folder. Reads and tokenises the files of ``splits`` (no numpy, no torch)."""
    token_dir, _ = prepare_wikitext2(resolve_data_dir(data_dir), facts, _check_splits(splits))
    read_corpus(token_dir, facts, _check_splits(splits))


def split_members(facts: DatasetFacts, splits=SPLITS) -> list[str]:
    """The file names of ``splits`` (``wiki.valid.tokens``, ...), in the published order."""
    return [m for split, m in zip(SPLITS, facts.members) if split in splits]


def _check_splits(splits) -> tuple[str, ...]:
    wanted = tuple(s for s in SPLITS if s in tuple(splits))  # the published order, whatever the caller's
    if not wanted or len(wanted) != len(tuple(splits)):
        raise UsageError(f"WikiText-2 splits {', '.join(map(str, splits)) or 'none'}: choose from {', '.join(SPLITS)}")
    return wanted


def prepare_wikitext2(folder: Path, facts: DatasetFacts = WIKITEXT2,
                      splits: tuple[str, ...] = SPLITS) -> tuple[Path, dict[str, Any]]:
    """Find (or extract) the three ``.tokens`` files; return their folder and provenance.
    With ``splits`` fewer than three, a folder placed by hand needs only those splits' files."""
    token_dir = folder / facts.member_dir
    zip_path = folder / facts.filename
    paths = [token_dir / m for m in facts.members]

    if all(p.is_file() for p in paths) and marker_matches(token_dir, facts):
        return token_dir, _provenance_zip(facts, zip_path, token_dir, "extracted earlier; files re-checked against the extraction record")

    if zip_path.exists():
        ver = verify_file(zip_path, facts)
        if not ver.ok:
            raise DataError(
                f"{zip_path} is not the published {facts.filename}: {ver.problem}. It was not opened.",
                remedy=f"Delete it and run `kit data fetch {facts.name}`; a {facts.member_dir}{os.sep} folder placed by hand is used when no zip is present.",
            )
        extract_members(zip_path, token_dir, facts)
        return token_dir, _provenance_zip(facts, zip_path, token_dir, f"zip checksum ({ver.how}), then extracted")

    present = [p for p in paths if p.is_file()]
    needed = [token_dir / m for m in split_members(facts, splits)]
    if all(p.is_file() for p in needed):
        return token_dir, {
            "file": None,
            "path": str(token_dir),
            "md5": None,
            "checksum_verified": False,
            "verified": ("placed by hand: no archive checksum; published token counts and vocabulary checked instead"
                         if len(needed) == len(paths) else
                         f"placed by hand, {' and '.join(splits)} split(s) only: no archive checksum; their published token counts checked instead"),
        }
    raise _missing_error(folder, facts, present, splits)


def read_corpus(token_dir: Path, facts: DatasetFacts = WIKITEXT2,
                splits: tuple[str, ...] = SPLITS) -> tuple[Dictionary, dict[str, array]]:
    """Tokenise the files of ``splits`` (all three by default; no numpy needed); the others are
    empty. Check the published counts when ``facts.sizes`` (the vocabulary only when all three are read)."""
    idx2word: list[str] = []
    word2idx: dict[str, int] = {}
    ids: dict[str, array] = {}
    for split, member in zip(SPLITS, facts.members):
        ids[split] = _tokenize(token_dir / member, idx2word, word2idx) if split in splits else array("q")
    sizes = facts.sizes
    if sizes is not None:
        for split, member in zip(SPLITS, facts.members):
            if split in splits and len(ids[split]) != sizes[split]:
                raise DataError(
                    f"{token_dir / member} has {len(ids[split]):,} tokens (counting one <eos> per line); "
                    f"{facts.title} has {sizes[split]:,}. Is it the raw (wikitext-2-raw-v1) version, or an edited file?",
                    remedy=f"Delete {token_dir} and run `kit data fetch {facts.name}`.",
                )
        if len(splits) == len(SPLITS) and len(idx2word) != sizes["vocab"]:
            raise DataError(f"The three files in {token_dir} have {len(idx2word):,} distinct words; {facts.title} has {sizes['vocab']:,}.")
    return Dictionary(idx2word, word2idx), ids


def extract_members(zip_path: Path, token_dir: Path, facts: DatasetFacts = WIKITEXT2) -> None:
    """Extract exactly the expected members of a verified zip into ``token_dir``, each atomically."""
    import zipfile

    try:
        zf = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise DataError(f"{zip_path} is truncated or not a zip archive ({exc}).", remedy=f"Delete it and run `kit data fetch {facts.name}`.") from None
    with zf:
        names = set(zf.namelist())
        wanted = [f"{facts.member_dir}/{m}" for m in facts.members]
        missing = [w for w in wanted if w not in names]
        if missing:
            sample = ", ".join(sorted(names)[:6]) or "nothing"
            raise DataError(f"{zip_path.name} does not hold {', '.join(missing)} (it holds {sample}).")
        try:
            token_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataError(f"Cannot create {token_dir}: {exc.strerror or exc}.", remedy="Fix the folder's permissions, or choose another --data-dir.") from None
        record: dict[str, str] = {}
        for name, member in zip(wanted, facts.members):
            zinfo = zf.getinfo(name)
            # Unix type bits, where the zip has them (many zips carry none): only a regular file will do.
            ftype = stat.S_IFMT(zinfo.external_attr >> 16)
            if zinfo.is_dir() or (ftype and ftype != stat.S_IFREG):
                raise DataError(f"{zip_path.name}: {name} is not a regular file; refusing to extract it.")
            if zinfo.file_size > _MAX_MEMBER_BYTES:
                raise DataError(f"{zip_path.name}: {name} would unpack to {zinfo.file_size:,} bytes; refusing.")
            target = token_dir / member
            _extract_one(zf, zinfo, target, zip_path)
            record[member] = hash_file(target).sha256
    from kit.results.atomic import atomic_write_json

    try:
        atomic_write_json(token_dir / MARKER, {"zip": facts.filename, "zip_md5": facts.md5, "sha256": record})
    except OSError:
        pass  # without the record the files are simply extracted again from the zip next time


def _extract_one(zf: Any, zinfo: Any, target: Path, zip_path: Path) -> None:
    import zipfile

    try:
        with atomic_open(target, public=True) as out, zf.open(zinfo) as src:
            written = 0
            for chunk in iter(lambda: src.read(1 << 20), b""):
                written += len(chunk)
                if written > _MAX_MEMBER_BYTES:
                    raise DataError(f"{zip_path.name}: {zinfo.filename} unpacks to more than it declares; refusing.")
                out.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise DataError(f"{zip_path} is damaged: {zinfo.filename} does not unpack ({exc}).", remedy="Delete it and fetch it again.") from None
    except OSError as exc:
        raise DataError(
            f"Cannot extract {zinfo.filename} into {target.parent}: {exc.strerror or exc}.",
            remedy="Free some disk space or fix the folder's permissions, or choose another --data-dir.",
        ) from None


def marker_matches(token_dir: Path, facts: DatasetFacts) -> bool:
    try:
        record = json.loads((token_dir / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if record.get("zip_md5") != facts.md5:
        return False
    sums = record.get("sha256") or {}
    return all(sums.get(m) == hash_file(token_dir / m).sha256 for m in facts.members)


def _provenance_zip(facts: DatasetFacts, zip_path: Path, token_dir: Path, how: str) -> dict[str, Any]:
    return {"file": facts.filename, "path": str(token_dir), "archive": str(zip_path), "md5": facts.md5, "checksum_verified": True, "verified": how}


def _tokenize(path: Path, idx2word: list[str], word2idx: dict[str, int]) -> array:
    text = _read_utf8(path)
    # Universal newlines, as Python's text mode (and word_language_model) reads them.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line does not start another
    out = array("q")
    append = out.append
    lookup = word2idx.get
    for line in lines:
        for word in line.split() + [EOS]:
            i = lookup(word)
            if i is None:
                i = word2idx[word] = len(idx2word)
                idx2word.append(word)
            append(i)
    return out


def _read_utf8(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"Cannot read {path}: {exc.strerror or exc}.") from None
    utf16 = raw[:2] in (b"\xff\xfe", b"\xfe\xff")
    if not utf16 and b"\x00" in raw:
        utf16 = True  # UTF-16 without a byte-order mark: every ASCII letter comes with a NUL
    if utf16:
        raise DataError(
            f"{path} looks like UTF-16 text; WikiText-2's .tokens files are UTF-8.",
            remedy="Re-save it as UTF-8 (e.g. `iconv -f UTF-16 -t UTF-8`), or delete it and run `kit data fetch wikitext2`.",
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1].hex()
        raise DataError(
            f"{path} is not valid UTF-8: byte 0x{bad} at offset {exc.start:,} ({exc.reason}). "
            "WikiText-2's .tokens files are UTF-8; this one was probably re-saved as Latin-1 or Windows-1252.",
            remedy="Re-save it as UTF-8, or delete it and run `kit data fetch wikitext2`.",
        ) from None


def _missing_error(folder: Path, facts: DatasetFacts, present: list[Path], splits: tuple[str, ...] = SPLITS) -> DataError:
    token_dir = folder / facts.member_dir
    members = split_members(facts, splits)
    expected = ", ".join(members)
    if present:
        lacking = [m for m in members if not (token_dir / m).is_file()]
        return DataError(
            f"{token_dir} is incomplete: it lacks {', '.join(lacking)} (all of {expected} are needed).",
            remedy=f"Run `kit data fetch {facts.name}`, or put the missing files there by hand.",
        )
    hint = ""
    elsewhere = [p for p in find_nearby(folder, facts.members[0]) if p.parent != token_dir]
    zips = [p for p in find_nearby(folder, facts.filename) if p != folder / facts.filename]
    raws = find_nearby(folder, "wiki.train.raw")
    if elsewhere:
        hint = f" Found {facts.members[0]} in {elsewhere[0].parent}: the three .tokens files belong directly in {token_dir}{os.sep}."
    elif zips:
        hint = f" Found {facts.filename} at {zips[0]}: move it into {folder}{os.sep}."
    elif raws:
        hint = f" Found wiki.train.raw in {raws[0].parent}: that is the raw version; the benchmark uses the tokenised v1 ({facts.filename})."
    return DataError(
        f"{facts.title} not found: expected {folder / facts.filename} (MD5 {facts.md5}) or the folder {token_dir}{os.sep} "
        f"with {expected}.{hint}",
        remedy=(
            f"Run `kit data fetch {facts.name} --data-dir {folder}`, or place the zip (or the extracted folder) there by hand; "
            "or use `--data synthetic` (same shapes; throughput only)."
        ),
    )


def corpus_provenance(corpus, model_vocab_size: int, pad_vocab_to: int) -> dict:
    """What a language-model cell records about the corpus it read: the reader's own ``info``
    (real or synthetic, where from) and the sizes (the LSTM and GPT suites add their own)."""
    info = dict(getattr(corpus, "info", {}) or {})
    info.update({
        "vocab_words": len(corpus.dictionary.idx2word),
        "model_vocab_size": model_vocab_size,
        "pad_vocab_to": pad_vocab_to,
        "train_tokens": int(len(corpus.train)),
        "valid_tokens": int(len(corpus.valid)),
    })
    return info
