"""`kit index history` follows a machine: a series is keyed by the host id each bundle records (its host
name shown beside it), and a change of GPU (model, or the GPUs themselves) breaks it as a change of
method does. SYNTHETIC bundles (invented numbers, made by the kit's own bundle writer)."""

from __future__ import annotations

import json

import pytest

from fixtures.cli import run_main
from fixtures.results.factory import make_env, make_results, make_run_dir, standard_cells
from kit.bundle.export import export_run
from kit.index.db import open_index
from kit.index.ingest import add_bundles

DAY = 86400.0
START = 1793491200.0  # 2026-11-01 00:00 UTC


def _no_report(folder, name):
    return {}


def _bundle(root, run: int, host_id: str, gpu: str, uuid: str, speed: float = 1.0):
    """Run ``run`` of a machine named ``vm`` (as clouds name every machine) with ``host_id`` and one
    GPU of model ``gpu`` whose UUID is ``uuid``."""
    env = make_env(host="vm", gpu=gpu)
    env["host"] = {"name": "vm", "host_id": host_id, "anonymized": False}
    env["nvml"] = {"available": True, "driver_version": "580.159", "gpus": [{"name": gpu, "uuid": uuid}]}
    res = make_results(standard_cells(speed=speed, models=("resnet18",)), env, run_id=f"FIXTURE-VM-{run}",
                       started_at=START + run * DAY)
    return export_run(make_run_dir(root / "runs" / str(run), res), root / "bundles", _no_report)


@pytest.fixture(scope="module")
def vms(tmp_path_factory):
    """Two machines both named vm. h-1111: two runs on an H200 (GPU-a), then one on an H100 (GPU-b)
    0.92x as fast, then one on another H100 (GPU-c); h-2222: two runs on an H200, the second 20% slower."""
    root = tmp_path_factory.mktemp("vms")
    bundles = [_bundle(root, 0, "h-1111", "NVIDIA H200", "GPU-a"), _bundle(root, 1, "h-2222", "NVIDIA H200", "GPU-z"),
               _bundle(root, 2, "h-1111", "NVIDIA H200", "GPU-a"), _bundle(root, 3, "h-2222", "NVIDIA H200", "GPU-z", 0.8),
               _bundle(root, 4, "h-1111", "NVIDIA H100", "GPU-b", 0.92), _bundle(root, 5, "h-1111", "NVIDIA H100", "GPU-c")]
    index = root / "index.sqlite"
    con = open_index(index, create=True)
    assert {o.outcome for o in add_bundles(con, bundles)} == {"added"}
    con.close()
    return str(index)


def _history(index, host, capsys, monkeypatch, *more):
    return run_main(["index", "history", "--index", index, "--host", host, *more], capsys, monkeypatch)


def test_a_host_name_of_several_machines_asks_which_and_a_host_id_picks_one(vms, capsys, monkeypatch):
    code, out, err = _history(vms, "vm", capsys, monkeypatch)
    assert code == 2 and "Traceback" not in err
    flat = " ".join(err.split())
    assert "2 machines are named vm" in flat and "h-1111 (4 runs)" in flat and "h-2222 (2 runs)" in flat
    assert "--host h-1111" in flat
    code, out, err = _history(vms, "h-2222", capsys, monkeypatch, "--json", "-")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["host"], doc["host_id"]) == ("vm", "h-2222")
    assert [r["run_id"] for r in doc["runs"]] == ["FIXTURE-VM-1", "FIXTURE-VM-3"]
    # its own slowdown is a change of this machine: flagged
    assert all(c["points"][1]["flagged"] for c in doc["cells"])


def test_a_gpu_change_breaks_the_series_as_a_method_change_does(vms, capsys, monkeypatch):
    code, out, err = _history(vms, "h-1111", capsys, monkeypatch, "--json", "-")
    assert code == 0, err
    doc = json.loads(out)
    assert [r["run_id"] for r in doc["runs"]] == ["FIXTURE-VM-0", "FIXTURE-VM-2", "FIXTURE-VM-4", "FIXTURE-VM-5"]
    for cell in doc["cells"]:
        same, model, other = cell["points"][1:]
        assert same["vs_previous"] is not None and same["gpu_break"] is None
        assert model["vs_previous"] is None and not model["flagged"]
        assert model["gpu_break"] == "GPU changed: NVIDIA H200 -> NVIDIA H100: no ratio"
        assert other["vs_previous"] is None and not other["flagged"]
        assert other["gpu_break"] == "other GPUs (GPU-b -> GPU-c): no ratio"
    runs = doc["summary"]["runs"]
    assert [sum(p["gpu_breaks"] for p in r["vs_previous"].values()) for r in runs] == [0, 0, 3, 3]
    assert all(p["flagged"] == 0 for r in runs for p in r["vs_previous"].values())
    code, out, err = _history(vms, "h-1111", capsys, monkeypatch, "--cells", "fp32")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "vm (host id h-1111): 4 runs" in flat
    assert "GPU changed: NVIDIA H200 -> NVIDIA H100: no ratio" in flat and "No significant change" in flat
