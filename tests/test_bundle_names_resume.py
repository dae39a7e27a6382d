"""Bundle names after a resume: the interrupted run's bundle is marked in its name
(``<stem>.interrupted.tar.gz``), the complete one gets the plain name, every reader of a
results folder still finds the right one, and `kit bundle show` says which is which. The
benchmark is the fake of tests/test_runner_resume.py (the runner's bookkeeping only)."""

from __future__ import annotations

import pytest

from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
from kit.bundle.safe_open import open_bundle
from kit.cli.main import main
from kit.errors import Interrupted
from kit.report.export import export_run
from kit.runner.execute import execute
from kit.runner.resume import find_bundle
from test_runner_resume import _config, fake_bench  # noqa: F401  (the fixture)


def test_the_complete_bundle_gets_the_plain_name_and_the_interrupted_one_is_marked(tmp_path, fake_bench, capsys):
    fake_bench(interrupt_on="cifar/resnet34/fp32/torch")
    with pytest.raises(Interrupted) as err:
        execute(_config(), tmp_path)
    interrupted, run_dir = err.value.outcome.bundle, err.value.outcome.run_dir
    assert interrupted.name.endswith(".interrupted.tar.gz"), interrupted.name
    fake_bench()
    finished = execute(None, tmp_path, resume_dir=run_dir)
    stem = interrupted.name[: -len(".interrupted.tar.gz")]
    assert finished.bundle.name == f"{stem}.tar.gz"
    assert sorted(p.name for p in tmp_path.glob("*.tar.gz")) == [f"{stem}.interrupted.tar.gz", f"{stem}.tar.gz"]
    assert find_bundle(run_dir, tmp_path, run_dir.name) == finished.bundle
    assert open_bundle(interrupted).interrupted and not open_bundle(finished.bundle).interrupted
    assert open_bundle(finished.bundle).manifest["resumed_from"] == [interrupted.name]

    capsys.readouterr()
    main(["bundle", "show", str(interrupted)])
    shown_interrupted = capsys.readouterr().out
    main(["bundle", "show", str(finished.bundle)])
    shown_complete = capsys.readouterr().out
    assert "(interrupted)" in shown_interrupted
    assert f"(complete, resumed from {interrupted.name})" in " ".join(shown_complete.split())


def test_a_second_interrupted_export_does_not_take_the_complete_name(tmp_path):
    res = make_results([make_cell("resnet18", "fp32")], make_env(), status="interrupted")
    run = make_run_dir(tmp_path / "runs", res, write_results=False, finish_journal=False)
    first = export_run(run, tmp_path / "out")
    second = export_run(run, tmp_path / "out")
    assert first.name.endswith(".interrupted.tar.gz") and second.name.endswith(".interrupted-2.tar.gz")
    assert all(".interrupted" in p.name for p in (tmp_path / "out").iterdir())
