"""Energy per epoch is one number per cell: the figure the run computed when it measured the cell
(kit.env.telemetry_summary.attach_energy), read by every view through kit.compare.measures.energy_per_epoch
(the comparison, the fleet's rows and the report). Before, every view read the cell's whole energy over
its repeats, warm-up, compilation and batch search included, because the repeats' per-epoch figures are
lists: the shipped H100 reference's ResNet-50 fp32 cell read 15,884 J an epoch against its measured 496."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.bundle.merge import reference_bundles
from kit.bundle.safe_open import open_bundle
from kit.compare.measures import energy_per_epoch
from kit.results.schema import CellResult

from fixtures.results.factory import make_cell

REPO = Path(__file__).resolve().parents[1]


def _reference_cells() -> list[CellResult]:
    (bundle,) = reference_bundles("h100")
    return [c for c in open_bundle(bundle).results.cells if c.status == "ok"]


def test_each_cell_of_the_shipped_reference_reads_the_energy_its_run_measured():
    cells = _reference_cells()
    assert len(cells) == 70
    for cell in cells:
        assert energy_per_epoch(cell) == cell.telemetry["energy_j_per_epoch"], cell.cell_id
    r50 = next(c for c in cells if c.cell_id == "cifar/resnet50/fp32/torch")
    whole_cell = r50.telemetry["energy_j"] / len(r50.repeats)  # what the views read before
    assert whole_cell > 20 * energy_per_epoch(r50)  # its batch search and compilation, not an epoch


def test_kit_compare_prints_the_measured_energy(capsys, monkeypatch):
    from fixtures.cli import run_main

    part = next((REPO / "references" / "h100" / "parts" / "torch-b").glob("*.tar.gz"))  # its ResNet-50 cells
    code, out, err = run_main(["compare", str(part), "--against", "h100", "--json", "-"], capsys, monkeypatch)
    assert code == 0, err
    rows = {r["cell_id"]: r for r in json.loads(out)["rows"]}
    r50 = next(c for c in _reference_cells() if c.cell_id == "cifar/resnet50/fp32/torch")
    for label in ("A", "B"):
        assert rows["cifar/resnet50/fp32/torch"]["machines"][label]["energy_j_per_epoch"] == \
            r50.telemetry["energy_j_per_epoch"]


def _cell(repeat_energy, telemetry):
    d = make_cell("resnet18", "fp32", epoch_s=[10.0, 10.0, 10.0])
    for rep, e in zip(d["repeats"], repeat_energy):
        rep["energy_j_per_epoch"] = e
    d["telemetry"] = {"available": True, **telemetry}
    return CellResult.from_dict(d)


@pytest.mark.parametrize("repeat_energy, telemetry, expected", [
    ([[100.0, 110.0], [120.0], [130.0]], {"energy_j_per_epoch": 111.0, "energy_j": 9000.0}, 111.0),
    ([[100.0, 110.0], [120.0], [130.0]], {"energy_j": 9000.0}, 115.0),   # the repeats' lists, flattened
    ([100.0, 120.0, 140.0], {"energy_j": 9000.0}, 120.0),                # a number a repeat
    ([None, None, None], {"energy_j": 9000.0}, None),                     # no per-epoch figure: none, not 3,000
    ([[-100.0], [0.0], [float("nan")]], {"energy_j_per_epoch": -5.0}, None),  # none a GPU could measure
    ([[-100.0], [120.0], [float("inf")]], {"energy_j_per_epoch": True}, 120.0),
], ids=["the-run's-figure", "lists", "numbers", "whole-cell-only", "not-energies", "some-energies"])
def test_energy_per_epoch_is_the_measured_figure_or_none(repeat_energy, telemetry, expected):
    assert energy_per_epoch(_cell(repeat_energy, telemetry)) == expected
