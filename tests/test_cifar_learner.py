"""The fastai engines' learner (`kit run --learner create_cnn|scratch`).

``create_cnn`` is fastai's own create_cnn learner (fastai 2: ``vision_learner``; v1:
``cnn_learner``/``create_cnn``) with random weights, frozen as create_cnn leaves it: the body's
weights get no gradient, its BatchNorm layers and fastai's head train. ``scratch`` is the plain
``Learner`` on the whole torchvision ResNet. The learner is the fastai engines' default, every
fastai cell names it, and the reports and ``kit compare`` label fastai cells with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
from kit.results.schema import CellResult, CellSpec, RunConfig

REPO = Path(__file__).resolve().parents[1]


def tiny_arrays(n_train: int = 16, n_test: int = 8, seed: int = 0) -> SimpleNamespace:
    """A made-up, CIFAR-shaped fixture (random pixels): not CIFAR, only the layout."""
    rng = np.random.default_rng(seed)
    return SimpleNamespace(
        train_x=rng.integers(0, 256, (n_train, 32, 32, 3), dtype=np.uint8), train_y=rng.integers(0, 100, n_train).astype(np.int64),
        test_x=rng.integers(0, 256, (n_test, 32, 32, 3), dtype=np.uint8), test_y=rng.integers(0, 100, n_test).astype(np.int64),
        info={"source": "test fixture (random pixels)"})


def _fastai(major: str):
    """fastai of that major version, or skip (v1 exists only inside the cuda10 image)."""
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    from kit.bench.cifar.fastai_engine import fastai_imports

    with fastai_imports():
        fastai = pytest.importorskip("fastai")
        if not str(getattr(fastai, "__version__", "")).startswith(major + "."):
            pytest.skip(f"needs fastai {major}.x (found {fastai.__version__})")
        import fastai.callback  # noqa: F401 - imported here, where torch's jit.script warning is hidden
        if major == "2":
            import fastai.callback.core  # noqa: F401
    return fastai


def _parts(model):
    """The create_cnn model's parameters by role: body convolutions, body BatchNorm, head."""
    from torch import nn

    body, head = model[0], model[1]
    conv = {f"0.{n}.{p}": w for n, m in body.named_modules() if isinstance(m, nn.Conv2d) for p, w in m.named_parameters()}
    bn = {f"0.{n}.{p}": w for n, m in body.named_modules() if isinstance(m, nn.BatchNorm2d) for p, w in m.named_parameters()}
    head_params = {f"1.{n}": w for n, w in head.named_parameters()}
    return conv, bn, head_params


def _check_one_step(model, got_grad: set[str], before: dict) -> None:
    """After one training step of the frozen create_cnn learner: which parameters received a
    gradient and which changed."""
    import torch

    conv, bn, head = _parts(model)
    names = dict(model.named_parameters())
    assert set(conv) | set(bn) | set(head) == set(names)  # every parameter is one of the three
    assert len(conv) == 20 and len(bn) == 40  # resnet18: 20 convolutions, 20 BatchNorm layers
    changed = {n for n, p in names.items() if not torch.equal(before[n], p.detach())}
    assert not set(conv) & got_grad, "a frozen body convolution received a gradient"
    assert all(p.grad is None and not p.requires_grad for p in conv.values())
    assert not set(conv) & changed, "a frozen body convolution changed"
    assert set(bn) <= got_grad and set(bn) <= changed, "the body's BatchNorm layers train (train_bn=True)"
    assert set(head) <= got_grad and set(head) <= changed, "the head trains"


# --------------------------------------------------------------------------- fastai 2
def test_create_cnn_learner_trains_only_the_head_and_the_body_batchnorm_while_frozen():
    _fastai("2")
    import torch
    from fastai.callback.core import Callback
    from torch import nn

    from kit.bench.cifar.fastai_engine import build_learner
    from kit.bench.cifar.train_config import TrainConfig

    cfg = TrainConfig("resnet18", "fp32", "cpu", batch_size=8, steps=1)
    assert cfg.learner == "create_cnn"  # the default
    learn = build_learner(cfg, tiny_arrays(), num_workers=0)
    head = learn.model[1]
    assert type(head[0]).__name__ == "AdaptiveConcatPool2d"  # fastai's head, built by fastai
    assert isinstance(head[-1], nn.Linear) and (head[-1].in_features, head[-1].out_features) == (512, 100)
    assert not any(isinstance(m, (nn.AdaptiveAvgPool2d, nn.Linear)) for m in learn.model[0].modules())  # cut before pool/fc

    class GradsAfterBackward(Callback):
        def after_backward(self):
            if self.training:
                self.got = {n for n, p in self.learn.model.named_parameters() if p.grad is not None}

    rec = GradsAfterBackward()
    before = {n: p.detach().clone() for n, p in learn.model.named_parameters()}
    learn.fit_one_cycle(1, cbs=[rec])
    _check_one_step(learn.model, rec.got, before)
    assert torch.isfinite(learn.recorder.losses[-1])


def test_scratch_learner_gives_every_parameter_a_gradient():
    _fastai("2")
    from fastai.callback.core import Callback

    from kit.bench.cifar.fastai_engine import build_learner
    from kit.bench.cifar.train_config import TrainConfig

    learn = build_learner(TrainConfig("resnet18", "fp32", "cpu", batch_size=8, steps=1, learner="scratch"),
                          tiny_arrays(), num_workers=0)
    assert type(learn.model).__name__ == "ResNet"  # the torchvision model itself

    class GradsAfterBackward(Callback):
        def after_backward(self):
            if self.training:
                self.got = {n for n, p in self.learn.model.named_parameters() if p.grad is not None}

    rec = GradsAfterBackward()
    learn.fit_one_cycle(1, cbs=[rec])
    assert rec.got == {n for n, _ in learn.model.named_parameters()}


def test_frozen_create_cnn_counts_fewer_flops_than_the_plain_resnet():
    """The FLOP count is of the model as it trains: the frozen body's convolutions compute no
    weight gradients (their input gradients still flow to the BatchNorm layers below)."""
    _fastai("2")
    from kit.bench import flops
    from kit.bench.cifar.fastai_engine import create_cnn_flops_per_image
    from kit.bench.cifar.train_config import TrainConfig

    frozen = create_cnn_flops_per_image(TrainConfig("resnet18", "fp32", "cpu"))
    plain = flops.resnet_train_flops_per_image("resnet18", 32, 100)
    assert 0.5 * plain < frozen < 0.8 * plain


# --------------------------------------------------------------------------- fastai v1
def test_fastai_v1_create_cnn_learner_trains_only_the_head_and_the_body_batchnorm_while_frozen():
    """The same on the 2019 stack (fastai 1.0.x: only inside the cuda10 image, else skipped)."""
    _fastai("1")
    from fastai.callback import Callback

    from kit.bench.cifar import fastai_v1_engine
    from kit.bench.cifar.train_config import TrainConfig

    cfg = TrainConfig("resnet18", "fp32", "cpu", batch_size=8, steps=1)
    learn = fastai_v1_engine.build_learner(cfg, tiny_arrays(), 0)
    assert type(learn.model[1][0]).__name__ == "AdaptiveConcatPool2d"
    assert learn.model[1][-1].out_features == 100

    class GradsAfterBackward(Callback):
        def on_backward_end(self, train=True, **kwargs):
            if train:
                self.got = {n for n, p in learn.model.named_parameters() if p.grad is not None}

    rec = GradsAfterBackward()
    before = {n: p.detach().clone() for n, p in learn.model.named_parameters()}
    learn.fit_one_cycle(1, callbacks=[rec])
    _check_one_step(learn.model, rec.got, before)

    scratch = fastai_v1_engine.build_learner(TrainConfig("resnet18", "fp32", "cpu", batch_size=8, steps=1,
                                                         learner="scratch"), tiny_arrays(), 0)
    assert type(scratch.model).__name__ == "ResNet" and all(p.requires_grad for p in scratch.model.parameters())


# --------------------------------------------------------------------------- a whole cell
def test_a_fastai_cell_names_its_learner_and_says_its_weights_are_random(monkeypatch):
    _fastai("2")
    from kit.bench.cifar import suite
    from kit.bench.context import CellContext

    monkeypatch.setattr(suite, "load_data", lambda ctx: tiny_arrays())
    ctx = CellContext(device="cpu", data_dir=Path("unused"), data_source="synthetic", repeats=1, mode="throughput")
    params = {"batch_size": 4, "image_size": 32, "epochs": 1, "steps": 1, "compile": "off", "find_max_batch": False}
    result = suite.run_cell(CellSpec("cifar", "resnet18", "fp32", "fastai", dict(params)), ctx)  # no learner given
    assert result.status == "ok", result.reason
    assert result.params["learner"] == "create_cnn" and result.label == "cifar/resnet18/fp32/fastai (create_cnn)"
    assert result.metrics["engine_settings"]["learner"] == "create_cnn"
    assert any(n.startswith("weights: random initialisation, no pretrained weights") and "not the time per step" in n
               for n in result.notes)
    assert any(n.startswith("learner: create_cnn = ") and "vision_learner" in n and "freeze()" in n for n in result.notes)
    rep = result.repeats[0]
    assert 0 < rep["trainable_parameters"] < rep["parameters"]  # the frozen body
    assert "create_cnn" in result.metrics["flops_method"]
    assert CellResult.from_dict(result.to_dict()).params["learner"] == "create_cnn"

    torch_cell = suite.run_cell(CellSpec("cifar", "resnet18", "fp32", "torch", dict(params)), ctx)
    assert "learner" not in torch_cell.params and torch_cell.label == torch_cell.cell_id
    assert any(n.startswith("weights: random initialisation") for n in torch_cell.notes)


# --------------------------------------------------------------------------- the option
def test_fastai_cells_default_to_create_cnn_and_torch_cells_have_no_learner():
    from kit.runner.plan import build_plan

    plan = build_plan(RunConfig.of(suite="cifar", models=["resnet18"], precisions=["fp32"]))
    by_engine = {c.engine: c.params for c in plan.cells}
    assert by_engine["fastai"]["learner"] == "create_cnn"
    assert "learner" not in by_engine["torch"]  # the torch engine ignores the option
    scratch = build_plan(RunConfig.of(suite="cifar", models=["resnet18"], precisions=["fp32"], engines=["fastai"],
                                   learner="scratch"))
    assert scratch.cells[0].params["learner"] == "scratch"
    assert scratch.cells[0].cell_id == "cifar/resnet18/fp32/fastai"  # the id does not change


def test_a_run_recorded_before_the_option_existed_reads_as_the_plain_learner():
    old = RunConfig.of(suite="cifar").to_dict()
    del old["suite_options"]  # a config as kits before suites owned their options wrote it, before --learner
    assert RunConfig.from_dict(old).options_of("cifar").learner == "scratch"  # what its fastai cells trained
    assert RunConfig.from_dict(RunConfig.of(suite="cifar").to_dict()).options_of("cifar").learner == "create_cnn"
    cell = CellResult.from_dict(make_cell("resnet18", "fp32", engine="fastai"))
    assert "learner" not in cell.params and cell.label == "cifar/resnet18/fp32/fastai (scratch)"


def _kit(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200", KIT_RESULTS_DIR=str(tmp_path / "results"),
               KIT_DATA_DIR=str(tmp_path / "data"))
    return subprocess.run([sys.executable, "-m", "kit", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_plan_shows_the_fastai_learner_create_cnn_by_default(tmp_path):
    out = _kit(tmp_path, "run", "--dry-run", "--data", "synthetic", "-m", "resnet18", "-p", "fp32")
    assert out.returncode == 0, out.stderr
    assert "fastai (create_cnn)" in out.stdout and "torch (" not in out.stdout
    out = _kit(tmp_path, "run", "--dry-run", "--data", "synthetic", "-m", "resnet18", "-p", "fp32", "--learner", "scratch")
    assert out.returncode == 0 and "fastai (scratch)" in out.stdout


@pytest.mark.parametrize("value", ["nope", ""])
def test_an_unknown_learner_is_a_one_line_usage_error(tmp_path, value):
    out = _kit(tmp_path, "run", "--data", "synthetic", "--learner", value)
    assert out.returncode == 2, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"unknown --learner {value!r}" in errors[0] and "create_cnn or scratch" in errors[0]
    assert "Traceback" not in out.stderr + out.stdout and out.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written


def test_the_cuda10_runner_takes_the_learner_and_refuses_an_unknown_one(tmp_path, capsys):
    from kit.runner import legacy

    assert legacy.parse(["run"]).value("learner") == "create_cnn"
    assert legacy.parse(["run", "--learner", "scratch"]).value("learner") == "scratch"
    code = legacy.main(["run", "--data", "synthetic", "--learner", "nope", "--results-dir", str(tmp_path / "r"),
                        "--data-dir", str(tmp_path / "d")])
    out = capsys.readouterr().out
    assert code == 2 and [line for line in out.splitlines() if line.startswith("error:")] == [
        "error: unknown --learner 'nope'; choose create_cnn or scratch"]
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- labels
def _fastai_cell(learner: str | None, speed: float = 1.0) -> dict:
    cell = make_cell("resnet18", "fp32", engine="fastai", epoch_s=[10.0 / speed, 10.1 / speed, 9.9 / speed])
    if learner:
        cell["params"]["learner"] = learner
    return cell


def test_compare_labels_fastai_cells_with_their_learner_and_warns_when_they_differ(tmp_path, capsys, monkeypatch):
    from kit.cli.main import main
    from kit.compare.engine import compare_paths

    same_a = make_run_dir(tmp_path / "a", make_results([_fastai_cell("create_cnn")], make_env(), run_id="FIXTURE-a"))
    same_b = make_run_dir(tmp_path / "b", make_results([_fastai_cell("create_cnn", 1.1)], make_env(host="fixture-host-b"),
                                                       run_id="FIXTURE-b"))
    cmp = compare_paths([same_a, same_b])
    assert [r.label for r in cmp.rows] == ["cifar/resnet18/fp32/fastai (create_cnn)"]
    assert not [w for w in cmp.warnings if "learner" in w.message]

    old = make_run_dir(tmp_path / "c", make_results([_fastai_cell(None, 1.1)], make_env(host="fixture-host-c"),
                                                    run_id="FIXTURE-c"))  # recorded before --learner: scratch
    cmp = compare_paths([same_a, old])
    assert cmp.rows[0].cell_id == "cifar/resnet18/fp32/fastai"  # still compared: the ids match
    assert cmp.rows[0].label == "cifar/resnet18/fp32/fastai (learners differ: create_cnn / scratch)"
    (warning,) = [w for w in cmp.warnings if "learner" in w.message]
    assert warning.kind == "params" and "A create_cnn" in warning.message and "B scratch" in warning.message
    # the learners are named in the machines' (columns') order
    assert compare_paths([old, same_a]).rows[0].label == "cifar/resnet18/fp32/fastai (learners differ: scratch / create_cnn)"

    monkeypatch.setenv("COLUMNS", "220")
    for extra in ([], ["--markdown", "-"]):
        try:
            main(["compare", str(same_a), str(old), *extra])
        except SystemExit as exc:
            assert not exc.code
        assert "fastai (learners differ: create_cnn / scratch)" in capsys.readouterr().out
    page = tmp_path / "c.html"
    try:
        main(["compare", str(same_a), str(old), "--html", str(page)])
    except SystemExit as exc:
        assert not exc.code
    assert "fastai (learners differ: create_cnn / scratch)" in page.read_text()


def test_the_run_report_labels_fastai_cells_with_their_learner():
    from kit.report.html.run_report import render_run_report
    from kit.results.schema import RunResults

    res = RunResults.from_dict(make_results([_fastai_cell("create_cnn"), make_cell("resnet18", "fp32", engine="torch")]))
    html = render_run_report(res, res.environment, interrupted=False, charts={})
    assert "cifar/resnet18/fp32/fastai (create_cnn)" in html
    assert "cifar/resnet18/fp32/torch (" not in html


def test_bundle_show_names_a_fastai_cells_learner(tmp_path):
    from typer.testing import CliRunner

    from kit.cli.main import app
    from kit.report.export import export_run

    old = {**_fastai_cell(None), "precision": "amp-fp16", "cell_id": "cifar/resnet18/amp-fp16/fastai"}
    res = make_results([_fastai_cell("create_cnn"), old, make_cell("resnet18", "fp32", engine="torch")])
    bundle = export_run(make_run_dir(tmp_path / "runs", res), tmp_path / "bundles")
    out = CliRunner().invoke(app, ["bundle", "show", str(bundle)], env={"COLUMNS": "160"})
    assert out.exit_code == 0, out.output
    lines = {line.split()[0]: line for line in out.output.splitlines() if line.startswith("cifar/")}
    assert "learner create_cnn" in lines["cifar/resnet18/fp32/fastai"]
    assert "learner scratch" in lines["cifar/resnet18/amp-fp16/fastai"]  # recorded before the option
    assert "learner" not in lines["cifar/resnet18/fp32/torch"]
