"""Merging one machine's bundles, and comparing against the shipped H200 reference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kit.bundle.merge import merge_bundles, reference_bundles
from kit.bundle.safe_open import open_bundle
from kit.errors import BundleError

REPO = Path(__file__).resolve().parents[1]


def test_the_h200_reference_ships_and_verifies():
    [ref] = reference_bundles("h200")
    b = open_bundle(ref)
    assert b.results.status == "complete"
    assert any(c.cell_id == "cifar/resnet50/amp-fp16/torch" for c in b.results.cells)
    assert b.environment["merged_from"], "the reference says which runs it was merged from"


def test_an_unknown_reference_names_the_known_ones():
    with pytest.raises(BundleError, match="h200"):
        reference_bundles("no-such-machine")


def test_merging_a_bundle_with_itself_is_refused_because_cells_repeat(tmp_path):
    [ref] = reference_bundles("h200")
    with pytest.raises(BundleError, match="in both"):
        merge_bundles([ref, ref], tmp_path)


def test_compare_against_the_reference_from_the_command_line(tmp_path):
    import shutil

    [ref] = reference_bundles("h200")
    mine = tmp_path / "mine.tar.gz"  # a copy stands in for a user's bundle from an identical machine
    shutil.copy(ref, mine)
    out = subprocess.run([sys.executable, "-m", "kit", "compare", str(mine), "--against", "h200", "--json"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "cifar/resnet18/amp-bf16/torch" in out.stdout
