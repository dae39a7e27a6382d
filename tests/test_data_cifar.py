"""CIFAR-100 reader: checksum before pickle, exact members only, NHWC arrays, a safe cache."""

from __future__ import annotations

import dataclasses
import pickle
import tarfile

import numpy as np
import pytest

from kit.data.cifar import cache_path, load_cifar100
from kit.data.service import describe
from kit.errors import DataError
from kit.facts.datasets import CIFAR100
from test_data_support import cifar_fixture, cifar_split, facts_for, make_cifar_tarball, py2_style_pickle


def test_fixture_archive_loads_as_nhwc_uint8_with_fine_labels(tmp_path):
    facts = cifar_fixture(tmp_path, 20, 10)
    data = load_cifar100(tmp_path, "real", facts=facts)
    assert data.train_x.shape == (20, 32, 32, 3) and data.train_x.dtype == np.uint8
    assert data.test_x.shape == (10, 32, 32, 3)
    assert data.train_y.dtype == np.int64 and data.train_y.shape == (20,)
    assert len(data.classes) == 100 and data.classes[3] == "class_3"
    # channel-major rows: byte 0 is R of pixel (0,0); byte 1024 is G of pixel (0,0); byte 33 is R of pixel (1,1)
    raw = cifar_split(20, seed=0)
    assert data.train_x[5, 0, 0, 0] == raw["data"][5, 0]
    assert data.train_x[5, 0, 0, 1] == raw["data"][5, 1024]
    assert data.train_x[5, 1, 1, 2] == raw["data"][5, 2048 + 33]
    assert list(data.train_y) == raw["fine_labels"]
    info = data.info
    assert info["source"] == "real" and info["checksum_verified"] is True
    assert info["md5"] == facts.md5 and info["file"] == "cifar-100-python.tar.gz"
    assert info["sizes"] == {"train": 20, "test": 10, "classes": 100}
    assert info["loaded_from"] == "archive"


def test_later_loads_use_the_npz_cache_without_the_archive(tmp_path):
    facts = cifar_fixture(tmp_path)
    first = load_cifar100(tmp_path, facts=facts)
    cache = cache_path(tmp_path, facts)
    assert cache.is_file() and facts.md5 in cache.name
    with np.load(cache, allow_pickle=False) as npz:  # a plain array file, no pickle inside
        assert set(npz.files) >= {"train_x", "train_y", "test_x", "test_y", "classes"}
    (tmp_path / facts.filename).unlink()
    second = load_cifar100(tmp_path, facts=facts)
    assert second.info["loaded_from"] == "cache"
    assert np.array_equal(first.train_x, second.train_x) and np.array_equal(first.test_y, second.test_y)
    assert second.classes == first.classes


def test_damaged_cache_is_rebuilt_from_the_archive(tmp_path):
    facts = cifar_fixture(tmp_path)
    load_cifar100(tmp_path, facts=facts)
    cache_path(tmp_path, facts).write_bytes(b"not a zip")
    data = load_cifar100(tmp_path, facts=facts)
    assert data.info["loaded_from"] == "archive" and data.train_x.shape[0] == 20


def test_checksum_mismatch_is_rejected_before_anything_is_unpickled(tmp_path, monkeypatch):
    facts = cifar_fixture(tmp_path)
    wrong = dataclasses.replace(facts, md5="0" * 32)
    opened = []
    monkeypatch.setattr(tarfile, "open", lambda *a, **k: opened.append(a) or (_ for _ in ()).throw(AssertionError("opened")))
    with pytest.raises(DataError) as err:
        load_cifar100(tmp_path, facts=wrong)
    assert "was not opened" in err.value.message and "0" * 32 in err.value.message
    assert opened == []
    assert err.value.exit_code == 3


def test_real_facts_reject_a_fixture_archive(tmp_path):
    make_cifar_tarball(tmp_path / CIFAR100.filename)
    with pytest.raises(DataError, match=CIFAR100.md5):
        load_cifar100(tmp_path)  # the published checksum: a fixture can never pass as real data


def test_truncated_archive_is_a_clear_data_error(tmp_path):
    archive = make_cifar_tarball(tmp_path / CIFAR100.filename, 40, 10)
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    # Even if the checksum somehow matched (facts made from the truncated file), the parser must fail cleanly.
    facts = facts_for(CIFAR100, archive, None)
    with pytest.raises(DataError, match="truncated or not a gzip-compressed tar"):
        load_cifar100(tmp_path, facts=facts)


def test_archive_without_the_expected_folder_is_a_layout_error(tmp_path):
    archive = make_cifar_tarball(tmp_path / CIFAR100.filename, prefix="")  # members at the top level
    facts = facts_for(CIFAR100, archive, None)
    with pytest.raises(DataError) as err:
        load_cifar100(tmp_path, facts=facts)
    assert "cifar-100-python/train" in err.value.message and "python version" in err.value.message


def test_members_that_are_links_are_refused(tmp_path):
    archive = tmp_path / CIFAR100.filename
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("train", "test", "meta"):
            info = tarfile.TarInfo(f"cifar-100-python/{name}")
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tar.addfile(info)
    facts = facts_for(CIFAR100, archive, None)
    with pytest.raises(DataError, match="not a regular file"):
        load_cifar100(tmp_path, facts=facts)


def test_pickle_that_would_run_code_is_refused_even_with_a_matching_checksum(tmp_path):
    class Boom:
        def __reduce__(self):
            import os

            return (os.system, ("echo pwned > pwned.txt",))

    members = {
        "train": pickle.dumps({"data": Boom()}, protocol=2),
        "test": py2_style_pickle(cifar_split(10)),
        "meta": py2_style_pickle({"fine_label_names": ["a"] * 100}),
    }
    archive = make_cifar_tarball(tmp_path / CIFAR100.filename, members=members)
    facts = facts_for(CIFAR100, archive, None)
    with pytest.raises(DataError, match="refusing to load"):
        load_cifar100(tmp_path, facts=facts)
    assert not (tmp_path / "pwned.txt").exists()


def test_wrong_sizes_are_reported_against_the_published_ones(tmp_path):
    facts = cifar_fixture(tmp_path, 20, 10)
    strict = dataclasses.replace(facts, sizes=CIFAR100.sizes)
    with pytest.raises(DataError, match="train split has 20 images; the published CIFAR-100 has 50,000"):
        load_cifar100(tmp_path, facts=strict)


def test_archive_in_the_wrong_folder_is_pointed_out(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    make_cifar_tarball(tmp_path / "Downloads" / CIFAR100.filename)
    with pytest.raises(DataError) as err:
        load_cifar100(data_dir)
    msg = err.value.message
    assert "Downloads" in msg and f"move it into {data_dir}" in msg
    assert "--data synthetic" in err.value.remedy


def test_extracted_folder_without_archive_explains_why_the_archive_is_needed(tmp_path):
    data_dir = tmp_path / "data"
    (data_dir / "cifar-100-python").mkdir(parents=True)
    (data_dir / "cifar-100-python" / "train").write_bytes(b"x")
    with pytest.raises(DataError, match="reads the archive itself"):
        load_cifar100(data_dir)


def test_describe_reports_provenance_for_real_and_synthetic(tmp_path):
    d = describe(tmp_path, "cifar100", "real")
    assert d["source"] == "real" and d["present"] is False and d["checksum_verified"] is False
    assert d["md5_expected"] == CIFAR100.md5
    s = describe(tmp_path, "cifar", "synthetic")
    assert s["source"] == "synthetic" and s["file"] is None and "throughput" in s["note"]
    make_cifar_tarball(tmp_path / CIFAR100.filename)
    bad = describe(tmp_path, "cifar100", "real")
    assert bad["present"] is True and bad["checksum_verified"] is False and "MD5" in bad["problem"]


def test_unknown_source_is_a_usage_error(tmp_path):
    from kit.errors import UsageError

    with pytest.raises(UsageError):
        load_cifar100(tmp_path, "imaginary")
