"""The host side installs in seconds: nothing outside kit/bench imports torch & co."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import kit

HEAVY = {"torch", "torchvision", "fastai", "apex", "numpy"}
ROOT = Path(kit.__file__).parent


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_only_bench_imports_the_training_stack():
    offenders = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("bench", "data"):
            continue  # kit/bench trains; kit/data's readers import numpy lazily (checked below)
        bad = _imports(path) & HEAVY
        if rel.as_posix() == "compare/stats.py":
            # scipy's t distribution (a host dependency) brings NumPy with it; the ratios are computed
            # on its arrays, imported inside the functions (the CLI's import stays free of it, below)
            bad -= {"numpy"}
        if bad:
            offenders.append(f"{rel}: {sorted(bad)}")
    assert not offenders, "host-side modules import the training stack:\n" + "\n".join(offenders)


def test_data_package_never_imports_torch():
    for path in (ROOT / "data").rglob("*.py"):
        assert not (_imports(path) & {"torch", "torchvision", "fastai", "apex"}), path


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True,
    )
    return set(out.stdout.split())


def test_importing_the_cli_does_not_import_torch():
    loaded = _modules_after("import kit.cli.main")
    assert not (loaded & {"torch", "torchvision", "fastai", "numpy", "docker"}), sorted(loaded & HEAVY)


def test_kit_help_runs_without_importing_torch():
    code = (
        "import sys\n"
        "from kit.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'kit --help imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_the_compare_package_has_a_no_circle_contract():
    """kit.compare's modules import each other in one direction only: import-linter checks it
    (function-level imports included), so a circle fails the build instead of hiding in a function."""
    import tomllib

    contracts = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert any(c["type"] == "acyclic_siblings" and "kit.compare" in c.get("ancestors", []) for c in contracts)


def test_the_package_layers_hold():
    """The import-linter contracts in pyproject.toml (layers, no circles, torch only in kit.bench)."""
    import importlib.util

    assert importlib.util.find_spec("importlinter"), "import-linter is in requirements-test.txt"
    repo = ROOT.parent
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
         "--config", str(repo / "pyproject.toml"), "--no-cache"],
        capture_output=True, text=True, cwd=repo, env={**__import__("os").environ, "PYTHONPATH": str(repo)},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


MAX_MODULE_LINES = 500


def test_no_module_under_kit_exceeds_500_lines():
    """A module past 500 lines is split along its jobs (pure moves into siblings, the old names re-exported)."""
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        with path.open(encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        if lines > MAX_MODULE_LINES:
            offenders.append(f"{path.relative_to(ROOT.parent)}: {lines} lines")
    assert not offenders, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(offenders)
