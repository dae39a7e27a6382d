"""`kit run`'s exit codes (the table in kit/errors.py and docs/troubleshooting.md "Exit codes"), each case in
a real `python -m kit` process: the code, one `error:` line, no traceback, nothing written.

The benchmark is the fake in tests/fixtures/fake_bench.py (installed through a
sitecustomize in a folder first on PYTHONPATH), so no case trains anything.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.cli import sigint_as_from_a_terminal
from kit.results.journal import read_journal

REPO = Path(__file__).resolve().parents[1]
FAKE_BENCH = Path(__file__).resolve().parent / "fixtures" / "fake_bench.py"
SMALL = ["--data", "synthetic", "--device", "cpu", "-m", "resnet18,resnet34", "-p", "fp32", "-e", "torch",
         "--repeats", "1", "--steps", "1", "--skip-checks"]


def _env(tmp_path: Path, fake_bench: bool = True, first: Path | None = None, **extra: str) -> dict:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    shutil.copy(FAKE_BENCH, site / "sitecustomize.py")
    path = ([str(first)] if first else []) + [str(site), str(REPO)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), KIT_FAKE_BENCH="1" if fake_bench else "0",
               KIT_RESULTS_DIR=str(tmp_path / "results"), KIT_DATA_DIR=str(tmp_path / "data"), COLUMNS="200")
    env.update(extra)
    return env


def kit(tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kit", *args], cwd=tmp_path, env=env or _env(tmp_path),
                          capture_output=True, text=True, timeout=300, preexec_fn=sigint_as_from_a_terminal)


def _fixtures(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty-journal").mkdir()
    (tmp_path / "empty-journal" / "journal.jsonl").write_text("")


CASES = [
    # (id, arguments, exit code, words in the error line)
    ("device-tpu", ["run", "--device", "tpu", "--data", "synthetic"], 2, "--device 'tpu' is not a device"),
    ("device-cuda-x", ["run", "--device", "cuda:x", "--data", "synthetic"], 2, "'cuda:x' is malformed"),
    ("dry-run-device-tpu", ["run", "--dry-run", "--device", "tpu"], 2, "--device 'tpu'"),
    ("models-twice", ["run", "--data", "synthetic", "--models", "resnet18,resnet18"], 2, "--models names resnet18 more than once"),
    ("models-empty", ["run", "--data", "synthetic", "--models", ""], 2, "--models is empty"),
    ("precisions-twice", ["run", "--data", "synthetic", "-p", "fp32", "-p", "fp32"], 2, "--precisions names fp32 more than once"),
    ("precisions-empty", ["run", "--data", "synthetic", "--precisions", ","], 2, "--precisions is empty"),
    ("engines-twice", ["run", "--data", "synthetic", "--engines", "torch,fastai,torch"], 2, "--engines names torch more than once"),
    ("engines-empty", ["run", "--data", "synthetic", "--engines", " "], 2, "--engines is empty"),
    ("preset-twice", ["run", "--suite", "lstm", "--data", "synthetic", "--preset", "apex-2018,apex-2018"], 2,
     "--preset names apex-2018 more than once"),
    ("preset-empty", ["run", "--suite", "lstm", "--data", "synthetic", "--preset", ""], 2, "--preset is empty"),
    ("smoke-models-empty", ["run", "--smoke", "--models", ""], 2, "--models is empty"),
    ("seed-negative", ["run", "--data", "synthetic", "--seed", "-1"], 2, "--seed -1"),
    ("results-dir-under-a-file", ["run", "--smoke", "--device", "cpu", "--results-dir", "a-file/x"], 2, "is a file, not a folder"),
    ("results-dir-is-a-file", ["run", "--smoke", "--device", "cpu", "--results-dir", "a-file"], 2, "is a file, not a folder"),
    ("results-dir-in-proc", ["run", "--smoke", "--device", "cpu", "--results-dir", "/proc/kitres"], 2, "--results-dir /proc/kitres"),
    ("data-dir-is-a-file", ["run", "--data", "synthetic", "--data-dir", "a-file"], 2, "--data-dir a-file: is a file"),
    ("data-dir-under-a-file", ["run", "--suite", "lstm", "--data-dir", "a-file/x"], 2, "--data-dir a-file/x: is under"),
    ("resume-empty-dir", ["run", "--resume", "empty"], 2, "it has no journal.jsonl"),
    ("resume-empty-journal", ["run", "--resume", "empty-journal"], 2, "journal.jsonl is empty"),
    ("resume-missing", ["run", "--resume", "no-such-run"], 2, "does not exist"),
    ("resume-a-file", ["run", "--resume", "a-file"], 2, "is not a folder"),
    ("dry-run-resume-empty-dir", ["run", "--dry-run", "--resume", "empty"], 2, "it has no journal.jsonl"),
    ("time-limit-not-a-duration", ["run", "--data", "synthetic", "--time-limit", "soon"], 2, "--time-limit 'soon' is not a duration"),
    ("dry-run-time-limit-zero", ["run", "--dry-run", "--time-limit", "0"], 2, "--time-limit '0' leaves no time"),
]


@pytest.mark.parametrize("args, code, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_kit_run_exit_code(tmp_path, args, code, words):
    _fixtures(tmp_path)
    env = _env(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    out = kit(tmp_path, *args, env=env)
    assert out.returncode == code, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and words in errors[0], out.stderr
    assert out.stdout == ""
    # nothing was written: no results or data folder, no lock or log left in a folder
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert list((tmp_path / "empty").iterdir()) == []


def test_a_host_only_install_without_torch_exits_6_before_any_folder_exists(tmp_path):
    """A fake `torch` that cannot be imported stands in for `pip install .` without the bench extra."""
    fake = tmp_path / "no-torch"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("raise ImportError('No module named torch (test stand-in)')\n")
    out = kit(tmp_path, "run", "--smoke", "--device", "cpu", "--data", "synthetic",
              env=_env(tmp_path, fake_bench=False, first=fake))
    assert out.returncode == 6, out.stderr
    assert "The benchmark stack is broken: torch" in out.stderr and "pip install --force-reinstall torch==" in out.stderr
    assert "kit launch" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "data").exists()


def test_torch_hidden_from_the_import_system_exits_6_too(tmp_path):
    block = tmp_path / "block"
    block.mkdir()
    (block / "torch_blocker.pth").write_text(
        "import sys; exec(\"class _B:\\n def find_spec(self, n, p=None, t=None):\\n"
        "  if n.split('.')[0] == 'torch': raise ModuleNotFoundError('No module named torch', name=n)\\n"
        "sys.meta_path.insert(0, _B())\")\n")
    env = _env(tmp_path, fake_bench=False)
    code = ("import site, sys; site.addsitedir(sys.argv[1]); sys.argv = ['kit'] + sys.argv[2:]; "
            "from kit.cli.main import main; main(sys.argv[1:])")
    out = subprocess.run([sys.executable, "-c", code, str(block), "run", "--smoke", "--device", "cpu"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 6, out.stderr
    assert "not installed here" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("signame, code, words", [("SIGTERM", 143, "terminated (SIGTERM)"),
                                                  ("SIGINT", 130, "interrupted (Ctrl-C)")])
def test_a_stop_signal_keeps_finished_cells_and_is_named(tmp_path, signame, code, words):
    env = _env(tmp_path, KIT_FAKE_BENCH_SIGNAL_AT="cifar/resnet34/fp32/torch", KIT_FAKE_BENCH_SIGNAL=signame)
    out = kit(tmp_path, "run", *SMALL, env=env)
    assert out.returncode == code, out.stderr
    assert words in out.stderr and "Traceback" not in out.stderr
    run_dir = next(p for p in (tmp_path / "results").iterdir() if p.is_dir())
    events = list(read_journal(run_dir / "journal.jsonl"))
    stop = [e for e in events if e["event"] == "run_interrupted"]
    assert len(stop) == 1 and stop[0]["message"] == words and stop[0]["signal"] == signame
    assert [e["cell_id"] for e in events if e["event"] == "cell_end"] == ["cifar/resnet18/fp32/torch"]
    assert events[-1]["event"] == "run_end" and events[-1]["status"] == "interrupted"
    # the bundle of what finished is made, and its path is on stdout
    bundle = Path(out.stdout.strip())
    assert bundle.suffixes[-2:] == [".tar", ".gz"] and bundle.is_file()


def test_stdout_holds_the_bundle_path_and_run_log_the_run(tmp_path):
    out = kit(tmp_path, "run", *SMALL)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 1 and lines[0].endswith(".tar.gz") and Path(lines[0]).is_file()
    assert "Plan:" in out.stderr and "2 cell(s) measured" in out.stderr
    run_dir = next(p for p in (tmp_path / "results").iterdir() if p.is_dir())
    log = (run_dir / "run.log").read_text()
    assert "cell cifar/resnet18/fp32/torch: started" in log
    assert "cell cifar/resnet34/fp32/torch: 100 images/s" in log
    assert "run ended complete: 2 cell(s) ok" in log


def test_dry_run_prints_its_plan_on_stdout(tmp_path):
    out = kit(tmp_path, "run", "--dry-run", *SMALL)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "Plan: 2 cells x 1 repeats" in text and "Dry run: nothing was run" in text
    assert not (tmp_path / "results").exists()


def test_resume_of_a_complete_run_says_so_and_writes_nothing(tmp_path):
    first = kit(tmp_path, "run", *SMALL)
    assert first.returncode == 0, first.stderr
    bundle = Path(first.stdout.strip())
    results = tmp_path / "results"
    run_dir = next(p for p in results.iterdir() if p.is_dir())
    before = {p: p.stat().st_mtime_ns for p in results.rglob("*")}
    again = kit(tmp_path, "run", "--resume", str(run_dir))
    assert again.returncode == 0, again.stderr
    assert "already complete" in " ".join(again.stderr.split())
    assert Path(again.stdout.strip()).resolve() == bundle.resolve()
    assert {p: p.stat().st_mtime_ns for p in results.rglob("*")} == before  # no new bundle, no journal line


@pytest.mark.parametrize("damage", ["cut short", "deleted"])
def test_resume_of_a_complete_run_whose_bundle_does_not_verify_makes_it_again(tmp_path, damage):
    """A bundle damaged in a copy, or deleted: the resume (a Slurm task sent again does this) ends
    with a bundle that verifies, and the run folder is left as it was."""
    first = kit(tmp_path, "run", *SMALL)
    assert first.returncode == 0, first.stderr
    bundle = Path(first.stdout.strip())
    run_dir = next(p for p in (tmp_path / "results").iterdir() if p.is_dir())
    if damage == "cut short":
        bundle.write_bytes(bundle.read_bytes()[:200])
    else:
        bundle.unlink()
    before = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")}
    again = kit(tmp_path, "run", "--resume", str(run_dir))
    assert again.returncode == 0, again.stderr
    assert "was made again" in " ".join(again.stderr.split())
    made = Path(again.stdout.strip())
    from kit.bundle.safe_open import open_bundle

    assert made.parent == bundle.parent and open_bundle(made).manifest["run_status"] == "complete"
    assert {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")} == before
    third = kit(tmp_path, "run", "--resume", str(run_dir))  # now it is found, and nothing more is written
    assert Path(third.stdout.strip()) == made and "nothing was measured or written" in " ".join(third.stderr.split())


def test_resume_in_another_time_zone_finds_the_bundle_named_in_the_first(tmp_path):
    # the bundle's name has the run's start in local time (a container in UTC, a host elsewhere)
    first = kit(tmp_path, "run", *SMALL, env=_env(tmp_path, TZ="UTC0"))
    assert first.returncode == 0, first.stderr
    run_dir = next(p for p in (tmp_path / "results").iterdir() if p.is_dir())
    again = kit(tmp_path, "run", "--resume", str(run_dir), env=_env(tmp_path, TZ="EST+5"))
    assert again.returncode == 0 and Path(again.stdout.strip()) == Path(first.stdout.strip())
    assert len(list((tmp_path / "results").glob("*.tar.gz"))) == 1


def test_a_run_stopped_by_missing_data_leaves_no_results_folder(tmp_path):
    """--results-dir is probed (made, written, removed) before the data fetch; exit 3 leaves no folder."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: the fetch is refused at once, no network involved
    env = _env(tmp_path, KIT_DATA_MIRRORS=f"http://127.0.0.1:{port}/")
    out = kit(tmp_path, "run", "--suite", "lstm", "--device", "cpu", "--results-dir", "new/deep", "--skip-checks", env=env)
    assert out.returncode == 3, out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "new").exists()


def test_a_bad_choice_says_what_is_wrong_without_the_parsers_internals(tmp_path):
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--suite", "nope"], capture_output=True, text=True,
                         cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    assert out.returncode == 2
    assert "error: unknown suite 'nope'; choose cifar, lstm, gpt, all" in out.stderr  # the kit's check: a plugin's name too
    assert "Value error" not in out.stderr and "Traceback" not in out.stderr


def test_the_resume_command_after_ctrl_c_works_when_pasted_into_a_shell(tmp_path):
    """The `Continue with:` line after Ctrl-C, pasted into a shell as printed, resumes the run, also where
    the results folder's path has spaces, a quote and letters beyond ASCII."""
    results = tmp_path / "my results" / "Läufe 'Ω'"
    env = _env(tmp_path, KIT_FAKE_BENCH_SIGNAL_AT="cifar/resnet34/fp32/torch", KIT_FAKE_BENCH_SIGNAL="SIGINT",
               KIT_RESULTS_DIR=str(results))
    out = kit(tmp_path, "run", *SMALL, env=env)
    assert out.returncode == 130, out.stderr
    (line,) = [line for line in out.stderr.splitlines() if "Continue with: " in line]
    command = line.split("Continue with: ", 1)[1]
    assert command.startswith("kit run --resume "), command
    del env["KIT_FAKE_BENCH_SIGNAL_AT"]
    # `kit` as the shell finds it on PATH: this Python's kit, run from the checkout
    pasted = f'kit() {{ {shlex.quote(sys.executable)} -m kit "$@"; }}; {command}'
    again = subprocess.run(["bash", "-c", pasted], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    run_dir = next(p for p in results.iterdir() if p.is_dir())
    events = list(read_journal(run_dir / "journal.jsonl"))
    assert [e["cell_id"] for e in events if e["event"] == "cell_end"] == ["cifar/resnet18/fp32/torch",
                                                                          "cifar/resnet34/fp32/torch"]
    assert events[-1]["event"] == "run_end" and events[-1]["status"] == "complete"


def _interrupt_when(mark: Path, proc: subprocess.Popen) -> tuple[str, str]:
    """Ctrl-C ``proc`` once ``mark`` exists; its (stdout, stderr)."""
    import signal
    import time

    deadline = time.monotonic() + 120
    while not mark.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=120)


def test_ctrl_c_during_the_start_up_checks_prints_one_line(tmp_path):
    """Ctrl-C while `kit run` is still checking (here: importing the benchmark stack): exit 130, one line
    on stderr, no traceback, nothing written (Typer turned it into exit 130 without a word)."""
    mark = tmp_path / "importing"
    env = _env(tmp_path, KIT_FAKE_BENCH_STARTUP_S="60", KIT_FAKE_BENCH_STARTUP_MARK=str(mark))
    proc = subprocess.Popen([sys.executable, "-m", "kit", "run", *SMALL], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=sigint_as_from_a_terminal)
    out, err = _interrupt_when(mark, proc)
    assert proc.returncode == 130, err
    assert err.splitlines() == ["interrupted (Ctrl-C)"], err
    assert out == "" and not (tmp_path / "results").exists()


def test_ctrl_c_while_the_kit_itself_is_being_imported_prints_one_line(tmp_path):
    """Ctrl-C in the first moments of `python -m kit` (the command line's own modules still loading, which
    takes seconds on a slow disk: here an import made slow on purpose): exit 130 and one line, as later."""
    mark = tmp_path / "importing"
    slow = tmp_path / "slow-import"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(
        "import os, sys, time\n"
        "class _Slow:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'kit.cli.main':\n"
        f"            open({str(mark)!r}, 'w').close()\n"
        "            time.sleep(60)\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Slow())\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(slow), str(REPO)]))
    proc = subprocess.Popen([sys.executable, "-m", "kit", "--version"], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=sigint_as_from_a_terminal)
    out, err = _interrupt_when(mark, proc)
    assert proc.returncode == 130, err
    assert err.splitlines() == ["interrupted (Ctrl-C)"], err
    assert out == ""
