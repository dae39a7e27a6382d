"""SYNTHETIC bundles for the results index's tests (every number invented; host names start with
``fixture-``), made by the kit's own bundle writer from the fixture factory's results, and the
check that they pass `kit bundle verify`'s checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fixtures.results.factory import make_env, make_results, make_run_dir, standard_cells
from kit.bundle import export as bundle_export
from kit.bundle.safe_open import open_bundle

ROOT = Path(__file__).resolve().parents[1]
DAY = 86400.0
START = 1793491200.0  # 2026-11-01 00:00 UTC


def _no_report(folder, name):
    return {}  # charts and report.html are optional in a bundle; rendering them is the slow part


def make_bundle(root: Path, host: str, run: int, speed: float = 1.0, started_at: float | None = None,
                models=("resnet18",), driver: str | None = None, **env) -> Path:
    """A bundle of ``host``'s run number ``run`` (3 cells per model, 3 repeats each, throughput x ``speed``);
    ``env``: make_env's gpu, torch, stack...; ``driver`` replaces the fixture's driver."""
    started = START + run * DAY if started_at is None else started_at
    environment = make_env(host=host, **env)
    if driver is not None:
        environment["driver"] = driver
    res = make_results(standard_cells(speed=speed, models=models), environment,
                       run_id=f"FIXTURE-{host}-{run}", started_at=started)
    run_dir = make_run_dir(root / "runs" / host, res)
    return bundle_export.export_run(run_dir, root / "bundles", _no_report)


def fleet(root: Path, n: int, **kw) -> list[Path]:
    """``n`` bundles of ``n`` hosts, one run each, on consecutive days."""
    return [make_bundle(root, f"fixture-node{i:03d}", i, speed=1.0 + (i % 5) / 10, **kw) for i in range(n)]


def kit_cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """The kit's CLI in a process of its own (for the tests that run writers side by side or kill one)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "kit", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_synthetic_bundles_pass_the_bundle_verifier(tmp_path):
    b = make_bundle(tmp_path, "fixture-node000", 0, speed=1.2)
    bundle = open_bundle(b)
    assert bundle.environment["_fixture"] is True and bundle.environment["hostname"] == "fixture-node000"
    assert len(bundle.results.cells) == 3 and bundle.results.started_at == START
    assert json.loads(bundle.files["manifest.json"])["run_id"] == "FIXTURE-fixture-node000-0"
