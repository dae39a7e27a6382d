"""Merging one machine's bundles, and comparing against the shipped H200 reference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kit.bundle.merge import reference_bundles
from kit.report.export import merge_bundles
from kit.bundle.safe_open import open_bundle
from kit.errors import UsageError

REPO = Path(__file__).resolve().parents[1]
#: another run of the same GPU model stands in for a user's bundle (a copy of the reference itself would
#: be the same run, counted once: nothing to compare)
USERS_H200 = REPO / "references" / "h200" / "perf" / "r18-torch" / "vm_NVIDIA-H200_native_20261201-230834.tar.gz"


def test_the_h200_reference_ships_and_verifies():
    [ref] = reference_bundles("h200")
    b = open_bundle(ref)
    assert b.results.status == "complete"
    assert any(c.cell_id == "cifar/resnet50/amp-fp16/torch" for c in b.results.cells)
    assert b.environment["merged_from"], "the reference says which runs it was merged from"


def test_an_unknown_reference_names_the_known_ones():
    with pytest.raises(UsageError, match="h200"):
        reference_bundles("no-such-machine")


def test_merging_a_bundle_with_itself_says_the_same_bundle_was_given_twice(tmp_path):
    """`kit bundle merge X X` (or X and a path to the same file, or X and a copy of it) names the
    mistake, not the first cell the two share."""
    import os
    import shutil

    [ref] = reference_bundles("h200")
    (tmp_path / "link.tar.gz").symlink_to(ref)
    shutil.copy(ref, tmp_path / "copy.tar.gz")
    os.link(shutil.copy(ref, tmp_path / "a.tar.gz"), tmp_path / "b.tar.gz")
    for pair in ([ref, ref], [ref, tmp_path / "link.tar.gz"], [tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"],
                 [ref, tmp_path / "copy.tar.gz"]):
        with pytest.raises(UsageError, match="the same bundle was given twice") as err:
            merge_bundles(pair, tmp_path / "out")
        assert err.value.remedy == "Give each bundle once."
    assert not (tmp_path / "out").exists()


def test_compare_against_the_reference_from_the_command_line(tmp_path):
    import shutil

    mine = tmp_path / "mine.tar.gz"
    shutil.copy(USERS_H200, mine)
    out = subprocess.run([sys.executable, "-m", "kit", "compare", str(mine), "--against", "h200", "--json", "-"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "cifar/resnet18/amp-bf16/torch" in out.stdout


def test_a_merge_keeps_each_resumed_sources_earlier_sessions(tmp_path):
    """A source run that was resumed (kit.env.record.keep_earlier_session) keeps its earlier sessions,
    with the cells each measured, in its merged_from entry; the merged environment has no top-level
    earlier_sessions of its first source alone."""
    from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
    from kit.report.export import export_run

    def bundle(cells, name: str, sessions=None) -> Path:
        env = make_env()
        if sessions is not None:
            env["earlier_sessions"] = sessions
        return export_run(make_run_dir(tmp_path / name, make_results(cells, env)), tmp_path / f"out-{name}")

    first = {"collected_at": "2026-12-01T23:27:28Z", "host": {"host_id": "h-first"}, "kit": {"git_commit": "009a818"},
             "nvml": {"gpus": [{"uuid": "GPU-first"}, {"uuid": 7}]}, "cells": ["cifar/resnet18/fp32/torch", 3]}
    a = bundle([make_cell(precision="fp32"), make_cell(precision="amp-fp16")], "a", [first, "junk"])
    b = bundle([make_cell(precision="amp-bf16")], "b")
    merged = open_bundle(merge_bundles([a, b], tmp_path / "m"))
    assert "earlier_sessions" not in merged.environment
    src_a, src_b = merged.environment["merged_from"]
    assert src_a["earlier_sessions"] == [{"collected_at": "2026-12-01T23:27:28Z", "host_id": "h-first",
                                          "gpu_uuids": ["GPU-first"], "kit_commit": "009a818",
                                          "cells": ["cifar/resnet18/fp32/torch"], "peak_tflops_measured": None,
                                          "memory_bandwidth_measured": None}]
    assert src_b["earlier_sessions"] == []


def test_bundles_of_two_machines_merge_only_with_same_model_and_say_so(tmp_path):
    """Two hosts with identical GPUs: refused by default, merged with --same-model, and the
    merged environment names each source's GPUs."""
    from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
    from kit.report.export import export_run

    def bundle(uuid: str, cells, name: str) -> Path:
        env = make_env()
        env["host"] = {"host_id": f"h-{name}"}
        env["nvml"] = {"driver_version": "580.159", "gpus": [{"name": "NVIDIA H200", "uuid": uuid}]}
        run = make_run_dir(tmp_path / name, make_results(cells, env))
        return export_run(run, tmp_path / f"out-{name}")

    a = bundle("GPU-aaaa", [make_cell(precision="fp32")], "a")
    b = bundle("GPU-bbbb", [make_cell(precision="amp-fp16")], "b")
    with pytest.raises(UsageError, match="another machine") as refused:
        merge_bundles([a, b], tmp_path / "m1")
    assert "--same-model" in refused.value.remedy
    merged = open_bundle(merge_bundles([a, b], tmp_path / "m2", same_model=True))
    assert {c.cell_id for c in merged.results.cells} == {"cifar/resnet18/fp32/torch", "cifar/resnet18/amp-fp16/torch"}
    assert [m["gpu_uuids"] for m in merged.environment["merged_from"]] == [["GPU-aaaa"], ["GPU-bbbb"]]
    assert "more than one machine" in merged.environment["merged_across_machines"]
    # a host with two such GPUs has the same model (the shipped reference came from one)
    pair = make_env()
    pair["host"] = {"host_id": "h-d"}
    pair["nvml"] = {"driver_version": "580.159", "gpus": [{"name": "NVIDIA H200", "uuid": "GPU-d0"},
                                                          {"name": "NVIDIA H200", "uuid": "GPU-d1"}]}
    d = export_run(make_run_dir(tmp_path / "d", make_results([make_cell(precision="tf32")], pair)), tmp_path / "out-d")
    both = open_bundle(merge_bundles([d, a], tmp_path / "m3", same_model=True))
    assert [m["gpu_uuids"] for m in both.environment["merged_from"]] == [["GPU-d0", "GPU-d1"], ["GPU-aaaa"]]
    other = make_env()
    other["nvml"] = {"driver_version": "580.159", "gpus": [{"name": "NVIDIA H100", "uuid": "GPU-e"}]}
    e = export_run(make_run_dir(tmp_path / "e", make_results([make_cell(precision="fp16-master")], other)), tmp_path / "out-e")
    with pytest.raises(UsageError, match="GPU models or driver"):
        merge_bundles([a, e], tmp_path / "m4", same_model=True)


def test_a_merged_bundle_says_what_its_runs_asked_for_and_where_they_differed(tmp_path):
    """Two runs of one machine with different suites, models and step counts: the merged
    config is their union (not the first run's), the differing settings are listed per run,
    and the report names each merged run's command instead of the first one's."""
    from fixtures.results.factory import make_cell, make_results, make_run_dir, set_config
    from kit.report.export import export_run

    def bundle(name: str, cell: dict, **config) -> Path:
        results = make_results([cell], run_id=f"R-{name}")
        set_config(results, **config)
        run = make_run_dir(tmp_path / name, results)
        return export_run(run, tmp_path / f"out-{name}")

    a = bundle("a", make_cell(model="resnet18"), suite="cifar", models=["resnet18"], engines=["torch"], steps=100,
               command_line=["kit", "run", "--suite", "cifar", "--steps", "100"])
    b = bundle("b", make_cell(workload="lstm", model="tensor-core", engine="kit"), suite="lstm",
               presets=["tensor-core"], max_batches=300, repeats=5,
               command_line=["kit", "run", "--suite", "lstm", "--repeats", "5"])
    merged = open_bundle(merge_bundles([a, b], tmp_path / "m"))
    cfg = merged.results.config
    assert (cfg.suite, cfg.options_of("cifar").models, cfg.engines, cfg.options_of("lstm").presets) == (
        "all", ["resnet18"], ["torch"], ["tensor-core"])
    # a suite's options are those of the runs that measured it: the LSTM run's --max-batches
    assert cfg.steps is None and cfg.options_of("lstm").max_batches == 300 and cfg.command_line == []
    differs = merged.environment["merged_config_differs"]
    assert differs["steps"] == [100, None] and differs["repeats"] == [3, 5]
    assert "models" not in differs  # lists are unions, not differences
    report = merged.text("report.html")
    assert "repeats per cell vary" in report
    assert "--suite cifar --steps 100" in report and "--suite lstm --repeats 5" in report


def _env_with(path: Path) -> dict:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(path) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_compare_against_h200_works_from_any_folder(tmp_path):
    import shutil

    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    shutil.copy(USERS_H200, elsewhere / "mine.tar.gz")
    out = subprocess.run([sys.executable, "-m", "kit", "compare", "mine.tar.gz", "--against", "h200", "--json", "-"],
                         capture_output=True, text=True, cwd=elsewhere, env=_env_with(REPO))
    assert out.returncode == 0, out.stderr
    assert "cifar/resnet18/amp-bf16/torch" in out.stdout


def test_a_references_folder_in_the_current_folder_is_not_a_shipped_reference(tmp_path, monkeypatch):
    (tmp_path / "references" / "a100").mkdir(parents=True)
    (tmp_path / "references" / "a100" / "x.tar.gz").write_bytes(b"not a bundle")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="no reference called 'a100'; known: h100, h200$"):
        reference_bundles("a100")


def test_an_installed_wheel_ships_the_reference_and_compare_against_works_from_it(tmp_path):
    """Build the wheel from a copy of the source (as pip does from an sdist), install it into
    a folder of its own, and run `kit compare --against h200` from yet another folder."""
    import shutil
    import zipfile

    setuptools = pytest.importorskip("setuptools", reason="building a wheel offline needs setuptools in this environment")
    if int(setuptools.__version__.split(".")[0]) < 70:
        pytest.importorskip("wheel", reason="setuptools < 70 needs the wheel package to build a wheel")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "kit", src / "kit", ignore=shutil.ignore_patterns("__pycache__", "_references"))
    for bundle in (REPO / "references").glob("*/*.tar.gz"):
        (src / "references" / bundle.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(bundle, src / "references" / bundle.parent.name / bundle.name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    built = subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(tmp_path / "dist"), "."],
                           cwd=src, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = [n for n in names if n.endswith(".tar.gz")]
    assert shipped == [f"kit/_references/{name}/{reference_bundles(name)[0].name}" for name in ("h100", "h200")], shipped
    site = tmp_path / "site"
    inst = subprocess.run(pip + ["install", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
                          capture_output=True, text=True)
    assert inst.returncode == 0, inst.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(USERS_H200, elsewhere / "mine.tar.gz")
    which = subprocess.run([sys.executable, "-c", "import kit; print(kit.__file__)"], cwd=elsewhere,
                           capture_output=True, text=True, env=_env_with(site))
    assert which.stdout.strip().startswith(str(site)), which.stdout  # the installed copy, not the checkout
    out = subprocess.run([sys.executable, "-m", "kit", "compare", "mine.tar.gz", "--against", "h200", "--json", "-"],
                         capture_output=True, text=True, cwd=elsewhere, env=_env_with(site))
    assert out.returncode == 0, out.stderr
    assert "cifar/resnet18/amp-bf16/torch" in out.stdout


def test_a_journal_cannot_smuggle_cells_into_a_merged_bundle(tmp_path):
    """A source's journal with a cell_end event for a cell its results.json does not hold
    (hashes re-made, so the bundle verifies) adds nothing to the merge: only results merge."""
    import hashlib
    import io
    import json
    import tarfile

    from fixtures.results.factory import make_cell, make_results, make_run_dir
    from kit.report.export import export_run

    a = export_run(make_run_dir(tmp_path / "a", make_results([make_cell(precision="fp32")], run_id="R-a")), tmp_path / "oa")
    b = export_run(make_run_dir(tmp_path / "b", make_results([make_cell(precision="amp-fp16")], run_id="R-b")), tmp_path / "ob")
    with tarfile.open(b, "r:gz") as tf:
        files = {m.name.split("/", 1)[1]: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}
    forged = make_cell(model="resnet152", precision="amp-bf16")
    files["journal.jsonl"] += (json.dumps({"seq": 99, "time": 0, "event": "cell_end", "cell_id": forged["cell_id"],
                                           "result": forged}) + "\n").encode()
    manifest = json.loads(files["manifest.json"])
    manifest["files"] = {n: {"sha256": hashlib.sha256(d).hexdigest(), "size": len(d)} for n, d in files.items() if n != "manifest.json"}
    files["manifest.json"] = json.dumps(manifest).encode()
    forged_bundle = tmp_path / "b-forged.tar.gz"
    with tarfile.open(forged_bundle, "w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(f"b/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    merged = open_bundle(merge_bundles([a, forged_bundle], tmp_path / "m"))
    assert {c.cell_id for c in merged.results.cells} == {"cifar/resnet18/fp32/torch", "cifar/resnet18/amp-fp16/torch"}
    assert merged.results.status == "complete" and not merged.interrupted
    assert b"resnet152" in merged.files["journal.jsonl"]  # kept as the record it is


def test_a_non_numeric_peak_in_a_strangers_environment_does_not_break_merge(tmp_path):
    from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
    from kit.report.export import export_run

    env = make_env()
    env["peak_tflops_measured"] = {"available": True, "fp16": "oops", "bf16": [1]}
    env["host"] = "not-an-object"
    env["nvml"] = {"gpus": ["not-an-object"], "driver_version": "580"}
    cells = [make_cell(precision="fp32"), make_cell(precision="amp-fp16")]
    from kit.results.stats import summarise_repeats

    for c in cells:
        for rep in c["repeats"]:
            rep["achieved_tflops"] = 10.0
        c["summary"] = summarise_repeats(c["repeats"])
        assert c["summary"]["achieved_tflops"]["median"] == 10.0
    a = export_run(make_run_dir(tmp_path / "a", make_results(cells[:1], env, run_id="R-a")), tmp_path / "oa")
    b = export_run(make_run_dir(tmp_path / "b", make_results(cells[1:], env, run_id="R-b")), tmp_path / "ob")
    merged = open_bundle(merge_bundles([a, b], tmp_path / "m"))
    assert len(merged.results.cells) == 2
    assert merged.results.derived["efficiency"] == []  # no usable peak: no efficiency rows, no crash


def test_a_run_cut_short_and_finished_by_another_merges_complete_and_only_then(tmp_path):
    """A batch curve's last points measured in a run of their own: the cut run's plan is covered by
    the merged cells, so the merged bundle is complete (merged_from keeps each source's status); a
    merge that leaves one of its planned cells unmeasured stays interrupted."""
    from fixtures.results.factory import make_cell, make_results, make_run_dir, set_config
    from kit.report.export import export_run

    def bundle(cells, name: str, status: str) -> Path:
        results = make_results(cells, status=status, run_id=f"FIXTURE-20250101-120000-{name}")
        set_config(results, models=["resnet18"], engines=["torch"], precisions=["fp32", "amp-fp16"])
        return export_run(make_run_dir(tmp_path / name, results), tmp_path / f"out-{name}")

    cut = bundle([make_cell(precision="fp32")], "cut", "interrupted")
    rest = bundle([make_cell(precision="amp-fp16")], "rest", "complete")
    other = bundle([make_cell(precision="tf32")], "other", "complete")
    assert open_bundle(cut).interrupted
    from kit.runner.plan import planned_cell_ids

    merged = open_bundle(merge_bundles([cut, rest], tmp_path / "m1", planned=planned_cell_ids))
    assert merged.results.status == "complete" and not merged.interrupted
    assert [m["status"] for m in merged.environment["merged_from"]] == ["interrupted", "complete"]
    still_cut = open_bundle(merge_bundles([cut, other], tmp_path / "m2", planned=planned_cell_ids))
    assert still_cut.results.status == "interrupted" and still_cut.interrupted
    # without the runner's plan (the bundle layer's default) a part cut short leaves the merge interrupted
    assert open_bundle(merge_bundles([cut, rest], tmp_path / "m3")).interrupted
    # kit bundle merge plans with the runner
    out = subprocess.run([sys.executable, "-m", "kit", "bundle", "merge", str(cut), str(rest), "--out", str(tmp_path / "m4")],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert not open_bundle(next((tmp_path / "m4").glob("*.tar.gz"))).interrupted


def test_merging_a_merged_bundle_again_keeps_every_run_it_came_from(tmp_path):
    """The shipped reference is itself a merge: joined with more runs (the batch curve), its five
    runs stay in merged_from, each marked with the merged bundle it came through."""
    from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
    from kit.report.export import export_run

    def bundle(precision: str, name: str) -> Path:
        results = make_results([make_cell(precision=precision)], make_env(), run_id=f"FIXTURE-20250101-120000-{name}")
        return export_run(make_run_dir(tmp_path / name, results), tmp_path / f"out-{name}")

    first = merge_bundles([bundle("fp32", "a"), bundle("amp-fp16", "b")], tmp_path / "m1")
    again = open_bundle(merge_bundles([first, bundle("amp-bf16", "c")], tmp_path / "m2"))
    runs = again.environment["merged_from"]
    assert [r["run_id"][-1] for r in runs] == ["a", "b", "c"]
    assert [r.get("via") for r in runs] == [first.name, first.name, None]
    assert len(again.results.cells) == 3


def test_a_strangers_merged_from_comes_through_as_strings_only(tmp_path):
    """A bundle that says it is a merge carries merged_from entries of its own; merged again, only the
    strings (and lists of strings) of each entry, and of its calibration records the scalars, come
    through, and the report still renders."""
    from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
    from kit.report.export import export_run

    env = make_env()
    env["merged_from"] = [{"bundle": 7, "run_id": "r1", "command_line": 5, "gpu_uuids": ["GPU-x", {"a": 1}],
                           "earlier_sessions": "junk", "status": ["complete"], "extra": "<b>x</b>",
                           "cells": ["cifar/resnet18/fp32/torch", 3],
                           "peak_tflops_measured": {"fp32": "fast", "fp16": 700.0, "x": [1], "nan": float("nan"),
                                                    "typical": {"fp16": 1.0, "deep": {"y": 1, "deeper": {"z": 1}}},
                                                    "huge": 10 ** 400},
                           "memory_bandwidth_measured": "junk"}]
    odd = export_run(make_run_dir(tmp_path / "odd", make_results([make_cell(precision="fp32")], env,
                                                                    run_id="FIXTURE-20250101-120000-odd")), tmp_path / "o1")
    plain = export_run(make_run_dir(tmp_path / "p", make_results([make_cell(precision="amp-fp16")], make_env(),
                                                                 run_id="FIXTURE-20250101-120000-p")), tmp_path / "o2")
    merged = open_bundle(merge_bundles([odd, plain], tmp_path / "m"))
    first = merged.environment["merged_from"][0]
    assert first == {"bundle": None, "run_id": "r1", "status": None, "device": None, "host_id": None,
                     "manifest_sha256": None, "gpu_uuids": ["GPU-x"], "command_line": [], "earlier_sessions": [],
                     "via": odd.name, "cells": ["cifar/resnet18/fp32/torch"],
                     "peak_tflops_measured": {"fp32": "fast", "fp16": 700.0, "typical": {"fp16": 1.0, "deep": {"y": 1.0}}},
                     "memory_bandwidth_measured": None}
    assert "report.html" in merged.files


def test_a_resumed_runs_earlier_sessions_survive_a_second_merge(tmp_path):
    """merged_from keeps a resumed source's earlier sessions as summaries; merged again (via the first
    merge) they come through as they were, host and GPUs included."""
    from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
    from kit.report.export import export_run

    def bundle(precision: str, name: str, sessions=None) -> Path:
        env = make_env()
        if sessions:
            env["earlier_sessions"] = sessions
        results = make_results([make_cell(precision=precision)], env, run_id=f"FIXTURE-20250101-120000-{name}")
        return export_run(make_run_dir(tmp_path / name, results), tmp_path / f"out-{name}")

    session = {"collected_at": "2026-12-01T23:27:28Z", "host": {"host_id": "h-first"}, "kit": {"git_commit": "009a818"},
               "nvml": {"gpus": [{"uuid": "GPU-first"}]}, "cells": ["cifar/resnet18/fp32/torch"],
               "peak_tflops_measured": {"available": True, "fp32": 50.0}}  # fixture numbers
    first = merge_bundles([bundle("fp32", "a", [session]), bundle("amp-fp16", "b")], tmp_path / "m1")
    again = open_bundle(merge_bundles([first, bundle("amp-bf16", "c")], tmp_path / "m2"))
    assert again.environment["merged_from"][0]["earlier_sessions"] == [
        {"collected_at": "2026-12-01T23:27:28Z", "host_id": "h-first", "gpu_uuids": ["GPU-first"],
         "kit_commit": "009a818", "cells": ["cifar/resnet18/fp32/torch"],
         "peak_tflops_measured": {"available": True, "fp32": 50.0}, "memory_bandwidth_measured": None}]


def test_each_merged_cell_keeps_the_calibration_of_the_run_that_measured_it(tmp_path, capsys):
    """Two parts of one reference measured on two machines of one model, each with its own matmul
    peaks (fixture numbers): after the merge, and after merging the merge again, each cell's ladder
    and efficiency read its own part's peaks, and kit explain says the parts' peaks differ."""
    import json

    from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
    from kit.cli.main import main
    from kit.report.export import export_run
    from kit.results.ceilings import calibration_for
    from kit.results.stats import summarise_repeats

    def cell(model, precision, tflops):
        c = make_cell(model, precision)
        for r in c["repeats"]:
            r["achieved_tflops"] = tflops
        c["summary"] = summarise_repeats(c["repeats"])
        return c

    def part(name, uuid, peaks, model):
        env = make_env()
        env["host"] = {"host_id": f"h-{name}"}
        env["nvml"] = {"driver_version": "580.159", "gpus": [{"name": "NVIDIA H200", "uuid": uuid}]}
        env["peak_tflops_measured"] = {"available": True, **peaks}
        run = make_run_dir(tmp_path / name, make_results([cell(model, "fp32", 10.0), cell(model, "amp-fp16", 35.0)], env))
        return export_run(run, tmp_path / f"out-{name}")

    a = part("a", "GPU-a", {"fp32": 50.0, "fp16": 700.0}, "resnet18")
    b = part("b", "GPU-b", {"fp32": 55.0, "fp16": 880.0}, "resnet50")
    merged_path = merge_bundles([a, b], tmp_path / "m", same_model=True)
    merged = open_bundle(merged_path)
    env = merged.environment
    assert calibration_for(env, "cifar/resnet50/amp-fp16/torch")["peak_tflops_measured"]["fp16"] == 880.0
    assert calibration_for(env, "cifar/resnet18/amp-fp16/torch")["peak_tflops_measured"]["fp16"] == 700.0
    eff = {r["cell_id"]: r["peak_tflops"] for r in merged.results.derived["efficiency"]}
    assert eff["cifar/resnet50/amp-fp16/torch"] == 880.0 and eff["cifar/resnet18/amp-fp16/torch"] == 700.0

    assert main(["explain", str(merged_path), "--json", "-"]) in (0, None)
    rows = {r["cell_id"]: r for r in json.loads(capsys.readouterr().out)["cells"]}
    r50 = rows["cifar/resnet50/amp-fp16/torch"]
    assert r50["ladder"][0]["ratio"] == pytest.approx(16.0) and r50["efficiency"]["peak_tflops"] == 880.0
    assert r50["calibration_from"] == b.name and rows["cifar/resnet18/amp-fp16/torch"]["ladder"][0]["ratio"] == pytest.approx(14.0)
    assert main(["explain", str(merged_path)]) in (0, None)
    assert ("2 calibrations, one per session that measured cells (merged runs, resumed sessions): each cell's ceilings "
            "and efficiency are its own session's; their peaks differ by up to fp32 10.0%, fp16 25.7%") in capsys.readouterr().out

    # merged again with a third part: the first two keep their own calibration
    c = part("c", "GPU-c", {"fp32": 52.0, "fp16": 720.0}, "resnet34")
    again = open_bundle(merge_bundles([merged_path, c], tmp_path / "m2", same_model=True)).environment
    assert calibration_for(again, "cifar/resnet50/fp32/torch")["peak_tflops_measured"]["fp32"] == 55.0
    assert calibration_for(again, "cifar/resnet34/fp32/torch")["source"] == c.name


def test_a_strangers_merged_from_cannot_lend_a_cell_a_calibration_it_does_not_hold():
    from kit.results.ceilings import calibration_for

    own = {"available": True, "fp32": 50.0}
    for junk in ("x", [1, {"cells": "cifar/a"}, {"cells": ["cifar/a"], "peak_tflops_measured": "fast"}],
                 [{"cells": ["cifar/b"], "peak_tflops_measured": {"fp32": 99.0}}]):
        got = calibration_for({"peak_tflops_measured": own, "merged_from": junk}, "cifar/a")
        assert got["peak_tflops_measured"] is own and got["source"] is None
    assert calibration_for(None, "cifar/a") == {"peak_tflops_measured": None, "memory_bandwidth_measured": None,
                                                "source": None}


def test_a_resumed_runs_cells_keep_the_calibration_of_the_session_that_measured_them():
    """A run resumed on another machine calibrates again; the cells its first session measured keep
    that session's peaks (fixture numbers), in the run itself and once merged."""
    from kit.env.record import session_summary
    from kit.results.ceilings import calibration_for

    first = {"collected_at": "2026-12-05T04:00:00Z", "cells": ["cifar/resnet18/fp32/torch"],
             "peak_tflops_measured": {"available": True, "fp32": 50.0}}
    env = {"peak_tflops_measured": {"available": True, "fp32": 55.0}, "earlier_sessions": [first]}
    got = calibration_for(env, "cifar/resnet18/fp32/torch")
    assert got["peak_tflops_measured"]["fp32"] == 50.0 and got["source"] == "this run, its session of 2026-12-05T04:00:00Z"
    assert calibration_for(env, "cifar/resnet34/fp32/torch") == {**{k: env.get(k) for k in ("peak_tflops_measured",
                                                                                          "memory_bandwidth_measured")},
                                                                 "source": None}
    merged = {"peak_tflops_measured": {"available": True, "fp32": 60.0},
              "merged_from": [{"bundle": "part.tar.gz", "cells": ["cifar/resnet18/fp32/torch", "cifar/resnet34/fp32/torch"],
                               "peak_tflops_measured": env["peak_tflops_measured"],
                               "earlier_sessions": [session_summary(first)]}]}
    assert calibration_for(merged, "cifar/resnet18/fp32/torch")["peak_tflops_measured"]["fp32"] == 50.0
    assert calibration_for(merged, "cifar/resnet34/fp32/torch")["peak_tflops_measured"]["fp32"] == 55.0
    assert calibration_for(merged, "cifar/resnet50/fp32/torch")["peak_tflops_measured"]["fp32"] == 60.0  # in no source
