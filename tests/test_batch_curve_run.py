"""`kit run --batch-sizes` running: bad lists stop in a real `python -m kit` process (exit 2, one
line, nothing written); a curve runs end to end (the fake bench of tests/fixtures/fake_bench.py);
a point that runs out of memory is recorded as such and the curve goes on; and the torch engine
measures a curve's point on the CPU (tiny batches, 2 steps)."""

from __future__ import annotations

import json
import sys

import pytest

from kit.results.cell_ids import CURVE_PARAM
from kit.results.schema import CellSpec, RunConfig, load_results
from test_exit_codes_run import SMALL, _env, kit


@pytest.mark.parametrize("value, words", [
    ("256,0", "0 is not a batch size"),
    ("-4", "-4 is not a batch size"),
    ("256,512,256", "--batch-sizes names 256 more than once"),
    ("256,many", "'many' is not a whole number"),
    ("", "--batch-sizes is empty"),
])
def test_a_bad_batch_list_exits_2_with_one_line_and_writes_nothing(tmp_path, value, words):
    env = _env(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    out = kit(tmp_path, "run", "--data", "synthetic", "--device", "cpu", f"--batch-sizes={value}", "--skip-checks", env=env)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and words in errors[0], out.stderr
    assert out.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no results or data folder


def test_a_curve_runs_each_cell_at_each_size_and_the_bundle_shows_it(tmp_path):
    env = _env(tmp_path)
    args = [a for a in SMALL if a not in ("resnet18,resnet34",)]
    args[args.index("-m") + 1:args.index("-m") + 1] = ["resnet18"]
    out = kit(tmp_path, "run", *args, "-p", "amp-bf16", "--batch-sizes", "8,4", env=env)
    assert out.returncode == 0, out.stderr
    assert "batch curve: each cifar cell at batch sizes 4, 8" in " ".join(out.stderr.split())
    run_dir = next(p for p in (tmp_path / "results").iterdir() if p.is_dir())
    res = load_results(run_dir / "results.json")
    assert [c.cell_id for c in res.cells] == ["cifar/resnet18/fp32/torch/bs4", "cifar/resnet18/fp32/torch/bs8",
                                              "cifar/resnet18/amp-bf16/torch/bs4", "cifar/resnet18/amp-bf16/torch/bs8"]
    assert res.config.options_of("cifar").batch_sizes == [8, 4]  # as given; the cells run smallest first
    curves = json.loads((run_dir / "results.json").read_text())["derived"]["batch_curves"]
    assert {c["precision"] for c in curves} == {"fp32", "amp-bf16"}
    show = kit(tmp_path, "bundle", "show", out.stdout.strip(), env=env)
    assert show.returncode == 0, show.stderr
    assert "Batch curve" in show.stdout and "cifar/resnet18/amp-bf16/torch" in show.stdout
    assert "1.00×" in show.stdout  # the fake bench's 100 images/s everywhere


# --- out of memory at a point, and the torch engine on the CPU ---------------------------------


torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from kit.bench.cifar import suite, torch_engine  # noqa: E402
from test_cifar_suite import TinyArrays, _ctx, _spec  # noqa: E402


def _curve_spec(precision: str, batch: int, sizes=(2, 4)) -> CellSpec:
    return _spec(precision, "torch", batch_size=batch, **{CURVE_PARAM: list(sizes)})


@pytest.fixture
def tiny(monkeypatch):
    arrays = TinyArrays()
    monkeypatch.setattr(suite, "load_data", lambda ctx: arrays)
    return arrays


def test_the_torch_engine_measures_a_curve_point_on_the_cpu(tiny):
    result = suite.run_cell(_curve_spec("fp32", 2), _ctx([]))
    assert result.status == "ok", result.reason
    assert result.cell_id == "cifar/resnet18/fp32/torch/bs2"
    assert result.params["batch_size"] == 2 and result.params[CURVE_PARAM] == [2, 4]
    assert result.repeats[0]["throughput_items_per_s"] > 0
    assert result.metrics["flops_per_step"] == result.metrics["flops_per_image"] * 2


def _oom_at(batch: int, real):
    def run_repeats(cfg, data, ctx, repeats, progress=None, metrics=None, profile=None):
        if cfg.batch_size == batch:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate (batch {batch}, simulated)")
        return real(cfg, data, ctx, repeats, progress, metrics, profile=profile)

    return run_repeats


def test_a_point_that_runs_out_of_memory_is_recorded_so(tiny, monkeypatch):
    monkeypatch.setattr(torch_engine, "run_repeats", _oom_at(4, torch_engine.run_repeats))
    result = suite.run_cell(_curve_spec("fp32", 4), _ctx([]))
    assert result.status == "skipped" and result.reason == "out of memory at batch 4"
    assert result.metrics == {"out_of_memory": True} and result.cell_id.endswith("/bs4")


def test_out_of_memory_outside_a_curve_is_still_a_failure(tiny, monkeypatch):
    monkeypatch.setattr(torch_engine, "run_repeats", _oom_at(4, torch_engine.run_repeats))
    with pytest.raises(torch.cuda.OutOfMemoryError):
        suite.run_cell(_spec("fp32", "torch", batch_size=4), _ctx([]))


def test_after_a_point_runs_out_of_memory_the_curve_goes_on(tmp_path, tiny, monkeypatch):
    """Through the runner: 2 fits, 4 does not, 8 is measured after it; the run ends complete."""
    import types

    import kit.bench
    from kit.results.curve import curves
    from kit.runner.execute import execute

    def fixture_repeats(cfg, data, ctx, repeats, progress=None, metrics=None, profile=None):
        if cfg.batch_size == 4:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        # fixture numbers, not a measurement: the runner's bookkeeping is under test here
        return [{"epoch_seconds": [1.0], "epoch_seconds_median": 1.0, "throughput_items_per_s": 10.0 * cfg.batch_size,
                 "seed": cfg.seed + r} for r in range(repeats)], []

    monkeypatch.setattr(torch_engine, "run_repeats", fixture_repeats)
    bench = types.ModuleType("kit.bench.api")
    bench.resolve_device = lambda requested: "cpu"
    bench.calibrate = lambda device: {"available": False, "reason": "test"}
    bench.memory_bandwidth = lambda device: {"available": False, "reason": "test"}
    bench.run_cell = suite.run_cell
    bench.skipped_cell = suite.skipped_cell
    monkeypatch.setitem(sys.modules, "kit.bench.api", bench)
    monkeypatch.setattr(kit.bench, "api", bench, raising=False)
    config = RunConfig.of(suite="cifar", data="synthetic", device="cpu", models=["resnet18"], precisions=["fp32"],
                       engines=["torch"], repeats=1, steps=2, batch_sizes=[2, 4, 8], isolate="none")
    out = execute(config, tmp_path, make_bundle=False)
    assert out.results.status == "complete"
    assert [(c.cell_id, c.status, c.reason) for c in out.results.cells] == [
        ("cifar/resnet18/fp32/torch/bs2", "ok", None),
        ("cifar/resnet18/fp32/torch/bs4", "skipped", "out of memory at batch 4"),
        ("cifar/resnet18/fp32/torch/bs8", "ok", None),
    ]
    (curve,) = curves(out.results.cells)
    assert [p.throughput for p in curve.points] == [20.0, None, 80.0]
