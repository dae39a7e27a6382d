"""`kit launch` end to end against a fake Docker client (no engine, no GPU).

The fake container plays the in-container runner: each time the launcher
polls it, it appends the next line of a journal to the mounted results folder,
then exits (and optionally writes a bundle), as `kit run` does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kit.errors import DataError, DockerError, EnvironmentCheckError, Interrupted, KitError, RunFailed, UsageError
from kit.launch import launcher
from kit.launch.display import NullLaunchUI
from kit.launch.launcher import container_command, launch, parse_gpus
from kit.launch.stacks import LABEL_BASE, LABEL_LOCK, LABEL_SOURCE, LABEL_STACK, image_spec

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "nvml"

# Journal lines of a two-cell run. The numbers are fixture values, not measurements.
RUN_ID = "20261130-120000-fixture-cifar-ab12"
CELLS = ["cifar/resnet18/fp32/torch", "cifar/resnet18/amp-bf16/torch"]


def _cell_end(seq, cell, status="ok"):
    workload, model, precision, engine = cell.split("/")
    result = {"workload": workload, "model": model, "precision": precision, "engine": engine, "status": status,
              "throughput_unit": "images", "reason": None if status == "ok" else "fixture",
              "summary": {"throughput_items_per_s": {"n": 1, "median": 1234.0, "mean": 1234.0, "min": 1234.0,
                                                     "max": 1234.0, "stdev": 0.0, "cv": 0.0}} if status == "ok" else {}}
    return {"seq": seq, "time": 1.0, "event": "cell_end", "cell_id": cell, "result": result}


JOURNAL = [
    {"seq": 0, "time": 0.0, "event": "run_start", "cell_id": None, "run_id": RUN_ID, "config": {}, "cells": CELLS},
    _cell_end(1, CELLS[0]),
    _cell_end(2, CELLS[1]),
    {"seq": 3, "time": 2.0, "event": "run_end", "cell_id": None, "status": "complete"},
]


class FakeContainer:
    def __init__(self, results: Path, journal, exit_code=0, write_bundle=True, interrupt_after=None, logs=b""):
        self.results = results
        self.journal = list(journal)
        self.exit_code = exit_code
        self.write_bundle = write_bundle
        self.interrupt_after = interrupt_after
        self.logs_bytes = logs
        self.status = "running"
        self.name = "mpkit-test"
        self.attrs = {"State": {"ExitCode": exit_code}}
        self.polls = 0
        self.killed_with = None
        self.stopped = False
        self.removed = False

    def _write_next(self):
        run_dir = self.results / RUN_ID
        run_dir.mkdir(parents=True, exist_ok=True)
        if self.journal:
            with open(run_dir / "journal.jsonl", "a") as fh:
                fh.write(json.dumps(self.journal.pop(0)) + "\n")
        if not self.journal:
            self._exit()

    def _exit(self):
        if self.status != "exited":
            self.status = "exited"
            if self.write_bundle:
                (self.results / f"{RUN_ID}.tar.gz").write_bytes(b"fixture bundle")

    def reload(self):
        self.polls += 1
        if self.interrupt_after is not None and self.polls == self.interrupt_after:
            raise KeyboardInterrupt
        if self.status == "running":
            self._write_next()

    def kill(self, signal=None):
        self.killed_with = signal
        self.exit_code = 130
        self.journal = [{"seq": 9, "time": 3.0, "event": "run_interrupted", "cell_id": None, "message": "Ctrl-C"}]

    def stop(self, timeout=None):
        self.stopped = True
        self._exit()

    def wait(self, timeout=None):
        return {"StatusCode": self.exit_code}

    def logs(self, tail=None):
        return self.logs_bytes

    def remove(self, force=False):
        self.removed = True


class FakeContainers:
    def __init__(self, make):
        self.make = make
        self.calls = []

    def run(self, image, command, **kwargs):
        self.calls.append({"image": image, "command": command, **kwargs})
        volumes = kwargs["volumes"]
        results = Path(next(host for host, v in volumes.items() if v["bind"] == "/results"))
        return self.make(results)


class FakeImage:
    def __init__(self, labels):
        self.labels = labels
        self.id = "sha256:" + "ab" * 32


class FakeImages:
    def __init__(self, present: dict):
        self.present = present

    def get(self, tag):
        if tag not in self.present:
            raise type("ImageNotFound", (Exception,), {})(tag)
        return self.present[tag]


class FakeClient:
    def __init__(self, make, runtimes=("runc", "nvidia")):
        self.containers = FakeContainers(make)
        self.images = FakeImages({})
        self.runtimes = runtimes
        for stack in ("cpu", "cuda12", "cuda10"):
            spec = image_spec(stack, ROOT)
            self.images.present[spec.tag] = FakeImage({LABEL_LOCK: spec.lock_sha256, LABEL_SOURCE: spec.source_sha256, LABEL_STACK: stack})

    def info(self):
        return {"ServerVersion": "28.1.1", "Runtimes": {r: {} for r in self.runtimes}}


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the launcher finds docker/Dockerfile from here
    return tmp_path / "results"


def _launch(results, client, **kw):
    kw.setdefault("data_dir", results.parent / "data")
    return launch(results_dir=results, client=client, poll_s=0, **kw)


# -- options ------------------------------------------------------------------


def test_gpu_option_accepts_indices_and_rejects_the_rest():
    assert parse_gpus("0") == (0,)
    assert parse_gpus("1,3") == (1, 3)
    assert parse_gpus(" 1 , 3 ") == (1, 3)
    for bad in ("", "x", "-1", "0,0", "gpu0", ","):
        with pytest.raises(UsageError):
            parse_gpus(bad)
    for typo in ("0,,1", "0,", ",1"):  # an empty item is a typo, as in every comma list of the kit
        with pytest.raises(UsageError, match="empty item"):
            parse_gpus(typo)


def test_container_command_defaults():
    assert container_command("cpu", [], smoke_default=True) == ["run", "--smoke", "--suite", "all", "--device", "cpu"]
    assert container_command("cuda12", [], smoke_default=False) == ["run", "--suite", "all", "--device", "cuda:0"]
    assert container_command("cuda12", ["--suite", "cifar"], False) == ["run", "--suite", "cifar", "--device", "cuda:0"]
    assert container_command("cuda12", ["run", "--device", "cuda:1"], False) == ["run", "--device", "cuda:1"]
    assert container_command("cpu", ["--suite", "lstm"], False) == ["run", "--suite", "lstm", "--device", "cpu"]


# -- a run ----------------------------------------------------------------------


def test_launch_gives_the_container_exactly_the_requested_gpu(results):
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    seen = []

    class UI(NullLaunchUI):
        def cell_done(self, cell_id, headline, status):
            seen.append((cell_id, headline, status))

    out = _launch(results, client, gpu="1", stack="cuda12", skip_checks=True, ui=UI())
    (call,) = client.containers.calls
    (req,) = call["device_requests"]
    assert req["DeviceIDs"] == ["1"] and req["Capabilities"] == [["gpu"]]
    assert call["shm_size"] == "2g" and call["network_mode"] == "host"
    assert call["user"] == f"{os.getuid()}:{os.getgid()}"
    binds = {v["bind"]: Path(k) for k, v in call["volumes"].items()}
    assert binds == {"/results": results.resolve(), "/data": (results.parent / "data").resolve()}
    assert call["environment"]["KIT_RESULTS_DIR"] == "/results" and call["environment"]["KIT_DATA_DIR"] == "/data"
    assert call["command"] == ["run", "--suite", "all", "--device", "cuda:0"]
    # progress came from the journal: one line per finished cell with its headline number
    assert [s[0] for s in seen] == CELLS and "1,234 images/s" in seen[0][1]
    assert out.exit_code == 0 and out.cells_done == 2 and out.gpus == ("1",)
    assert out.run_dir == results.resolve() / RUN_ID
    assert out.bundle == results.resolve() / f"{RUN_ID}.tar.gz" and not out.bundled_on_host


def test_cpu_stack_requests_no_gpu_and_says_so(results):
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL), runtimes=("runc",))
    out = _launch(results, client, gpu="0", stack="cpu", skip_checks=True)
    (call,) = client.containers.calls
    assert call["device_requests"] == []
    assert call["command"][:2] == ["run", "--smoke"]
    assert out.gpus == () and any("does not use a GPU" in n for n in out.notes)


def test_auto_without_a_gpu_runs_the_cpu_smoke_suite(results, monkeypatch):
    from fixtures.nvml_fake import FakeNVML

    client = FakeClient(lambda r: FakeContainer(r, JOURNAL), runtimes=("runc",))
    nvml = FakeNVML.from_file(FIXTURES / "no_driver.json")
    out = _launch(results, client, gpu="0", stack="auto", nvml=nvml)
    assert out.stack == "cpu"
    assert client.containers.calls[0]["command"] == ["run", "--smoke", "--suite", "all", "--device", "cpu"]
    # before the run: what will run; after it: that no GPU was used, with the result
    assert any(n.startswith("No GPU stack can run here") for n in out.notes)
    assert not any("was used" in n for n in out.notes)
    assert out.closing_note == ("No GPU was used: the cpu stack ran PyTorch on the CPU. This checked the kit end to "
                                "end; its numbers are not GPU results.")


def test_gpu_index_that_does_not_exist_stops_before_docker_runs(results):
    from fixtures.nvml_fake import FakeNVML

    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    nvml = FakeNVML.from_file(FIXTURES / "h200_580.json")  # one GPU: index 0
    with pytest.raises(EnvironmentCheckError, match="GPU 3"):
        _launch(results, client, gpu="3", stack="cuda12", nvml=nvml)
    assert client.containers.calls == []


def test_gpu_stack_without_the_toolkit_stops_before_docker_runs(results, monkeypatch):
    from kit.env import docker_probe

    monkeypatch.setattr(docker_probe.shutil, "which", lambda name: None)
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL), runtimes=("runc",))
    with pytest.raises(DockerError, match="NVIDIA Container Toolkit|cannot give containers a GPU"):
        _launch(results, client, gpu="0", stack="cuda12", skip_checks=True)
    assert client.containers.calls == []


def test_engine_refusing_the_gpu_is_explained(results):
    class Refusing(FakeContainers):
        def run(self, image, command, **kwargs):
            raise type("APIError", (Exception,), {"explanation": 'could not select device driver "" with capabilities: [[gpu]]'})("500")

    client = FakeClient(lambda r: None)
    client.containers = Refusing(None)
    with pytest.raises(DockerError) as info:
        _launch(results, client, gpu="0", stack="cuda12", skip_checks=True)
    assert "nvidia-ctk runtime configure" in info.value.remedy


def test_failed_run_exits_nonzero_with_the_log_tail(results):
    log = "\n".join(f"line {i}" for i in range(50)).encode()
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL, exit_code=8, logs=log))
    with pytest.raises(RunFailed) as info:
        _launch(results, client, gpu="0", stack="cuda12", skip_checks=True)
    msg = info.value.message
    assert "exit code 8" in msg and "line 49" in msg and "line 20" in msg and "line 19" not in msg
    assert "--resume /results/" + RUN_ID in info.value.remedy


def test_container_that_died_before_bundling_is_bundled_on_the_host(results, monkeypatch):
    exported = []

    def fake_export(run_dir, results_dir):
        exported.append(run_dir)
        target = Path(results_dir) / "host-bundle.tar.gz"
        target.write_bytes(b"fixture")
        return target

    monkeypatch.setattr(launcher, "bundle_on_host", fake_export)
    died = JOURNAL[:2]  # one cell finished, then the container was killed (OOM, say)
    client = FakeClient(lambda r: FakeContainer(r, died, exit_code=137, write_bundle=False))
    with pytest.raises(RunFailed) as info:
        _launch(results, client, gpu="0", stack="cuda12", skip_checks=True)
    assert exported == [results.resolve() / RUN_ID]
    assert "host-bundle.tar.gz" in info.value.message


def test_ctrl_c_sends_sigint_then_keeps_the_finished_cells(results):
    made = []

    def make(r):
        made.append(FakeContainer(r, JOURNAL, interrupt_after=3))
        return made[-1]

    client = FakeClient(make)
    with pytest.raises(Interrupted) as info:
        _launch(results, client, gpu="0", stack="cuda12", skip_checks=True)
    (c,) = made
    assert c.killed_with == "SIGINT"
    assert c.removed
    assert "1 finished cell(s) kept" in info.value.message  # run_start and one cell before Ctrl-C
    assert info.value.remedy.endswith(f"--resume /results/{RUN_ID}")
    assert (results / f"{RUN_ID}.tar.gz").exists()


@pytest.mark.parametrize("code, message, signal, words", [
    (143, "terminated (SIGTERM)", "SIGTERM", "Terminated (the container got SIGTERM): 1 finished cell(s) kept"),
    (124, "stopped at its time limit (--time-limit 9m)", "time-limit", "Stopped at its --time-limit: 1 finished cell(s) kept"),
], ids=["sigterm", "time-limit"])
def test_a_container_stopped_from_outside_or_at_its_limit_keeps_its_cells_and_its_exit_code(results, code, message,
                                                                                             signal, words):
    """`docker stop` from outside (143), or `kit launch -- --time-limit 9m` (124): the kit in the
    container ends as kit run does, and so does the host, with the same exit code."""
    from kit.errors import Terminated, TimeLimitReached

    journal = JOURNAL[:2] + [{"seq": 9, "time": 3.0, "event": "run_interrupted", "cell_id": None,
                              "message": message, "signal": signal}]
    client = FakeClient(lambda r: FakeContainer(r, journal, exit_code=code))
    with pytest.raises(Terminated if code == 143 else TimeLimitReached) as info:
        _launch(results, client, gpu="0", stack="cuda12", skip_checks=True)
    assert info.value.exit_code == code
    assert words in info.value.message
    assert info.value.remedy.endswith(f"--resume /results/{RUN_ID}")


def test_a_container_whose_run_did_not_start_for_its_time_limit_says_why(results):
    """`kit launch -- --time-limit 3`: kit run in the container refuses to start a first cell that would not
    fit (exit 124, nothing written); the host passes its words on, not "0 finished cell(s) kept"."""
    from kit.errors import TimeLimitReached

    said = (b"error: Run not started: its first cell to run, cifar/resnet18/fp32/torch, has an estimate of 18.9 s and "
            b"--time-limit 3 leaves 3.0 s (no run folder was made).\n"
            b"what to do: Give it more time, e.g. twice the estimate (a cell may take half or twice it): "
            b"kit run ... --time-limit 38s\n")
    client = FakeClient(lambda r: FakeContainer(r, [], exit_code=124, write_bundle=False, logs=said))
    with pytest.raises(TimeLimitReached) as info:
        _launch(results, client, gpu="0", stack="cuda12", skip_checks=True)
    assert info.value.exit_code == 124
    assert info.value.message.startswith("kit run in the cuda12 container: Run not started: its first cell to run")
    assert "finished cell(s) kept" not in info.value.message
    assert info.value.remedy.endswith("kit run ... --time-limit 38s (with kit launch: after `--`)")


def test_unknown_stack_is_a_usage_error(results):
    with pytest.raises(UsageError):
        _launch(results, FakeClient(lambda r: None), gpu="0", stack="cuda9", skip_checks=True)


def test_cuda10_without_its_runner_stops_before_building(results, tmp_path):
    from kit.launch.launcher import require_runner

    fake_root = tmp_path / "checkout"
    (fake_root / "docker" / "locks").mkdir(parents=True)
    (fake_root / "docker" / "locks" / "cuda10.txt").write_text((ROOT / "docker" / "locks" / "cuda10.txt").read_text())
    with pytest.raises(UsageError, match="kit.runner.legacy"):
        require_runner("cuda10", fake_root)
    (fake_root / "kit" / "runner" / "legacy").mkdir(parents=True)
    require_runner("cuda10", fake_root)  # present: no error
    require_runner("cpu", ROOT)  # stacks that run the kit itself never need it


# -- the container's exit code on the host ----------------------------------------

# What `kit run --suite nope` prints in the container (Click's usage error, with the
# "Value error, " that Typer 0.29 leaves from pydantic), and the cuda10 image's argparse.
CLICK_USAGE_LOG = (b"Usage: kit run [OPTIONS]\nTry 'kit run --help' for help.\n\n"
                   b"Error: Invalid value for '--suite': Value error, 'nope' is not one of 'cifar', 'lstm', 'all'.\n")
ARGPARSE_USAGE_LOG = (b"usage: kit.bench.legacy [-h] [--suite {cifar,lstm,all}]\n"
                      b"kit.bench.legacy: error: argument --suite: invalid choice: 'nope' (choose from 'cifar', 'lstm', 'all')\n")


@pytest.mark.parametrize("log, wanted", [
    (CLICK_USAGE_LOG, "Invalid value for '--suite': 'nope' is not one of 'cifar', 'lstm', 'all'."),
    (ARGPARSE_USAGE_LOG, "argument --suite: invalid choice: 'nope'"),
], ids=["click", "argparse"])
def test_bad_run_options_in_the_container_are_a_usage_error_with_a_clean_message(results, log, wanted):
    client = FakeClient(lambda r: FakeContainer(r, [], exit_code=2, write_bundle=False, logs=log))
    with pytest.raises(UsageError) as info:
        _launch(results, client, gpu="0", stack="cpu", skip_checks=True, run_args=["--suite", "nope"])
    assert info.value.exit_code == 2
    msg = info.value.message
    assert wanted in msg and "\n" not in msg, msg
    assert "Value error" not in msg
    assert "kit run --help" in info.value.remedy


def test_the_kits_own_usage_error_in_the_container_keeps_its_remedy(results):
    log = b"error: --resume /results/x: no run folder there\nwhat to do: Give a run folder under /results.\n"
    client = FakeClient(lambda r: FakeContainer(r, [], exit_code=2, write_bundle=False, logs=log))
    with pytest.raises(UsageError) as info:
        _launch(results, client, gpu="0", stack="cpu", skip_checks=True)
    assert "--resume /results/x: no run folder there" in info.value.message
    assert info.value.remedy == "Give a run folder under /results."


@pytest.mark.parametrize("code, cls", [(3, DataError), (6, EnvironmentCheckError), (1, RunFailed), (137, RunFailed)])
def test_container_exit_codes_keep_their_meaning_on_the_host(results, code, cls):
    client = FakeClient(lambda r: FakeContainer(r, [], exit_code=code, write_bundle=False, logs=b"error: something\n"))
    with pytest.raises(KitError) as info:
        _launch(results, client, gpu="0", stack="cpu", skip_checks=True)
    assert type(info.value) is cls
    assert info.value.exit_code == (code if code in (3, 6) else 8)
    assert f"exit code {code}" in info.value.message


def test_launch_builds_on_the_base_it_is_given(results, monkeypatch):
    """`kit launch --base IMAGE` (make run BASE=IMAGE): the image is built on it, as with
    `kit image build --base`, also when an image built on another base exists."""
    built = []
    monkeypatch.setattr(launcher, "build_image", lambda spec, root, client, **kw: built.append(spec))
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    client.images.present[image_spec("cpu", ROOT).tag].labels[LABEL_BASE] = "debian:bookworm"
    out = _launch(results, client, gpu="0", stack="cpu", skip_checks=True, build_kwargs={"base": "kit-base/debian:bookworm"})
    assert out.exit_code == 0
    (spec,) = built
    assert spec.build_args["BASE"] == "kit-base/debian:bookworm" and spec.base == "kit-base/debian:bookworm"
    built.clear()
    _launch(results.parent / "again", client, gpu="0", stack="cpu", skip_checks=True, build_kwargs={"base": "debian:bookworm"})
    assert built == []  # built on that base already


def test_launch_command_line_takes_base(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from kit.cli.main import app

    seen = {}

    def fake_launch(gpu, stack, run_args, **kw):
        seen.update(kw["build_kwargs"])
        raise UsageError("stop here")

    monkeypatch.setattr(launcher, "launch", fake_launch)
    result = CliRunner().invoke(app, ["launch", "--stack", "cpu", "--base", "kit-base/debian:bookworm"])
    assert seen.get("base") == "kit-base/debian:bookworm", result.output


@pytest.mark.skipif(not __import__("shutil").which("make"), reason="make is not installed")
@pytest.mark.parametrize("target, command", [("run", "kit launch"), ("image", "kit image build")])
def test_make_passes_base_to_the_kit(tmp_path, target, command):
    import os
    import subprocess

    venv = tmp_path / "venv"
    # a `make test ARGS=...` around this test passes its variables down (MAKEFLAGS, and ARGS in the
    # environment): the make under test must see only the ones given here
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "ARGS")}
    out = subprocess.run(["make", "-n", target, "BASE=kit-base/debian:bookworm", "STACK=cpu", f"VENV={venv}", "ARGS="],
                         cwd=ROOT, capture_output=True, text=True, check=True, env=env).stdout
    (line,) = [ln for ln in out.splitlines() if command in ln]
    assert line.split()[-2:] == ["--base", "kit-base/debian:bookworm"], line
    plain = subprocess.run(["make", "-n", target, f"VENV={venv}", "ARGS="], cwd=ROOT, capture_output=True, text=True,
                           check=True, env=env).stdout
    assert "--base" not in plain


def _launch_cli(args, capsys, monkeypatch, client):
    """``kit launch ARGS`` through the command line's own entry (kit.cli.main.main), against ``client``."""
    from fixtures.cli import run_main

    monkeypatch.setattr(launcher.engine, "connect", lambda: client)
    return run_main(["launch", *args], capsys, monkeypatch)


def test_launch_no_apex_is_launchs_own_option_and_builds_the_image_without_apex(results, capsys, monkeypatch):
    """`kit launch --stack cuda12 --skip-checks --no-apex -- --smoke`, what a user without GitHub and without
    a local Apex copy runs: `--no-apex` is kit launch's option (never passed on to `kit run`), and the image
    it has to build has no Apex."""
    built = []
    monkeypatch.setattr(launcher, "build_image", lambda spec, root, client, **kw: built.append(spec))
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    del client.images.present[image_spec("cuda12", ROOT).tag]  # a fresh machine: the image must be built
    code, out, err = _launch_cli(["--stack", "cuda12", "--skip-checks", "--no-apex", "--results-dir", str(results),
                                  "--data-dir", str(results.parent / "data"), "--", "--smoke"], capsys, monkeypatch, client)
    assert code == 0, err
    (spec,) = built
    assert spec.build_args["BUILD_APEX"] == "0" and spec.build_args["APEX_REF"] == "", spec.build_args
    (call,) = client.containers.calls
    assert "--smoke" in call["command"] and not any("apex" in word for word in call["command"]), call["command"]


def test_launch_with_apex_builds_the_stacks_apex(results, capsys, monkeypatch):
    """Without --no-apex (or with --apex) the image kit launch builds has the stack's pinned Apex."""
    built = []
    monkeypatch.setattr(launcher, "build_image", lambda spec, root, client, **kw: built.append(spec))
    for flag in ([], ["--apex"]):
        client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
        del client.images.present[image_spec("cuda12", ROOT).tag]
        code, _, err = _launch_cli(["--stack", "cuda12", "--skip-checks", *flag, "--results-dir", str(results / str(len(built))),
                                    "--", "--smoke"], capsys, monkeypatch, client)
        assert code == 0, err
    assert [s.build_args["BUILD_APEX"] for s in built] == ["1", "1"]


def test_launch_no_apex_with_an_apex_source_is_refused_before_anything_is_built(results, capsys, monkeypatch, tmp_path):
    built = []
    monkeypatch.setattr(launcher, "build_image", lambda spec, root, client, **kw: built.append(spec))
    source = tmp_path / "apex"
    (source / "apex").mkdir(parents=True)
    (source / "setup.py").write_text("# a stand-in Apex source\n")
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    del client.images.present[image_spec("cuda12", ROOT).tag]
    code, _, err = _launch_cli(["--stack", "cuda12", "--skip-checks", "--no-apex", "--apex-src", str(source),
                                "--results-dir", str(results), "--", "--smoke"], capsys, monkeypatch, client)
    assert code == 2, err
    assert "--no-apex and --apex-src/--apex-ref contradict each other" in err and "Traceback" not in err
    assert built == [] and client.containers.calls == []


def test_launch_passes_in_what_the_run_cannot_see_from_inside_the_container(results, tmp_path, monkeypatch):
    """The host's id (from its machine-id: the container's own is its image's) and the image's id reach
    the run's environment record, so a bundle made in a container names its machine and image."""
    from kit.env import identity

    machine_id = tmp_path / "machine-id"
    machine_id.write_text("0123456789abcdef0123456789abcdef\n")
    monkeypatch.setattr(identity, "MACHINE_ID_FILES", (str(machine_id),))
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    _launch(results, client, gpu="0", stack="cuda12", skip_checks=True)
    (call,) = client.containers.calls
    env = call["environment"]
    assert env["KIT_HOST_ID"] == identity.machine_host_id() and identity.HOST_ID_FORM.fullmatch(env["KIT_HOST_ID"])
    assert env["KIT_IMAGE_ID"] == "sha256:" + "ab" * 32
    # inside, the record takes them
    inside = identity.host_identity(env, False, inside_container=True, machine_id_files=())
    assert inside["host_id"] == env["KIT_HOST_ID"] and inside["host_id_from"] == "machine-id"
