"""`kit launch -- --resume ...`: the resumed run is followed, ends with exit 0 and its bundle,
and the command an interrupted launch prints works as printed (also through `make run`);
the container runs as the results folder's owner; the closing line counts measured and
skipped cells; `--gpu` is said to be ignored only when it was given.

The fake Docker client of test_launch_run plays the container (journal lines appended to
the mounted results folder, a bundle at the end); the journal numbers are fixture values,
not measurements.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kit.errors import Interrupted, UsageError
from kit.launch import launcher
from kit.launch.display import NullLaunchUI
from kit.launch.follow import JournalFollower, bundle_from_output
from kit.launch.launcher import LaunchOutcome
from kit.launch.resume import Rerun, resume_command
from test_launch_run import CELLS, JOURNAL, RUN_ID, FakeClient, FakeContainer, _cell_end, _launch, results  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]

# the first session: run_start, the first cell, then Ctrl-C
FIRST_SESSION = [
    JOURNAL[0],
    _cell_end(1, CELLS[0]),
    {"seq": 2, "time": 1.5, "event": "run_interrupted", "cell_id": None, "message": "interrupted (Ctrl-C)"},
    {"seq": 3, "time": 1.6, "event": "run_end", "cell_id": None, "status": "interrupted"},
]
# what the resume appends
RESUMED = [
    {"seq": 4, "time": 5.0, "event": "note", "cell_id": None, "message": "resumed; 1 finished cell(s) kept", "resumed": True},
    _cell_end(5, CELLS[1], status="skipped"),
    {"seq": 6, "time": 6.0, "event": "run_end", "cell_id": None, "status": "complete"},
]


class ResumingContainer(FakeContainer):
    """A container resuming RUN_ID: appends RESUMED to the existing journal; at the end it
    renames the interrupted run's bundle (as a kit that marks it in its name does), writes the
    complete one under the plain name and prints its container path on stdout."""

    def __init__(self, results, print_bundle=True, **kw):
        super().__init__(results, RESUMED, **kw)
        self.print_bundle = print_bundle

    def _exit(self):
        if self.status != "exited":
            self.status = "exited"
            plain = self.results / f"{RUN_ID}.tar.gz"
            if plain.exists():
                plain.rename(self.results / f"{RUN_ID}.interrupted.tar.gz")
            plain.write_bytes(b"fixture bundle, complete")

    def logs(self, tail=None, stdout=True, stderr=True):
        if stdout and not stderr:
            return f"/results/{RUN_ID}.tar.gz\n".encode() if self.print_bundle else b""
        return self.logs_bytes


def _interrupted_run(results: Path) -> Path:
    run_dir = results / RUN_ID
    run_dir.mkdir(parents=True)
    (run_dir / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in FIRST_SESSION))
    (results / f"{RUN_ID}.tar.gz").write_bytes(b"fixture bundle, interrupted")
    old = 1_000_000_000  # the first session's bundle is old; a rename keeps its time
    os.utime(results / f"{RUN_ID}.tar.gz", (old, old))
    return run_dir


class Seen(NullLaunchUI):
    def __init__(self):
        self.runs, self.cells = [], []

    def run_started(self, run_id, cells, finished=0):
        self.runs.append((run_id, list(cells), finished))

    def cell_done(self, cell_id, headline, status):
        self.cells.append((cell_id, status))


@pytest.mark.parametrize("print_bundle", [True, False], ids=["printed", "newest-written"])
def test_a_resume_is_followed_and_ends_with_exit_0_and_its_bundle(results, print_bundle):
    run_dir = _interrupted_run(results)
    client = FakeClient(lambda r: ResumingContainer(r, print_bundle=print_bundle))
    ui = Seen()
    out = _launch(results, client, stack="cpu", skip_checks=True, ui=ui, run_args=["--resume", f"/results/{RUN_ID}"])
    (call,) = client.containers.calls
    assert call["command"] == ["run", "--resume", f"/results/{RUN_ID}"]  # no --device added: the journal's apply
    assert out.run_dir == run_dir.resolve()
    assert out.bundle == results.resolve() / f"{RUN_ID}.tar.gz" and out.bundle.read_bytes().endswith(b"complete")
    # progress: the bar starts at the cell the first session finished, then the resumed cell
    assert ui.runs == [(RUN_ID, CELLS, 1)]
    assert ui.cells == [(CELLS[1], "skipped")]
    assert out.counts == {"ok": 1, "skipped": 1, "failed": 0} and out.finished_before == 1
    assert out.summary() == "1 measured, 1 skipped (1 of them finished before this resume)"


def test_a_resume_takes_the_run_folders_host_path_too(results):
    run_dir = _interrupted_run(results)
    client = FakeClient(lambda r: ResumingContainer(r))
    out = _launch(results, client, stack="cpu", skip_checks=True, run_args=["--resume", str(run_dir)])
    assert client.containers.calls[0]["command"] == ["run", "--resume", f"/results/{RUN_ID}"]
    assert out.bundle is not None and out.exit_code == 0


def test_a_run_folder_elsewhere_is_resumed_in_its_own_results_folder(tmp_path, monkeypatch):
    """Without --results-dir, `--resume /elsewhere/<run>` mounts /elsewhere at /results (the
    bundle lands beside the folder), and an interrupted resume prints that folder."""
    monkeypatch.chdir(ROOT)
    elsewhere = tmp_path / "elsewhere"
    run_dir = _interrupted_run(elsewhere)
    client = FakeClient(lambda r: ResumingContainer(r, interrupt_after=1))
    with pytest.raises(Interrupted) as info:
        launcher.launch(stack="cpu", skip_checks=True, client=client, poll_s=0, data_dir=tmp_path / "data",
                        run_args=["--resume", str(run_dir)])
    binds = {v["bind"]: Path(k) for k, v in client.containers.calls[0]["volumes"].items()}
    assert binds["/results"] == elsewhere.resolve()
    words = shlex.split(info.value.remedy[len("Continue with: "):])
    assert words[words.index("--results-dir") + 1] == str(elsewhere.resolve())


def test_a_resume_of_a_folder_that_is_not_there_stops_before_a_container_starts(results, tmp_path):
    _interrupted_run(results)
    client = FakeClient(lambda r: ResumingContainer(r))
    with pytest.raises(UsageError, match="does not exist"):
        _launch(results, client, stack="cpu", skip_checks=True, run_args=["--resume", "/results/no-such-run"])
    elsewhere = tmp_path / "elsewhere" / RUN_ID
    elsewhere.mkdir(parents=True)
    (elsewhere / "journal.jsonl").write_text("")
    with pytest.raises(UsageError, match="not in the results folder"):
        _launch(results, client, stack="cpu", skip_checks=True, run_args=["--resume", str(elsewhere)])
    (results / "not-a-run").mkdir()
    with pytest.raises(UsageError, match="no journal.jsonl"):
        _launch(results, client, stack="cpu", skip_checks=True, run_args=["--resume", "/results/not-a-run"])
    assert client.containers.calls == []


def test_a_torn_last_line_does_not_hide_what_the_resume_appends(tmp_path):
    run_dir = tmp_path / "results" / RUN_ID
    run_dir.mkdir(parents=True)
    journal = run_dir / "journal.jsonl"
    good = "".join(json.dumps(e) + "\n" for e in FIRST_SESSION[:2])
    journal.write_text(good + '{"seq": 2, "event": "cell_st')  # a crash mid-line
    follower = JournalFollower(run_dir.parent, run_dir=run_dir)
    assert [e["seq"] for e in follower.earlier] == [0, 1]
    # the resumed run cuts the torn line, then appends
    journal.write_text(good + json.dumps(RESUMED[1]) + "\n")
    assert [e["event"] for e in follower.poll()] == ["cell_end"]
    assert follower.statuses == {CELLS[0]: "ok", CELLS[1]: "skipped"}


def test_the_printed_bundle_path_is_read_as_a_host_path(tmp_path):
    (tmp_path / "a.tar.gz").write_bytes(b"x")
    assert bundle_from_output(["progress", "/results/a.tar.gz"], tmp_path) == tmp_path / "a.tar.gz"
    assert bundle_from_output(["Bundle: /results/a.tar.gz", "done"], tmp_path) == tmp_path / "a.tar.gz"  # the cuda10 runner
    assert bundle_from_output(["/results/missing.tar.gz"], tmp_path) is None
    assert bundle_from_output(["/results/../a.tar.gz", "/etc/a.tar.gz"], tmp_path) is None


# -- the command an interrupted launch prints --------------------------------------


def _on_base(client, base="kit-base/debian:bookworm"):
    """The fake engine's cpu image, built on ``base`` (so --base finds it current)."""
    from kit.launch.stacks import LABEL_BASE, image_spec

    client.images.present[image_spec("cpu", ROOT).tag].labels[LABEL_BASE] = base
    return client


def _interrupt_once(results, **kw):
    client = _on_base(FakeClient(lambda r: FakeContainer(r, JOURNAL, interrupt_after=3)))
    with pytest.raises(Interrupted) as info:
        _launch(results, client, stack="cpu", skip_checks=True, **kw)
    remedy = info.value.remedy
    assert remedy.startswith("Continue with: ")
    return remedy[len("Continue with: "):]


def test_the_printed_resume_command_works_as_printed(results, monkeypatch, tmp_path):
    """Interrupted with --results-dir: the printed command names that folder (its host path),
    not --gpu on the cpu stack, and run as printed (through the CLI) it resumes the run."""
    from kit.cli.main import app

    data = tmp_path / "data-elsewhere"
    printed = _interrupt_once(results, data_dir=data, rerun=Rerun(prog="kit launch"), build_kwargs={"base": "kit-base/debian:bookworm"})
    words = shlex.split(printed)
    assert words[:2] == ["kit", "launch"]
    assert "--gpu" not in words
    assert words[words.index("--results-dir") + 1] == str(results.resolve())
    assert words[words.index("--data-dir") + 1] == str(data.resolve())
    assert words[words.index("--base") + 1] == "kit-base/debian:bookworm"
    assert words[-3:] == ["--", "--resume", f"/results/{RUN_ID}"]

    # run it as printed: the CLI hands these options to the launcher, which resumes the run
    real_launch = launcher.launch
    client = _on_base(FakeClient(lambda r: ResumingContainer(r)))
    seen = {}

    def through_fake_engine(gpu, stack, run_args, **kw):
        seen.update(kw, gpu=gpu, stack=stack, run_args=list(run_args))
        kw.update(client=client, poll_s=0, skip_checks=True)
        return real_launch(gpu, stack, run_args, **kw)

    monkeypatch.setattr(launcher, "launch", through_fake_engine)
    result = CliRunner().invoke(app, words[1:])
    assert result.exit_code == 0, result.output
    assert seen["results_dir"] == results.resolve() and seen["gpu"] is None
    assert client.containers.calls[0]["command"] == ["run", "--resume", f"/results/{RUN_ID}"]
    assert f"Bundle: {results.resolve() / (RUN_ID + '.tar.gz')}\n" in result.output
    assert "Done: 1 measured, 1 skipped" in result.output


def test_the_printed_command_keeps_the_gpu_of_a_gpu_stack():
    cmd = resume_command(Rerun(), "cuda12", "1", Path("/r/run1"), Path("/r"))
    assert cmd == "kit launch --stack cuda12 --gpu 1 -- --resume /results/run1"
    assert resume_command(Rerun(prog=".venv/bin/kit launch"), "cpu", "0", Path("/r/a b"), Path("/r"), results_given=True) == \
        ".venv/bin/kit launch --stack cpu --results-dir /r -- --resume '/results/a b'"


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
def test_through_make_the_printed_command_is_a_make_run_that_passes_it_on(tmp_path):
    cmd = resume_command(Rerun(make=True), "cpu", "0", Path("/srv/my results/run1"), Path("/srv/my results"),
                         results_given=True, base="kit-base/debian:bookworm")
    words = shlex.split(cmd)
    assert words[:3] == ["make", "run", "STACK=cpu"] and "BASE=kit-base/debian:bookworm" in words
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "ARGS")}
    out = subprocess.run(["make", "-n", *words[1:], f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True, text=True,
                         check=True, env=env).stdout
    (line,) = [ln for ln in out.splitlines() if "kit launch" in ln]
    assert line.startswith("KIT_LAUNCH_VIA=make ")
    # the shell make runs splits ARGS again: the quoted folder stays one word
    launched = shlex.split(line)
    assert launched[launched.index("--results-dir") + 1] == "/srv/my results"
    assert launched[-3:] == ["--", "--resume", "/results/run1"] and "--gpu" not in launched


def test_how_started_names_the_launcher_as_the_user_typed_it(monkeypatch, tmp_path):
    import sys

    from kit.cli.launch import how_started

    monkeypatch.delenv("KIT_LAUNCH_VIA", raising=False)
    monkeypatch.setattr(sys, "argv", [str(ROOT / "kit" / "__main__.py"), "launch"])
    assert how_started().prog == f"{sys.executable} -m kit launch"
    venv_kit = tmp_path / ".venv" / "bin" / "kit"
    venv_kit.parent.mkdir(parents=True)
    venv_kit.write_text("#!/bin/sh\n")
    venv_kit.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(sys, "argv", [".venv/bin/kit", "launch"])
    assert how_started().prog == ".venv/bin/kit launch"
    monkeypatch.setenv("KIT_LAUNCH_VIA", "make")
    assert how_started().make


# -- whose files ---------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_the_container_runs_as_the_results_folders_owner_whoever_launches_it(results):
    results.mkdir(parents=True)
    os.chown(results, 4321, 4322)
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    _launch(results, client, stack="cpu", skip_checks=True)
    assert client.containers.calls[0]["user"] == "4321:4322"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root (sudo make run)")
def test_under_sudo_a_new_results_folder_is_the_owner_of_the_folder_it_is_made_in(tmp_path, monkeypatch):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    os.chown(checkout, 4321, 4322)
    monkeypatch.chdir(ROOT)
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    launcher.launch(stack="cpu", skip_checks=True, client=client, poll_s=0,
                    results_dir=checkout / "results", data_dir=checkout / "data")
    for made in ("results", "data"):
        st = (checkout / made).stat()
        assert (st.st_uid, st.st_gid) == (4321, 4322), made
    assert client.containers.calls[0]["user"] == "4321:4322"


def test_the_container_user_is_the_results_folders_owner(results):
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    _launch(results, client, stack="cpu", skip_checks=True)
    st = results.stat()
    assert client.containers.calls[0]["user"] == f"{st.st_uid}:{st.st_gid}"


# -- the closing line, --gpu on the cpu stack ------------------------------------------


def test_done_counts_measured_and_skipped_cells(monkeypatch):
    from kit.cli.main import app

    outcome = LaunchOutcome("cpu", "mpkit:cpu-x", (), 0, Path("/r/run"), Path("/r/run.tar.gz"), cells_done=9,
                            counts={"ok": 5, "skipped": 4, "failed": 0})
    monkeypatch.setattr(launcher, "launch", lambda *a, **kw: outcome)
    result = CliRunner().invoke(app, ["launch", "--stack", "cpu"])
    assert result.exit_code == 0, result.output
    assert "Done: 5 measured, 4 skipped, on the CPU" in result.output
    outcome.counts["failed"] = 1
    assert outcome.summary() == "5 measured, 4 skipped, 1 failed"


def test_without_a_gpu_kit_launch_says_no_gpu_was_used_at_the_end_with_the_result(results, monkeypatch):
    """`make run` on a machine without a GPU: nothing claims "no GPU was used" before the run; the
    last line says it, after the counts and the bundle."""
    from kit.cli.main import app
    from kit.env import nvml as nvml_mod
    from fixtures.nvml_fake import FakeNVML
    from kit.launch import engine

    client = FakeClient(lambda r: FakeContainer(r, JOURNAL), runtimes=("runc",))
    monkeypatch.setattr(engine, "connect", lambda *a, **kw: client)
    monkeypatch.setattr(nvml_mod, "load_module", lambda: FakeNVML.from_file(ROOT / "tests" / "fixtures" / "nvml" / "no_driver.json"))
    monkeypatch.setenv("COLUMNS", "250")
    result = CliRunner().invoke(app, ["launch", "--results-dir", str(results), "--data-dir", str(results.parent / "data")])
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    done = next(i for i, ln in enumerate(lines) if ln.startswith("Done: 2 measured, 0 skipped, on the CPU, stack cpu."))
    assert not any("was used" in ln for ln in lines[:done]), lines[:done]
    assert lines[-1] == ("No GPU was used: the cpu stack ran PyTorch on the CPU. This checked the kit end to end; "
                         "its numbers are not GPU results.")


def test_the_cpu_stack_says_gpu_is_ignored_only_when_it_was_given(results):
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    plain = _launch(results, client, stack="cpu", skip_checks=True)
    assert any("does not use a GPU" in n for n in plain.notes)
    assert not any("--gpu is ignored" in n for n in plain.notes)
    given = _launch(results.parent / "again", client, gpu="0", stack="cpu", skip_checks=True)
    assert any("--gpu is ignored" in n for n in given.notes)


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
@pytest.mark.parametrize("target, command", [("run", "kit launch"), ("image", "kit image build")])
def test_make_passes_gpu_only_when_given_and_ca_cert(tmp_path, target, command):
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "ARGS")}

    def line(*variables):
        out = subprocess.run(["make", "-n", target, f"VENV={tmp_path / 'venv'}", "ARGS=", *variables], cwd=ROOT,
                             capture_output=True, text=True, check=True, env=env).stdout
        (found,) = [ln for ln in out.splitlines() if command in ln]
        return found.split()

    words = line("STACK=cpu", "CA_CERT=/etc/proxy ca.pem".replace(" ", "-"))
    assert words[words.index("--ca-cert") + 1] == "/etc/proxy-ca.pem"
    assert words[0] == "KIT_LAUNCH_VIA=make"  # its errors then name CA_CERT= and BASE=, not the options
    assert "--gpu" not in words
    assert "--ca-cert" not in line()
    if target == "run":
        words = line("GPU=1")
        assert words[words.index("--gpu") + 1] == "1"
