"""Your own model is a suite in your own package: tests/fixtures/example-plugin (a package naming its
suite under the entry-point group ``mpkit.suites``) is pip-installed beside the kit, and `kit run
--suite tinymlp --device cpu --smoke` writes a bundle that `kit bundle show`, `kit explain` and `kit
compare` read; its cells' method names the plugin and its version. A broken plugin (one that does not
import, a wrong descriptor, a missing piece) gets one line naming it and what is wrong, and the
built-in suites still run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.kit_copy import ROOT
from kit.results.method import method_change

PLUGIN = ROOT / "tests" / "fixtures" / "example-plugin"


def _env(*paths: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=os.pathsep.join([*map(str, paths), str(ROOT)]), COLUMNS="200")
    return env


def _kit(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kit", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=600)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The example plugin pip-installed (no dependencies, no index: the kit and torch are this
    environment's) into a folder of its own, as a package and its metadata with the entry point."""
    where = tmp_path_factory.mktemp("plugin")
    source = where / "source"
    shutil.copytree(PLUGIN, source)  # the build writes beside the sources: not into the repository
    site = where / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                           "--no-build-isolation", "--target", str(site), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def test_an_installed_plugin_runs_to_a_bundle_that_show_explain_and_compare_read(installed, tmp_path):
    env = _env(installed)
    listed = _kit(env, tmp_path, "run", "--help")
    assert listed.returncode == 0 and "tinymlp (a small MLP classifier on random inputs" in " ".join(listed.stdout.split())
    assert "Options of the tinymlp suite:" in listed.stdout and "--mlp-width" in listed.stdout
    bundles = []
    for host in ("a", "b"):
        done = _kit(env, tmp_path, "run", "--suite", "tinymlp", "--device", "cpu", "--smoke", "--mlp-width", "32",
                    "--results-dir", str(tmp_path / f"results-{host}"))
        assert done.returncode == 0, done.stdout + done.stderr
        bundles.append(done.stdout.strip().splitlines()[-1])
    shutil.copy(bundles[1], tmp_path / "b.tar.gz")

    show = _kit(env, tmp_path, "bundle", "show", bundles[0])
    assert show.returncode == 0 and "tinymlp/mlp/fp32/eager" in show.stdout and "tinymlp/mlp/amp-bf16/eager" in show.stdout
    explain = _kit(env, tmp_path, "explain", bundles[0])
    assert explain.returncode == 0 and "tinymlp/mlp/amp-bf16/eager" in explain.stdout and "measured speedup" in explain.stdout
    compared = _kit(env, tmp_path, "compare", bundles[0], str(tmp_path / "b.tar.gz"), "--json", "-")
    assert compared.returncode == 0, compared.stderr
    rows = {r["cell_id"]: r for r in json.loads(compared.stdout)["rows"]}
    assert rows["tinymlp/mlp/amp-bf16/eager"]["machines"]["A"]["speedup_vs_fp32"]["ratio"] > 0

    (run_dir,) = [p for p in (tmp_path / "results-a").iterdir() if p.is_dir()]
    results = json.loads((run_dir / "results.json").read_text())
    cell = next(c for c in results["cells"] if c["precision"] == "fp32")
    assert cell["status"] == "ok" and cell["throughput_unit"] == "samples" and cell["params"]["mlp_width"] == 32
    assert cell["method"]["engine"] == "tinymlp/eager" and cell["method"]["paced_by"] == "host"
    assert cell["method"]["settings"]["plugin"] == "mpkit-example-suite 0.1.0"
    assert results["config"]["suite_options"] == {"tinymlp": {"mlp_width": 32, "mlp_depth": 2}}
    assert any("synthetic" in note for note in cell["notes"])


def test_two_versions_of_a_plugin_are_never_divided_unmarked():
    """The plugin's package and version are a setting of its cells' method (kit.results.method)."""
    def method(version: str) -> dict:
        return {"engine": "tinymlp/eager", "revision": 1,
                "settings": {"plugin": f"mpkit-example-suite {version}", "step": "eager", "batch_size": 64}}

    said = method_change([("A", method("0.1.0")), ("B", method("0.2.0"))])
    assert said is not None and "mpkit-example-suite 0.1.0" in said and "compares methods, not machines" in said
    assert method_change([("A", method("0.1.0")), ("B", method("0.1.0"))]) is None


def _broken(where: Path, name: str, module: str, text: str) -> Path:
    """A plugin installed by hand: its module, and the metadata naming it under mpkit.suites."""
    (where / f"{module}.py").write_text(text, encoding="utf-8")
    info = where / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[mpkit.suites]\n{name} = {module}\n", encoding="utf-8")
    return where


@pytest.mark.parametrize("text, words", [
    ("import no_such_package_here\n", "does not import: ModuleNotFoundError: No module named 'no_such_package_here'"),
    ("SUITE = 42\n", "its SUITE is int, not a kit.results.suites.Suite"),
    ("from kit.bench.generic import model_suite\nSUITE = model_suite('other', 'x', 'nowhere')\n",
     "it describes a suite named 'other'; its entry point names it 'broken'"),
    ("from kit.bench.generic import model_suite\nSUITE = model_suite('broken', 'x', 'nowhere')"
     "._replace(runner='nowhere.engine')\n", "its runner module 'nowhere.engine' cannot be found"),
], ids=["import-error", "wrong-descriptor", "wrong-name", "missing-runner"])
def test_a_broken_plugin_is_one_line_naming_it_and_the_built_in_suites_still_run(tmp_path, text, words):
    (tmp_path / "site").mkdir()
    env = _env(_broken(tmp_path / "site", "broken", "broken_plugin", text))
    done = _kit(env, tmp_path, "run", "--suite", "broken", "--device", "cpu", "--data", "synthetic", "--dry-run")
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "suite plugin 'broken' (broken_plugin 1.0" in errors[0] and words in errors[0], errors[0]
    fine = _kit(env, tmp_path, "run", "--suite", "cifar", "-m", "resnet18", "-p", "fp32", "--device", "cpu",
                "--data", "synthetic", "--dry-run")
    assert fine.returncode == 0 and "resnet18" in fine.stdout and "2 cell(s) to run" in fine.stdout, fine.stderr
    assert "suite plugin 'broken'" in fine.stderr and "it is left out" in fine.stderr  # said, once, not fatal


def test_the_captured_step_trains_as_the_eager_loop_does():
    """The graphed engine's step (its capture aside, which needs a GPU) updates the weights by
    torch.optim.SGD's rule, as the eager engine's loop does: the same model, batch and steps end on the
    same weights."""
    import torch

    from kit.bench.generic import Recipe
    from kit.bench.generic.engine import CapturedStep, EagerStep

    recipe = Recipe("unused", lr=0.05)
    x, y = torch.randn(16, 8, generator=torch.Generator().manual_seed(1)), torch.arange(16) % 4
    weights = []
    for kind in (EagerStep, CapturedStep):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        step = kind(model, torch.nn.functional.cross_entropy, "fp32", "cpu", recipe)
        losses = [float(step(x, y)) for _ in range(6)]
        assert losses[-1] < losses[0]
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.allclose(weights[0], weights[1], rtol=1e-5, atol=1e-6)
