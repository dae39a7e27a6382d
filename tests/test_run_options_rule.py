"""`kit run`'s options, one rule: an empty path is refused (`--results-dir ''`, an empty
KIT_RESULTS_DIR), every comma list refuses an empty item with one message from one function
(kit.runner.options.split_list), and `--resume DIR` refuses an option that conflicts with the
resumed run's own (exit 2, naming the option and the run's value). Run folders are fixture data."""

from __future__ import annotations


import pytest

from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir, set_config
from kit.cli.main import main
from kit.errors import UsageError
from kit.runner.options import parse_args, split_list


def _exit(args, capsys, monkeypatch=None):
    with pytest.raises(SystemExit) as info:
        main(args)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return info.value.code, lines[0]


@pytest.mark.parametrize("flag", ["--results-dir", "--data-dir", "--resume"])
def test_an_empty_path_is_refused(capsys, flag):
    code, line = _exit(["run", "--data", "synthetic", "--dry-run", flag, ""], capsys)
    assert code == 2 and flag in line and "empty" in line, line


def test_an_empty_results_dir_variable_is_refused(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, KIT_RESULTS_DIR="", PYTHONPATH=str(repo), COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "kit", "run", "--data", "synthetic", "--dry-run"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(lines) == 1 and "KIT_RESULTS_DIR" in lines[0], proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_other_front_ends_refuse_an_empty_path_too():
    with pytest.raises(UsageError, match="--results-dir.*empty"):
        parse_args(["--results-dir", ""])


@pytest.mark.parametrize("flag, value", [
    ("--precisions", "fp32,,amp-bf16"), ("--precisions", "fp32,"), ("--models", ",resnet18"),
    ("--engines", "torch,,fastai"), ("--batch-sizes", "32,,64"), ("--preset", "apex-2018, ,"),
])
def test_an_empty_item_in_any_list_is_refused_with_one_message(capsys, flag, value):
    suite = "lstm" if flag == "--preset" else "cifar"
    code, line = _exit(["run", "--suite", suite, "--data", "synthetic", "--dry-run", flag, value], capsys)
    assert code == 2 and line.endswith(f"{flag} {value!r} has an empty item (two commas in a row, or one at an end); "
                                       "name each item, comma-separated."), line


def test_one_function_says_it_for_every_list():
    with pytest.raises(UsageError) as a:
        split_list(["a,,b"], "--x")
    with pytest.raises(UsageError) as b:
        split_list(["a", ""], "--x")
    assert "empty item" in a.value.message and "empty item" in b.value.message
    assert split_list(["a, b", "c"], "--x") == ["a", "b", "c"]
    with pytest.raises(UsageError, match="--x is empty"):
        split_list([" , "], "--x")


def test_the_sweep_lists_follow_the_same_rule():
    from kit.fleet.sweep import parse_int_list, parse_name_list

    with pytest.raises(UsageError, match="has an empty item"):
        parse_name_list("cifar,,lstm", "--suites")
    with pytest.raises(UsageError, match="has an empty item"):
        parse_int_list("1,,2", "--gpus-per-task")
    assert parse_int_list("1,2", "--gpus-per-task") == [1, 2]


@pytest.fixture
def interrupted_run(tmp_path):
    """A cifar run (synthetic, cpu, 3 repeats) cut short after its first cell: fixture data."""
    res = make_results([make_cell("resnet18", "fp32")], make_env(), status="interrupted")
    set_config(res, device="cpu", models=["resnet18", "resnet50"], precisions=["fp32", "amp-bf16"])
    return make_run_dir(tmp_path / "results", res, write_results=False, finish_journal=False)


@pytest.mark.parametrize("extra, words", [
    (["--suite", "lstm"], "--suite lstm conflicts with the resumed run's --suite cifar"),
    (["--repeats", "1"], "--repeats 1 conflicts with the resumed run's --repeats 3"),
    (["--precisions", "fp32"], "--precisions fp32 conflicts with the resumed run's --precisions fp32,amp-bf16"),
    (["--device", "cuda:0"], "--device cuda:0 conflicts with the resumed run's --device cpu"),
    (["--smoke"], "--smoke conflicts with the resumed run's options"),
])
def test_resume_refuses_an_option_that_conflicts_with_the_runs_own(interrupted_run, capsys, monkeypatch, extra, words):
    import kit.runner.execute

    def must_not_run(*a, **kw):
        raise AssertionError("the resume ran although an option conflicts with the run's")

    monkeypatch.setattr(kit.runner.execute, "execute", must_not_run)
    journal_before = (interrupted_run / "journal.jsonl").read_bytes()
    for dry in ([], ["--dry-run"]):
        code, line = _exit(["run", "--resume", str(interrupted_run), *extra, *dry], capsys)
        assert code == 2 and words in line, line
    assert (interrupted_run / "journal.jsonl").read_bytes() == journal_before
    assert sorted(p.name for p in interrupted_run.iterdir()) == ["env.json", "journal.jsonl", "run.log"]


def test_resume_accepts_the_runs_own_values_and_the_options_that_shape_no_run(interrupted_run, capsys):
    # what kit launch adds (--device) and what only steers this command (--skip-checks, --dry-run)
    main(["run", "--resume", str(interrupted_run), "--device", "cpu", "--precisions", "fp32,amp-bf16",
          "--skip-checks", "--dry-run"])
    out = capsys.readouterr()
    assert "resnet50" in out.out and "error:" not in out.err


def test_the_cuda10_front_end_refuses_a_conflicting_resume_option_too(interrupted_run, monkeypatch):
    import kit.runner.execute
    from kit.runner import legacy

    monkeypatch.setattr(kit.runner.execute, "execute", lambda *a, **kw: pytest.fail("the resume ran"))
    argv = ["--resume", str(interrupted_run), "--repeats", "1"]
    with pytest.raises(UsageError, match="--repeats 1 conflicts with the resumed run's --repeats 3"):
        legacy.run(parse_args(argv, legacy=True), argv)
