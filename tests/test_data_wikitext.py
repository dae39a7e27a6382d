"""WikiText-2 reader: word_language_model numbering, safe extraction, UTF-8 only, clear layout errors."""

from __future__ import annotations

import dataclasses
import zipfile

import numpy as np
import pytest

from kit.data.service import describe
from kit.data.wikitext import MARKER, load_wikitext2
from kit.errors import DataError
from kit.facts.datasets import WIKITEXT2
from test_data_support import WIKI_SIZES, WIKI_TEXTS, facts_for, make_wikitext_zip, wikitext_fixture, write_wikitext_folder


def test_ids_follow_word_language_model_semantics(tmp_path):
    facts = wikitext_fixture(tmp_path)
    corpus = load_wikitext2(tmp_path, facts=facts)
    words = corpus.dictionary.idx2word
    # first line " " is just <eos>; then " = Valkyria Chronicles III = "
    assert words[:5] == ["<eos>", "=", "Valkyria", "Chronicles", "III"]
    assert [words[i] for i in corpus.train[:8]] == ["<eos>", "=", "Valkyria", "Chronicles", "III", "=", "<eos>", "<eos>"]
    assert [words[i] for i in corpus.valid[-3:]] == ["the", "lobster", "<eos>"]
    assert corpus.train.dtype == np.int64
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (16, 9, 11)
    assert corpus.vocab_size == len(corpus.dictionary) == 19
    assert corpus.dictionary.word2idx["Senjō"] == words.index("Senjō")  # UTF-8 decoded, not mangled


def test_zip_is_verified_then_exactly_three_members_extracted(tmp_path):
    zip_path = make_wikitext_zip(tmp_path / WIKITEXT2.filename)
    with zipfile.ZipFile(zip_path, "a") as zf:
        zf.writestr("wikitext-2/../../escape.txt", b"should never be written")
        zf.writestr("wikitext-2/extra.txt", b"not needed")
    facts = facts_for(WIKITEXT2, zip_path, dict(WIKI_SIZES))
    corpus = load_wikitext2(tmp_path, facts=facts)
    extracted = sorted(p.name for p in (tmp_path / "wikitext-2").iterdir())
    assert extracted == sorted([MARKER, "wiki.test.tokens", "wiki.train.tokens", "wiki.valid.tokens"])
    assert not (tmp_path.parent / "escape.txt").exists()
    assert corpus.info["checksum_verified"] is True and corpus.info["md5"] == facts.md5
    # second load: from the extracted files, re-checked against the extraction record
    zip_path.unlink()
    again = load_wikitext2(tmp_path, facts=facts)
    assert again.info["checksum_verified"] is True and np.array_equal(again.train, corpus.train)


def test_edited_extracted_file_is_not_reported_as_verified(tmp_path):
    facts = wikitext_fixture(tmp_path)
    load_wikitext2(tmp_path, facts=facts)
    (tmp_path / WIKITEXT2.filename).unlink()
    train = tmp_path / "wikitext-2" / "wiki.train.tokens"
    train.write_text(train.read_text(encoding="utf-8").replace("III", "IV"), encoding="utf-8")
    corpus = load_wikitext2(tmp_path, facts=dataclasses.replace(facts, sizes=None))
    assert corpus.info["checksum_verified"] is False


def test_hand_placed_folder_is_accepted_but_not_called_checksum_verified(tmp_path):
    write_wikitext_folder(tmp_path / "wikitext-2")
    facts = dataclasses.replace(WIKITEXT2, sizes=dict(WIKI_SIZES))
    corpus = load_wikitext2(tmp_path, facts=facts)
    assert corpus.info["source"] == "real"
    assert corpus.info["checksum_verified"] is False and "by hand" in corpus.info["verified"]
    d = describe(tmp_path, "wikitext2", "real")
    assert d["present"] is True and d["checksum_verified"] is False


def test_published_counts_are_enforced_on_real_data(tmp_path):
    write_wikitext_folder(tmp_path / "wikitext-2")
    with pytest.raises(DataError) as err:
        load_wikitext2(tmp_path)  # the real facts: 2,088,628 train tokens expected
    assert "16 tokens" in err.value.message and "2,088,628" in err.value.message


def test_zip_with_wrong_checksum_is_not_opened(tmp_path):
    make_wikitext_zip(tmp_path / WIKITEXT2.filename)
    with pytest.raises(DataError) as err:
        load_wikitext2(tmp_path)
    assert "was not opened" in err.value.message and WIKITEXT2.md5 in err.value.message
    assert not (tmp_path / "wikitext-2").exists()


def test_truncated_zip_is_a_clear_data_error(tmp_path):
    zip_path = make_wikitext_zip(tmp_path / WIKITEXT2.filename)
    zip_path.write_bytes(zip_path.read_bytes()[:-60])
    facts = facts_for(WIKITEXT2, zip_path, None)  # pretend the checksum matched: the parser must still cope
    with pytest.raises(DataError, match="truncated or not a zip"):
        load_wikitext2(tmp_path, facts=facts)


def test_zip_missing_a_member_names_it(tmp_path):
    texts = {k: v for k, v in WIKI_TEXTS.items() if k != "valid"}
    zip_path = make_wikitext_zip(tmp_path / WIKITEXT2.filename, texts)
    facts = facts_for(WIKITEXT2, zip_path, None)
    with pytest.raises(DataError, match="does not hold wikitext-2/wiki.valid.tokens"):
        load_wikitext2(tmp_path, facts=facts)


@pytest.mark.parametrize(
    "encoding, expect",
    [("utf-16", "looks like UTF-16"), ("utf-16-le", "looks like UTF-16"), ("latin-1", "not valid UTF-8: byte 0xf6")],
)
def test_file_in_another_encoding_is_rejected_naming_file_and_encoding(tmp_path, encoding, expect):
    write_wikitext_folder(tmp_path / "wikitext-2")  # UTF-8, as published ...
    odd = {"valid": " \n = Homarus gammarus = \n Göteborg lobster \n"}
    write_wikitext_folder(tmp_path / "wikitext-2", odd, encoding=encoding)  # ... except the valid split
    with pytest.raises(DataError) as err:
        load_wikitext2(tmp_path, facts=dataclasses.replace(WIKITEXT2, sizes=None))
    assert "wiki.valid.tokens" in err.value.message and expect in err.value.message


def test_files_in_a_nested_folder_are_pointed_out(tmp_path):
    data_dir = tmp_path / "data"
    write_wikitext_folder(data_dir / "wikitext-2" / "wikitext-2")  # unzipped into a folder of the same name
    with pytest.raises(DataError) as err:
        load_wikitext2(data_dir)
    msg = err.value.message
    assert str(data_dir / "wikitext-2" / "wikitext-2") in msg and "belong directly in" in msg
    assert "--data synthetic" in err.value.remedy


def test_incomplete_folder_names_the_missing_files(tmp_path):
    write_wikitext_folder(tmp_path / "wikitext-2", {"train": WIKI_TEXTS["train"]})
    with pytest.raises(DataError, match="lacks wiki.valid.tokens, wiki.test.tokens"):
        load_wikitext2(tmp_path)


def test_crlf_line_endings_count_like_text_mode(tmp_path):
    texts = {k: v.replace("\n", "\r\n") for k, v in WIKI_TEXTS.items()}
    write_wikitext_folder(tmp_path / "wikitext-2", texts)
    corpus = load_wikitext2(tmp_path, facts=dataclasses.replace(WIKITEXT2, sizes=dict(WIKI_SIZES)))
    assert len(corpus.train) == 16


def test_vocabulary_padding_adds_unused_dummy_words(tmp_path):
    facts = wikitext_fixture(tmp_path)
    corpus = load_wikitext2(tmp_path, facts=facts, pad_vocab_to=8)
    assert corpus.vocab_size == 24 == len(corpus.dictionary)
    assert corpus.dictionary.idx2word[19:] == [f"<pad{i}>" for i in range(5)]
    assert corpus.train.max() < 19 and corpus.info["vocab"] == 19


def test_a_folder_with_only_the_valid_and_test_splits_serves_a_reader_of_those_two(tmp_path):
    """The project's GPU machine has the real valid and test splits only: a caller that reads just
    those (the GPT suite's --train-split valid) gets them, with their published counts checked and
    the train split empty; a caller of all three still gets the missing file named."""
    write_wikitext_folder(tmp_path / "wikitext-2", {k: WIKI_TEXTS[k] for k in ("valid", "test")})
    facts = dataclasses.replace(WIKITEXT2, sizes=dict(WIKI_SIZES))
    corpus = load_wikitext2(tmp_path, facts=facts, splits=("test", "valid"))
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (0, 9, 11)
    words = corpus.dictionary.idx2word
    assert words[:3] == ["<eos>", "=", "Homarus"]  # ids over the splits read, in order: valid, then test
    assert len(words) == 11 and corpus.info["splits_read"] == ["valid", "test"]
    assert "valid and test split(s) only" in corpus.info["verified"] and corpus.info["checksum_verified"] is False
    d = describe(tmp_path, "wikitext2", "real", ("valid", "test"))
    assert d["present"] is True and d["placed_by_hand"] is True and d["splits"] == ["valid", "test"]
    assert describe(tmp_path, "wikitext2", "real")["present"] is False  # a reader of all three has no data here
    with pytest.raises(DataError, match="lacks wiki.train.tokens"):
        load_wikitext2(tmp_path, facts=facts)
    wrong = dataclasses.replace(facts, sizes={**WIKI_SIZES, "test": 12})
    with pytest.raises(DataError, match="has 11 tokens"):
        load_wikitext2(tmp_path, facts=wrong, splits=("valid", "test"))
    only_test = tmp_path / "only-test"
    write_wikitext_folder(only_test / "wikitext-2", {"test": WIKI_TEXTS["test"]})
    with pytest.raises(DataError, match="lacks wiki.valid.tokens \\(all of wiki.valid.tokens, wiki.test.tokens are needed\\)"):
        load_wikitext2(only_test, facts=facts, splits=("valid", "test"))
