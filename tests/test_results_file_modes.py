"""Every file a run writes gets one mode: 0666 minus the user's umask.

results.json, env.json and the bundle are written atomically (through mkstemp,
which makes 0600 files); the journal and run.log are opened normally. Both
kinds must end up with the same mode, the one the umask gives new files.
The benchmark module is replaced by a small fake (fixture numbers).
"""

from __future__ import annotations

import os
import stat
import sys
import types

import pytest

from kit.results.schema import CellResult, RunConfig
from kit.runner.execute import execute


class FakeBench(types.ModuleType):
    def __init__(self):
        super().__init__("kit.bench.api")

    def resolve_device(self, requested):
        return "cpu"

    def calibrate(self, device):
        return {"available": False, "reason": "fake bench"}

    def memory_bandwidth(self, device):
        return {"available": False, "reason": "fake bench"}

    def run_cell(self, spec, ctx):
        repeats = [{"epoch_seconds": [1.0], "epoch_seconds_median": 1.0, "throughput_items_per_s": 100.0 + r}
                   for r in range(ctx.repeats)]
        return CellResult(spec.workload, spec.model, spec.precision, spec.engine, "ok",
                          params=spec.params, repeats=repeats, throughput_unit="images")


@pytest.fixture
def fake_bench(monkeypatch):
    fb = FakeBench()
    monkeypatch.setitem(sys.modules, "kit.bench.api", fb)
    import kit.bench

    monkeypatch.setattr(kit.bench, "api", fb, raising=False)
    return fb


@pytest.fixture(params=[0o022, 0o077, 0o002])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_every_file_a_run_writes_has_the_umask_mode(tmp_path, fake_bench, umask):
    config = RunConfig.of(suite="cifar", data="synthetic", device="cpu", models=["resnet18"],
                       precisions=["fp32", "amp-bf16"], engines=["torch"], repeats=2, steps=2)
    out = execute(config, tmp_path / "results", make_bundle=True)
    expected = 0o666 & ~umask
    written = {p.name: _mode(p) for p in out.run_dir.iterdir() if p.is_file()}
    for name in ("results.json", "env.json", "journal.jsonl"):
        assert name in written, sorted(written)
    assert out.bundle is not None, out.bundle_error
    written[out.bundle.name] = _mode(out.bundle)
    assert written == {name: expected for name in written}, {k: oct(v) for k, v in written.items()}


def test_the_compare_html_page_has_the_umask_mode(tmp_path, fake_bench, umask):
    from typer.testing import CliRunner

    from kit.cli.main import app

    config = RunConfig.of(suite="cifar", data="synthetic", device="cpu", models=["resnet18"],
                       precisions=["fp32"], engines=["torch"], repeats=1, steps=2)
    runs = [execute(config, tmp_path / name, make_bundle=False).run_dir for name in ("a", "b")]
    html = tmp_path / "compare.html"
    res = CliRunner().invoke(app, ["compare", str(runs[0]), str(runs[1]), "--html", str(html)])
    assert res.exit_code == 0, res.output
    assert _mode(html) == 0o666 & ~umask


def test_an_atomic_write_over_an_existing_file_takes_the_umask_mode(tmp_path, umask):
    from kit.results.atomic import atomic_write_text

    target = tmp_path / "x.json"
    target.write_text("old")
    os.chmod(target, 0o600)
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert _mode(target) == 0o666 & ~umask
