"""A broken benchmark stack is a failure, not a run of skipped cells: `kit run` stops before its
first cell (exit 6) and `kit doctor` says so, each naming the pair that fixes it.

A torchvision built for another torch is simulated by a `torchvision` package first on the import
path whose import raises what such a pair raises (``RuntimeError: operator torchvision::nms does
not exist``), with package metadata saying it is torchvision 0.30.0. The real torch of the test
environment (requirements-test.txt: 2.14.1) is the torch it fails with.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kit.compat import metadata
from kit.env import bench_stack
from kit.env.bench_stack import Finding, findings, needed_for
from kit.facts import torch_pairs
from kit.results.schema import RunConfig
from kit.runner.plan import build_plan

REPO = Path(__file__).resolve().parents[1]
NMS = "operator torchvision::nms does not exist"


def _broken_torchvision(root: Path, version: str = "0.30.0") -> Path:
    """A folder to put first on the import path: a torchvision whose import raises as a
    torchvision built for another torch does, and its metadata."""
    (root / "torchvision").mkdir(parents=True)
    (root / "torchvision" / "__init__.py").write_text(f"raise RuntimeError({NMS!r})\n")
    info = root / f"torchvision-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torchvision\nVersion: {version}\n")
    return root


def _kit(tmp_path: Path, first: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(first), str(REPO)]), COLUMNS="250",
               KIT_RESULTS_DIR=str(tmp_path / "results"), KIT_DATA_DIR=str(tmp_path / "data"))
    return subprocess.run([sys.executable, "-m", "kit", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)


def _installed_torch() -> str:
    version = metadata.version("torch")
    assert version.startswith("2.14.1"), "requirements-test.txt pins torch 2.14.1; these messages name its pair"
    return version


def test_kit_run_with_a_torchvision_that_does_not_import_stops_before_the_first_cell(tmp_path):
    _installed_torch()
    out = _kit(tmp_path, _broken_torchvision(tmp_path / "broken"),
               "run", "--smoke", "--suite", "all", "--device", "cpu", "--data", "synthetic")
    assert out.returncode == 6, out.stderr[-3000:]
    assert "Traceback" not in out.stderr and out.stdout == ""
    lines = out.stderr.splitlines()
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, out.stderr
    assert re.fullmatch(r"error: The benchmark stack is broken: torchvision 0\.30\.0 does not import with torch "
                        r"2\.14\.1\S* \(RuntimeError: operator torchvision::nms does not exist\); the CIFAR suite "
                        r"needs it for its ResNets\.", errors[0]), errors[0]
    assert re.fullmatch(r"what to do: Install the torchvision built for torch 2\.14\.1\S*: "
                        r"pip install torchvision==0\.29\.1\.", lines[lines.index(errors[0]) + 1]), out.stderr
    # stopped before the first cell: no run folder, no data
    assert not (tmp_path / "results").exists() and not (tmp_path / "data").exists()


def test_kit_doctor_shows_the_stack_and_exits_6_with_the_pair(tmp_path):
    _installed_torch()
    out = _kit(tmp_path, _broken_torchvision(tmp_path / "broken"), "doctor", "--stack", "cpu")
    assert out.returncode == 6, out.stdout + out.stderr
    assert re.search(r"Benchmark stack \(kit run, \S+\): torch 2\.14\.1\S*, torchvision 0\.30\.0 \(does not "
                     r"import\), fastai \S+", out.stdout), out.stdout
    assert "error: The benchmark stack of kit run in this Python is broken: torchvision 0.30.0 does not import " \
           "with torch 2.14.1" in out.stderr
    assert "pip install torchvision==0.29.1." in out.stderr and "Traceback" not in out.stderr


def test_a_run_without_cifar_cells_does_not_need_torchvision():
    lstm = build_plan(RunConfig.of(suite="lstm", data="synthetic", device="cpu"))
    assert needed_for(lstm.cells) == ("torch",)
    torch_only = build_plan(RunConfig.of(suite="cifar", data="synthetic", device="cpu", engines=["torch"]))
    assert needed_for(torch_only.cells) == ("torch", "torchvision")
    both = build_plan(RunConfig.of(suite="all", data="synthetic", device="cpu", engines=["torch", "fastai"]))
    assert needed_for(both.cells) == ("torch", "torchvision", "fastai")


# -- what is wrong, and the fix, for each kind of install -------------------------------------

OK = {"installed": "2.14.1", "imports": True, "version": "2.14.1+cpu"}


def _stack(torch=None, torchvision=None, fastai=None) -> dict:
    return {"torch": torch or OK,
            "torchvision": torchvision or {"installed": "0.29.1", "imports": True, "version": "0.29.1+cpu"},
            "fastai": fastai or {"installed": "2.8.12", "imports": True, "version": "2.8.12"}}


def test_a_working_pair_has_no_findings():
    assert findings(_stack()) == []


def test_a_pair_that_imports_but_does_not_agree_is_a_warning_with_the_matching_torchvision():
    got = findings(_stack(torch={"installed": "2.9.1", "imports": True, "version": "2.9.1"},
                          torchvision={"installed": "0.23.0", "imports": True, "version": "0.23.0"}))
    assert got == [Finding("warning", "torchvision",
                           "torchvision 0.23.0 is not the release built for torch 2.9.1: it imports, but its operators may fail",
                           "Install the torchvision built for torch 2.9.1: pip install torchvision==0.24.1.")]


def test_a_torch_the_kit_does_not_pin_is_given_the_line_of_its_torchvision():
    got = findings(_stack(torch={"installed": "2.7.1", "imports": True, "version": "2.7.1"},
                          torchvision={"installed": "0.23.0", "imports": False, "error": f"RuntimeError: {NMS}"}))
    assert [f.remedy for f in got] == ["Install the torchvision built for torch 2.7.1: pip install 'torchvision==0.22.*'."]


def test_a_torch_of_an_unknown_line_is_given_the_pair_the_kit_tests():
    got = findings(_stack(torch={"installed": "2.11.0", "imports": True, "version": "2.11.0"},
                          torchvision={"installed": "0.30.0", "imports": False, "error": f"RuntimeError: {NMS}"}))
    assert got[0].severity == "error"
    assert got[0].remedy == ("Install a pair that works together, the one the kit tests: "
                             "pip install torch==2.14.1 torchvision==0.29.1.")


def test_the_right_torchvision_that_does_not_import_is_reinstalled():
    got = findings(_stack(torchvision={"installed": "0.29.1", "imports": False, "error": "OSError: libc10.so"}))
    assert got[0].remedy == "Reinstall it: pip install --force-reinstall --no-deps torchvision==0.29.1."


def test_a_torch_that_does_not_import_is_the_one_finding():
    got = findings(_stack(torch={"installed": "2.14.1", "imports": False, "error": "OSError: libtorch_cpu.so"},
                          torchvision={"installed": "0.29.1", "imports": False, "error": "OSError: libtorch_cpu.so"}))
    assert [(f.severity, f.package) for f in got] == [("error", "torch")]
    assert got[0].remedy == ("Reinstall a pair that works together, the one the kit tests: pip install --force-reinstall "
                             "torch==2.14.1 torchvision==0.29.1; or run in the kit's container instead: kit launch.")


def test_without_torch_it_is_a_host_only_install_not_an_error():
    missing = {"installed": "not installed", "imports": False, "error": "ModuleNotFoundError: No module named 'torch'"}
    got = findings(_stack(torch=missing, torchvision=dict(missing), fastai=dict(missing)))
    assert [(f.severity, f.package) for f in got] == [("info", "torch")]
    assert "pip install '.[bench]'" in got[0].remedy and "kit launch" in got[0].remedy


def test_fastai_missing_names_its_pin_and_the_engine_to_leave_out():
    missing = {"installed": "not installed", "imports": False, "error": "ModuleNotFoundError: No module named 'fastai'"}
    got = findings(_stack(fastai=missing))
    assert got == [Finding("error", "fastai", "fastai is not installed; the CIFAR suite's fastai engine needs it",
                           "Install it: pip install fastai==2.8.12; or leave that engine out: --engines torch.")]
    assert findings(_stack(fastai=missing), needs=("torch", "torchvision")) == []


def test_an_import_that_kills_its_python_is_named(tmp_path, monkeypatch):
    """The imports run in a child Python: one that dies inside an import (a broken native
    library) is reported for that package, and this process goes on."""
    root = tmp_path / "path"
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("__version__ = '2.14.1'\n")
    (root / "torchvision").mkdir()
    (root / "torchvision" / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    monkeypatch.setattr(sys, "path", [str(root)] + sys.path)
    got = bench_stack.probe(("torch", "torchvision"))
    assert got["torch"]["imports"] is True and got["torch"]["version"] == "2.14.1"
    assert got["torchvision"] | {"installed": None} == {
        "installed": None, "imports": False, "error": "the Python process importing it was killed by SIGKILL"}


def test_the_pair_the_kit_names_is_the_pair_make_test_installs():
    pins = dict(line.split("==") for line in (REPO / "requirements-test.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert (pins["torch"], pins["torchvision"], pins["fastai"]) == (
        torch_pairs.TESTED_STACK.torch, torch_pairs.TESTED_STACK.torchvision, torch_pairs.TESTED_STACK.fastai)
    assert torch_pairs.tested_pair() == f"torch=={pins['torch']} torchvision=={pins['torchvision']}"
    for torch, torchvision in torch_pairs.PINNED_PAIRS.items():
        assert torch_pairs.pair_agrees(torch, torchvision) is True


@pytest.mark.parametrize("text, line", [("2.14.1+cu130", "2.14"), ("1.4.0", "1.4"), ("2.10.0a0+git1", "2.10"),
                                        ("unknown", None)])
def test_release_lines(text, line):
    assert torch_pairs.release_line(text) == line
