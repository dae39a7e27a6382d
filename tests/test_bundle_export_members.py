"""`kit bundle export` takes only regular files inside the run folder: a member that is a
symbolic link (to a file outside, standing in for /etc/shadow), or not a regular file, is
refused with one line naming it, and no bundle is written. Run folders are fixture data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fixtures.results.factory import make_env, make_results, make_run_dir, standard_cells
from kit.cli.main import main
from kit.errors import BundleError
from kit.report.export import export_run

SECRET = b"root:$6$fixture-secret-hash:19000:0:99999:7:::\n"


def _run(tmp_path: Path) -> Path:
    return make_run_dir(tmp_path / "runs", make_results(standard_cells(), make_env()))


def _all_bytes_under(folder: Path) -> bytes:
    import gzip

    out = b""
    for p in folder.rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            out += gzip.decompress(data) if p.name.endswith(".gz") else data
    return out


@pytest.mark.parametrize("member", ["run.log", "journal.jsonl", "env.json", "results.json"])
def test_a_member_linked_to_a_file_outside_the_run_folder_is_refused(tmp_path, capsys, member):
    secret = tmp_path / "shadow"
    secret.write_bytes(SECRET)
    run = _run(tmp_path)
    (run / member).unlink()
    os.symlink(secret, run / member)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        main(["bundle", "export", str(run), "--out", str(out)])
    assert exit_info.value.code == BundleError.exit_code == 5
    captured = capsys.readouterr()
    output = captured.out + captured.err
    error_lines = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and member in error_lines[0] and "symbolic link" in error_lines[0], output
    assert "Traceback" not in output and SECRET.strip().decode() not in output
    assert not out.exists() or not list(out.iterdir())
    assert SECRET not in _all_bytes_under(tmp_path / "runs")  # nothing copied beside the run either


def test_a_dangling_link_is_refused_not_taken_for_a_missing_file(tmp_path):
    run = _run(tmp_path)
    (run / "run.log").unlink()
    os.symlink(tmp_path / "nowhere", run / "run.log")
    with pytest.raises(BundleError, match="run.log"):
        export_run(run, tmp_path / "out")


def test_a_member_that_is_a_folder_or_a_fifo_is_refused(tmp_path):
    run = _run(tmp_path)
    (run / "run.log").unlink()
    (run / "run.log").mkdir()
    with pytest.raises(BundleError, match="run.log.*not a regular file"):
        export_run(run, tmp_path / "out")
    (run / "run.log").rmdir()
    os.mkfifo(run / "run.log")  # reading it would block forever without O_NONBLOCK
    with pytest.raises(BundleError, match="run.log.*not a regular file"):
        export_run(run, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_run_folder_of_regular_files_still_exports(tmp_path):
    run = _run(tmp_path)
    path = export_run(run, tmp_path / "out")
    assert path.is_file()
