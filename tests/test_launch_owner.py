"""A bundle the host exports itself (the container died before it could) belongs to the
results folder's owner, as everything the container writes there does."""
import os

import pytest

from kit.launch.launcher import give_to_folder_owner


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_a_file_the_host_wrote_as_root_gets_the_results_folders_owner(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    os.chown(results, 4321, 4321)
    bundle = results / "x.interrupted.tar.gz"
    bundle.write_bytes(b"x")
    assert bundle.stat().st_uid == 0
    give_to_folder_owner(bundle, results)
    assert (bundle.stat().st_uid, bundle.stat().st_gid) == (4321, 4321)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_a_root_owned_results_folder_keeps_root(tmp_path):
    bundle = tmp_path / "x.tar.gz"
    bundle.write_bytes(b"x")
    give_to_folder_owner(bundle, tmp_path)
    assert bundle.stat().st_uid == 0
