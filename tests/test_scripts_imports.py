"""Every `kit` module and name the scripts under scripts/ import exists (a script the suite never runs,
such as the GPU benchmarks, would otherwise find a moved module only on the GPU machine)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))


def kit_imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.split(".")[0] == "kit":
            yield node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "kit":
                    yield a.name, []


def module_path(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def defined_names(path: Path) -> set:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_every_kit_import_of_a_script_resolves(script):
    missing = []
    for module, names in kit_imports(script):
        path = module_path(module)
        if path is None:
            missing.append(module)
            continue
        have = defined_names(path)
        for n in names:
            if n != "*" and n not in have and module_path(f"{module}.{n}") is None:
                missing.append(f"{module}.{n}")
    assert not missing, f"{script.name} imports what the kit does not have: {missing}"


def test_the_check_sees_a_moved_module(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def main():\n    from kit.runner.context import CellContext\n")
    assert [m for m, _ in kit_imports(bad)] == ["kit.runner.context"]
    assert module_path("kit.runner.context") is None
    assert module_path("kit.bench.context") is not None
    assert "CellContext" in defined_names(module_path("kit.bench.context"))
