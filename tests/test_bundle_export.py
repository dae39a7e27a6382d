"""Making bundles from run folders (complete and interrupted), and the
`kit bundle export/verify/show` commands. Results are fixture data."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir, standard_cells
from kit.bundle.export import load_run_folder
from kit.report.export import export_run
from kit.bundle.safe_open import open_bundle
from kit.cli.main import app
from kit.errors import UsageError

runner = CliRunner()


def _run(tmp_path: Path, **kw) -> Path:
    return make_run_dir(tmp_path / "runs", make_results(standard_cells(), make_env(**kw)))


def test_bundle_name_has_machine_gpu_stack_and_date(tmp_path):
    run = make_run_dir(tmp_path / "runs", make_results(standard_cells(), make_env(host="fixture host/1", gpu="NVIDIA H200 (fixture)")))
    path = export_run(run, tmp_path / "out")
    assert re.fullmatch(r"fixture-host-1_NVIDIA-H200-fixture_cuda12_\d{8}-\d{6}\.tar\.gz", path.name)
    assert re.fullmatch(r"[A-Za-z0-9._-]+", path.name)


def test_bundle_holds_manifest_results_env_journal_log_charts_and_report(tmp_path):
    path = export_run(_run(tmp_path), tmp_path / "out")
    with tarfile.open(path, "r:gz") as tf:
        names = {m.name.split("/", 1)[1] for m in tf.getmembers() if m.isfile()}
        assert all(m.isfile() or m.isdir() for m in tf.getmembers())
    assert {"manifest.json", "results.json", "env.json", "journal.jsonl", "run.log", "report.html"} <= names
    assert {"charts/cifar-torch-epoch-time.svg", "charts/cifar-torch-speedup.svg"} <= names
    b = open_bundle(path)
    m = b.manifest
    assert m["schema_version"] == 1 and m["interrupted"] is False and m["kit_version"]
    assert set(m["files"]) == names - {"manifest.json"}
    assert all(len(e["sha256"]) == 64 and e["size"] == len(b.files[n]) for n, e in m["files"].items())


def test_export_leaves_no_temporary_files_and_never_overwrites(tmp_path):
    run = _run(tmp_path)
    first = export_run(run, tmp_path / "out")
    second = export_run(run, tmp_path / "out")
    assert first != second and second.name.endswith("-2.tar.gz")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted([first.name, second.name])


def test_interrupted_run_without_results_json_is_rebuilt_from_the_journal(tmp_path):
    res = make_results(standard_cells()[:4], make_env(), status="running")
    run = make_run_dir(tmp_path / "runs", res, write_results=False, finish_journal=False)
    # The process died mid-line: the journal ends with half a record.
    with open(run / "journal.jsonl", "a") as fh:
        fh.write('{"seq": 99, "event": "ste')
    folder = load_run_folder(run)
    assert folder.rebuilt_from_journal and folder.interrupted
    assert [c.cell_id for c in folder.results.cells] == [c["cell_id"] for c in res["cells"]]
    b = open_bundle(export_run(run, tmp_path / "out"))
    assert b.interrupted and b.manifest["interrupted"] is True and b.manifest["rebuilt_from_journal"] is True
    assert len(b.results.cells) == 4
    assert "INTERRUPTED" in b.text("report.html")


def test_cells_in_the_journal_but_missing_from_results_json_are_recovered(tmp_path):
    res = make_results(standard_cells(), make_env())
    run = make_run_dir(tmp_path / "runs", res)
    partial = dict(res, cells=res["cells"][:2], status="running")
    (run / "results.json").write_text(json.dumps(partial))
    folder = load_run_folder(run)
    assert len(folder.results.cells) == 6 and folder.recovered_cells == 4 and folder.interrupted


def test_export_of_a_folder_that_is_not_a_run_says_so(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="not a run folder"):
        export_run(tmp_path / "empty", tmp_path / "out")


def test_cli_export_verify_show(tmp_path):
    run = _run(tmp_path)
    r = runner.invoke(app, ["bundle", "export", str(run), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    bundle = Path(r.output.strip().splitlines()[-1])
    assert bundle.exists()
    r = runner.invoke(app, ["bundle", "verify", str(bundle)])
    assert r.exit_code == 0 and "verified" in r.output and "sha256" in r.output
    r = runner.invoke(app, ["bundle", "show", str(bundle)], env={"COLUMNS": "160"})
    assert r.exit_code == 0, r.output
    assert "Fixture GPU A" in r.output and "580.159" in r.output and "cuda12" in r.output
    assert "cifar/resnet18/amp-fp16/torch" in r.output and "1.60×" in r.output
    assert "SYNTHETIC DATA" in r.output


def test_cli_verify_of_a_tampered_bundle_exits_5_naming_the_file(tmp_path):
    from kit.cli.main import main

    bundle = export_run(_run(tmp_path), tmp_path / "out")
    # Rewrite env.json inside a copy, keeping the original manifest.
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bundle, "r:gz") as src, tarfile.open(bad, "w:gz") as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if m.name.endswith("/env.json"):
                data = data.replace(b"fixture-host-a", b"fixture-host-z")
            if data is not None:
                import io

                m.size = len(data)
                dst.addfile(m, io.BytesIO(data))
            else:
                dst.addfile(m)
    with pytest.raises(SystemExit) as exit_info:
        main(["bundle", "verify", str(bad)])
    assert exit_info.value.code == 5


def test_show_lists_skipped_cells_with_their_reason(tmp_path):
    cells = standard_cells(models=("resnet18",)) + [make_cell("resnet18", "apex-o1", status="skipped", reason="Apex is not installed [fixture]")]
    run = make_run_dir(tmp_path / "runs", make_results(cells, make_env()))
    bundle = export_run(run, tmp_path / "out")
    r = runner.invoke(app, ["bundle", "show", str(bundle)], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    assert "skipped" in r.output and "Apex is not installed [fixture]" in r.output


def _files(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_export_of_a_run_folder_that_a_run_still_writes_is_refused_with_the_reason(tmp_path, capsys, monkeypatch):
    """`kit bundle export` of a run folder whose run has not ended (another process holds its lock):
    exit 2 naming the process, nothing written; once that run has ended, the export works."""
    import subprocess
    import sys

    from fixtures.cli import run_main

    run = make_run_dir(tmp_path / "runs", make_results(standard_cells()[:2], make_env(), status="running"),
                       finish_journal=False)
    before = _files(run)
    hold = ("import sys\nfrom kit.runner.lock import RunLock\nlock = RunLock(sys.argv[1]).acquire()\n"
            "print('locked', flush=True)\nsys.stdin.read()\nlock.release()\n")
    repo = str(Path(__file__).resolve().parents[1])
    holder = subprocess.Popen([sys.executable, "-c", hold, str(run)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, cwd=repo)
    try:
        assert holder.stdout.readline().strip() == "locked"
        code, out, err = run_main(["bundle", "export", str(run), "--out", str(tmp_path / "out")], capsys, monkeypatch)
    finally:
        holder.stdin.close()
        holder.wait(30)
    assert code == 2, err
    assert f"run folder in use (pid {holder.pid}," in err and "labelled interrupted" in err, err
    assert f"kill -TERM {holder.pid}" in err and "Traceback" not in err and out == ""
    assert not (tmp_path / "out").exists()
    assert _files(run) == before  # (the lock file went with its holder)
    code, out, err = run_main(["bundle", "export", str(run), "--out", str(tmp_path / "out")], capsys, monkeypatch)
    assert code == 0, err
    assert Path(out.strip()).name.endswith(".interrupted.tar.gz")


def test_export_into_a_folder_that_cannot_be_written_exits_2_with_what_to_do(tmp_path, capsys, monkeypatch):
    """A read-only output folder (a read-only mount: EROFS, which root meets too) is the folder given,
    not the kit: exit 2, one line and what to do, nothing written, as `kit run --results-dir` says."""
    import errno
    import tempfile

    from fixtures.cli import run_main
    from kit.results import atomic

    run = _run(tmp_path)
    before = _files(run)
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kw):
        if dir is not None and Path(dir) == read_only:
            raise OSError(errno.EROFS, "Read-only file system")
        return real_mkstemp(*args, dir=dir, **kw)

    monkeypatch.setattr(atomic.tempfile, "mkstemp", mkstemp)
    code, out, err = run_main(["bundle", "export", str(run), "--out", str(read_only)], capsys, monkeypatch)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "cannot write the bundle to" in lines[0] and "Read-only file system" in lines[0], err
    assert "what to do: Give --out a folder you can write in" in err and "Traceback" not in err and out == ""
    assert list(read_only.iterdir()) == [] and _files(run) == before
