"""The suites' registry (kit.results.suites): each suite is one folder under kit/bench/ with its
descriptor; every part of the kit reads the descriptors, no other list of suites grows back in kit/,
and a new suite is one module."""

from __future__ import annotations

import ast
import subprocess
import sys
import tarfile
from pathlib import Path

from fixtures.kit_copy import copy_kit, two_runs_compared
from kit.results import suites

ROOT = Path(__file__).resolve().parents[1]


def test_the_suites_and_what_all_runs():
    assert suites.names() == ("cifar", "lstm", "gpt")
    assert suites.choices() == ("cifar", "lstm", "gpt", "all")
    assert suites.run_names("all") == ("cifar", "lstm")  # gpt only by name: heavy, and it needs a recent GPU
    assert suites.run_names("gpt") == ("gpt",) and suites.run_names("nope") == ()
    assert suites.model_order()[:5] == ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")
    assert suites.suite("lstm").engines == ("kit", "graphed") and suites.unit("cifar") == "images"
    assert suites.parity_of("gpt").base == "amp-bf16" and suites.parity_of("lstm").tolerance == 0.02
    # a workload this kit does not know (a newer kit's bundle) reads with neutral defaults
    assert suites.find("toy") is None and suites.unit("toy") == "items" and suites.engine_label("toy", "x") == "x"


def test_the_descriptors_and_their_plans_never_import_torch():
    code = ("import sys\nfrom kit.results import suites\nfrom kit.results.schema import RunConfig\n"
            "from kit.runner.plan import build_plan, estimate_plan_seconds\n"
            "p = build_plan(RunConfig.of(suite='all', device='cpu'))\nestimate_plan_seconds(p)\n"
            "g = build_plan(RunConfig.of(suite='gpt', device='cpu'))\n"
            "assert len(p.cells) == 84 and len(g.cells) == 18, (len(p.cells), len(g.cells))\n"
            "heavy = sorted(m for m in ('torch', 'torchvision', 'fastai', 'apex', 'torchao') if m in sys.modules)\n"
            "assert not heavy, heavy\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr


def test_each_runner_module_exists_and_each_engine_has_a_revision():
    import importlib.util

    for s in suites.all_suites():
        assert importlib.util.find_spec(s.runner) is not None, s.runner
        assert set(s.engines) <= set(s.revisions), s.name
        assert set(s.host_paced) <= set(s.revisions) and set(s.data_parallel) <= set(s.engines), s.name


def _suite_names_in(path: Path, names: set) -> list:
    """Where a module lists suites (a tuple, list, set or dict keys of two or more suite names) or
    branches on one (``workload == "cifar"``, ``suite in ("lstm", "all")``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            elts = node.keys if isinstance(node, ast.Dict) else node.elts
            found = sorted({e.value for e in elts if isinstance(e, ast.Constant) and e.value in names})
            if len(found) >= 2:
                out.append(f"{path.name}:{node.lineno}: {found}")
        elif isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and side.value in names:
                    out.append(f"{path.name}:{node.lineno}: == {side.value!r}")
    return out


#: modules that may name suites, and why: each is a registry's own data
NAMING_SUITES = {
    "kit/results/precisions.py": "a precision mode's row names the suites that measure it",
}


def test_no_other_list_of_suites_in_the_kit(tmp_path):
    names = set(suites.names())
    planted = tmp_path / "planted.py"
    planted.write_text('SUITES = ("cifar", "lstm")\nif workload == "gpt":\n    pass\n', encoding="utf-8")
    assert _suite_names_in(planted, names) == ["planted.py:1: ['cifar', 'lstm']", "planted.py:2: == 'gpt'"]
    found = []
    for path in sorted((ROOT / "kit").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.as_posix() in NAMING_SUITES or (rel.parts[1] == "bench" and len(rel.parts) > 3 and rel.parts[2] in names):
            continue  # a suite's own folder names itself
        found += _suite_names_in(path, names)
    assert not found, f"suites named outside their descriptors (kit/bench/<suite>/): {found}"


TOY = '''"""A toy suite for the kit's own test: a linear layer's SGD steps, timed on the CPU."""

import time

from kit.bench import methods
from kit.results.schema import CellResult, CellSpec
from kit.results.stats import summarise_repeats
from kit.results.suites import Parity, Suite


def cells(config):
    return [CellSpec("toy", "linear", p, "kit", {"steps": config.steps or 30, "batch_size": 16})
            for p in config.precisions or ["fp32", "amp-bf16"]]


def work(spec, mode):
    return 6.0 * 64 * 64 * spec.params["batch_size"] * spec.params["steps"]


def run_cell(spec, ctx):
    import torch

    torch.manual_seed(ctx.seed)
    model, batch = torch.nn.Linear(64, 64), spec.params["batch_size"]
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(batch, 64), torch.randn(batch, 64)
    dtype = torch.bfloat16 if spec.precision == "amp-bf16" else None
    repeats = []
    for r in range(ctx.repeats):
        start = time.perf_counter()
        for _ in range(spec.params["steps"]):
            with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
                loss = torch.nn.functional.mse_loss(model(x).float(), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        took = time.perf_counter() - start
        repeats.append({"repeat": r, "epoch_s": took, "throughput_items_per_s": batch * spec.params["steps"] / took,
                        "final_metric": float(loss)})
    return CellResult(spec.workload, spec.model, spec.precision, spec.engine, "ok", params=spec.params,
                      throughput_unit="samples", repeats=repeats, summary=summarise_repeats(repeats),
                      method=methods.record("toy/kit", {"steps": spec.params["steps"], "batch_size": batch}))


SUITE = Suite(name="toy", help="a linear layer, for the kit's own test", title="Toy linear layer ({engine})",
              models=("linear",), engines=("kit",), plan=cells, work=work, runner="kit.bench.toy",
              parity=Parity("final loss"), unit="samples", revisions={"kit": (1, ((1, "SGD steps of a Linear"),))})
'''


def test_a_new_suite_is_one_module(tmp_path):
    """A copy of the kit with one module added, kit/bench/toy/__init__.py, and nothing else changed,
    runs the new suite through kit run on the CPU into a bundle that kit bundle show, kit compare and
    the report show."""
    kit = copy_kit(tmp_path)
    (tmp_path / "kit" / "bench" / "toy").mkdir()
    (tmp_path / "kit" / "bench" / "toy" / "__init__.py").write_text(TOY, encoding="utf-8")
    assert "toy (a linear layer, for the kit's own test)" in " ".join(kit("run", "--help").split())
    bundles, show, rows = two_runs_compared(kit, tmp_path, "--suite", "toy", "--device", "cpu", "--repeats", "2",
                                            "--skip-checks")
    assert "toy/linear/fp32/kit" in show and "toy/linear/amp-bf16/kit" in show
    bf16 = rows["toy/linear/amp-bf16/kit"]["machines"]
    assert bf16["A"]["speedup_vs_fp32"]["ratio"] > 0 and bf16["B"]["throughput_vs_baseline"]
    with tarfile.open(bundles[0]) as tar:
        report = next(m for m in tar.getmembers() if m.name.endswith("report.html"))
        html = tar.extractfile(report).read().decode("utf-8")
    assert "Toy linear layer (kit)" in html and "samples per second" in html
