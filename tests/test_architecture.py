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
    for package in ("kit.compare", "kit.compare.fleet"):
        assert any(c["type"] == "acyclic_siblings" and package in c.get("ancestors", []) for c in contracts), package


def test_the_cli_contract_names_every_module_of_kit_cli():
    """The kit.cli layers contract lists the command modules by name: a command module it does not
    name would escape "a command imports no other command"."""
    import tomllib

    contracts = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (cli,) = [c for c in contracts if c.get("type") == "layers" and c["layers"][0] == "kit.cli.main"]
    named = {m.strip() for layer in cli["layers"] for m in layer.split("|")}
    modules = {f"kit.cli.{p.stem}" for p in (ROOT / "cli").glob("*.py") if p.stem != "__init__"}
    assert modules == named, f"pyproject.toml's kit.cli contract: add {sorted(modules - named)}, drop {sorted(named - modules)}"


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
#: a module docstring line that starts so says why the module may be longer than MAX_MODULE_LINES
LONG_BECAUSE = "Long because:"


def _too_long(text: str) -> str | None:
    """Why ``text`` (a module's source) is too long, or None: over MAX_MODULE_LINES lines without
    a line of its docstring that starts with LONG_BECAUSE and gives the reason."""
    lines = len(text.splitlines())
    if lines <= MAX_MODULE_LINES:
        return None
    doc = ast.get_docstring(ast.parse(text)) or ""
    if any(line.strip().startswith(LONG_BECAUSE) and line.strip()[len(LONG_BECAUSE):].strip()
           for line in doc.splitlines()):
        return None
    return f"{lines} lines, and no '{LONG_BECAUSE} ...' line in its docstring"


def test_a_long_module_says_why_in_its_docstring():
    body = "x = 1\n" * MAX_MODULE_LINES
    assert _too_long('"""A module."""\n' + body) is not None
    assert _too_long('"""A module.\n\nLong because: one table of facts, read top to bottom.\n"""\n' + body) is None
    assert _too_long('"""A module.\n\nLong because:\n"""\n' + body) is not None  # the reason is missing
    assert _too_long(body[:-6 * 10]) is None


def test_no_module_under_kit_exceeds_500_lines_unless_its_docstring_says_why():
    """A module past 500 lines is split along its jobs (its importers import each name from its new
    module); one that is long for a good reason says why in its docstring (docs/architecture.md)."""
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        why = _too_long(path.read_text(encoding="utf-8"))
        if why:
            offenders.append(f"{path.relative_to(ROOT.parent)}: {why}")
    assert not offenders, "modules too long:\n" + "\n".join(offenders)


# --- one home per name -------------------------------------------------------------------------

def _bound(stmts, defined: set, imported: dict, conditional: bool = False) -> None:
    """The names module-level ``stmts`` define (``defined``) and import (``imported``: name -> the
    import statement). An import inside ``try`` (one implementation or another, as kit.compat
    chooses) defines its name."""
    for s in stmts:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            for a in s.names:
                name = a.asname or a.name.split(".")[0]
                if conditional:
                    defined.add(name)
                elif a.name != "*" and not (isinstance(s, ast.ImportFrom) and s.module == "__future__"):
                    imported[name] = s
        elif isinstance(s, ast.If):
            _bound(s.body + s.orelse, defined, imported, conditional)
        elif isinstance(s, ast.Try):
            _bound(s.body + [x for h in s.handlers for x in h.body] + s.orelse + s.finalbody, defined, imported, True)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(s.name)
        else:
            defined.update(n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))


def _module_names(tree: ast.Module) -> tuple[set, dict]:
    defined, imported = set(), {}
    _bound(tree.body, defined, imported)
    return defined, imported


def _names_used(tree: ast.Module) -> set:
    """Every name the module's code reads: in expressions, in annotations written as strings and in
    type comments (Python 3.7 modules), not in ``__all__``."""
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}
    texts = []
    for n in ast.walk(tree):
        for ann in (getattr(n, "annotation", None), getattr(n, "returns", None)):
            if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
                texts.append(ann.value)
        if isinstance(n, ast.Subscript):  # "Plan" inside list["Plan"]
            texts += [c.value for c in ast.walk(n) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        if getattr(n, "type_comment", None):
            texts.append(n.type_comment)
    for text in texts:
        try:
            parsed = ast.parse(text, mode="func_type" if "->" in text else "eval")
        except SyntaxError:
            continue
        used.update(x.id for x in ast.walk(parsed) if isinstance(x, ast.Name))
    return used


def re_exports(source: str) -> list[str]:
    """What a module's ``source`` re-exports: names in ``__all__`` that it imports rather than
    defines, imports marked ``noqa: F401`` (kept though unused), and module-level imports it never
    uses itself (there only for others to import from here)."""
    tree = ast.parse(source, type_comments=True)
    lines = source.splitlines()
    defined, imported = _module_names(tree)
    found = []
    for s in tree.body:
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in s.targets):
            found += [f"__all__ names {c.value!r}, imported from elsewhere" for c in ast.walk(s.value)
                      if isinstance(c, ast.Constant) and c.value in imported and c.value not in defined]
    for s in {id(s): s for s in imported.values()}.values():
        if any("noqa: F401" in line for line in lines[s.lineno - 1:s.end_lineno]):
            found.append(f"line {s.lineno}: an import marked noqa: F401")
    used = _names_used(tree)
    found += [f"line {s.lineno}: imports {name} and never uses it" for name, s in imported.items()
              if name not in used and name not in defined]
    return found


def test_the_re_export_check_catches_each_form():
    planted = (
        '"""A module."""\nfrom typing import TYPE_CHECKING, Optional\n'
        "from kit.results.ratios import THROUGHPUT, fmt_speedup\n"
        "from kit.results.cell_ids import cell_id  # noqa: F401\n"
        "from kit.results.schema_names import PRECISIONS\n"
        "if TYPE_CHECKING:\n    from kit.runner.plan import Plan\n"
        "try:\n    import tomllib\nexcept ImportError:\n    tomllib = None\n"
        "__all__ = ['PRECISIONS', 'show']\n"
        "def show(plan: 'Plan', x) -> str:\n    y = None  # type: Optional[int]\n    return fmt_speedup(x)\n"
    )
    found = re_exports(planted)
    assert [f.split(":")[0] if f.startswith("line") else f for f in found] == [
        "__all__ names 'PRECISIONS', imported from elsewhere", "line 4", "line 3", "line 4", "line 5"], found
    assert "imports THROUGHPUT" in found[2] and "imports PRECISIONS" in found[4]
    assert re_exports('"""A module."""\nfrom kit.results.ratios import fmt_speedup\nprint(fmt_speedup(2.0))\n') == []


def test_no_module_under_kit_re_exports_a_name():
    """Each name has one home: a module that moves a name out does not keep it importable from
    here, its importers change (docs/architecture.md)."""
    offenders = [f"{path.relative_to(ROOT.parent)}: {what}" for path in sorted(ROOT.rglob("*.py"))
                 for what in re_exports(path.read_text(encoding="utf-8"))]
    assert not offenders, "re-exported names:\n" + "\n".join(offenders)


def _homes() -> dict:
    """kit's modules by dotted name: (the names each defines, its submodules)."""
    homes = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        homes[name] = _module_names(ast.parse(path.read_text(encoding="utf-8")))[0]
    return homes


def misplaced_imports(source: str, homes: dict) -> list[str]:
    """The ``from kit.X import name`` in ``source`` whose name kit.X does not define (nor is its submodule)."""
    found = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module and n.module.split(".")[0] == "kit":
            found += [f"line {n.lineno}: from {n.module} import {a.name}" for a in n.names
                      if f"{n.module}.{a.name}" not in homes and a.name not in homes.get(n.module, ())]
    return found


def test_every_name_is_imported_from_the_module_that_defines_it():
    homes = _homes()
    assert misplaced_imports("from kit.results.schema import PRECISIONS, CellResult\n", homes) == [
        "line 1: from kit.results.schema import PRECISIONS"]
    assert misplaced_imports("from kit.results import schema\nfrom kit.compat import metadata\n", homes) == []
    repo = ROOT.parent
    offenders = [f"{path.relative_to(repo)}: {what}" for folder in ("kit", "tests", "scripts")
                 for path in sorted((repo / folder).rglob("*.py"))
                 for what in misplaced_imports(path.read_text(encoding="utf-8"), homes)]
    assert not offenders, "names imported from a module that does not define them:\n" + "\n".join(offenders)


def test_the_package_ships_no_test_double():
    """Fakes for the tests (a fake NVML, fake Docker clients) live under tests/fixtures, not in the package."""
    doubles = [str(p.relative_to(ROOT.parent)) for p in ROOT.rglob("*.py") if "fake" in p.stem.lower()]
    assert not doubles, f"test doubles in the package: {doubles} (move them to tests/fixtures/)"


# --- every name is used ------------------------------------------------------------------------

REPO = ROOT.parent
#: the names under kit/ that no code names, because only a string reaches them (getattr, importlib,
#: a descriptor's field): vulture counts each as used from this list, which says why
USED_BY_NAME = REPO / "tests" / "used_by_name.py"
#: decorators that register the function they decorate (Typer's commands and callbacks)
REGISTERING_DECORATORS = ["@*.command", "@*.callback"]


def _top_level(tree: ast.Module) -> set:
    """(name, line) of each function, class and constant a module defines at its top level (inside
    a top-level ``if`` or ``try`` too)."""
    found = set()

    def walk(stmts) -> None:
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add((s.name, s.lineno))
            elif isinstance(s, (ast.Assign, ast.AnnAssign)):
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                found.update((n.id, n.lineno) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(s, ast.If):
                walk(s.body + s.orelse)
            elif isinstance(s, ast.Try):
                walk(s.body + [x for h in s.handlers for x in h.body] + s.orelse + s.finalbody)

    walk(tree.body)
    return found


def unused_names(package: Path, elsewhere: list, entry_points: list = ()) -> list:
    """The module-level functions, classes and constants under ``package`` that nothing names: not
    the package's code, nor the files under ``elsewhere`` (tests, scripts, the used-by-name list),
    nor an entry point (``module:function``). vulture finds the unused names (by name, anywhere);
    of those, this keeps the ones a module defines at its top level."""
    from vulture import Vulture

    package = package.resolve()
    v = Vulture(ignore_decorators=REGISTERING_DECORATORS)
    v.scavenge([str(package)] + [str(p) for p in elsewhere])
    v.scan("\n".join(part for ep in entry_points for part in ep.split(":")[-1].split(".")), filename="entry points")
    tops, found = {}, []
    for item in v.get_unused_code():
        path = Path(item.filename).resolve()
        if item.typ not in ("function", "class", "variable") or package not in path.parents:
            continue
        if path not in tops:
            tops[path] = _top_level(ast.parse(path.read_text(encoding="utf-8")))
        if (item.name, item.first_lineno) in tops[path]:
            found.append((path.relative_to(package.parent).as_posix(), item.first_lineno, f"{item.typ} {item.name}"))
    return [f"{p}:{line}: {what}" for p, line, what in sorted(found)]


def test_the_unused_name_check_finds_each_kind(tmp_path):
    """A planted constant, function and class that nothing names are found; a name used elsewhere,
    one an entry point names, one the used-by-name list names, a class's field and a registered
    command are not."""
    pkg = tmp_path / "kit"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "LIMIT = 3\nUNUSED = 4\n\n\ndef used():\n    return LIMIT\n\n\ndef forgotten():\n    x = 1\n    return x\n\n\n"
        "class Ghost:\n    kind = 'a field, not a module-level name'\n\n\ndef main():\n    pass\n\n\n"
        "@app.command('list')\ndef list_():\n    pass\n")
    (tmp_path / "test_a.py").write_text("from kit.a import used\n\nused()\n")
    found = unused_names(pkg, [tmp_path / "test_a.py"], ["kit.a:main"])
    assert found == ["kit/a.py:2: variable UNUSED", "kit/a.py:9: function forgotten", "kit/a.py:14: class Ghost"], found
    (tmp_path / "by_name.py").write_text("Ghost  # made by name\n")
    assert len(unused_names(pkg, [tmp_path / "test_a.py", tmp_path / "by_name.py"], ["kit.a:main"])) == 2
    assert len(unused_names(pkg, [tmp_path / "test_a.py"])) == 4  # main: no entry point names it


def _entry_points() -> list:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return list(project.get("scripts", {}).values()) + [
        target for group in project.get("entry-points", {}).values() for target in group.values()]


def test_every_module_level_name_under_kit_is_used():
    """A function, class or constant at a module's top level under kit/ is named somewhere: in kit/,
    tests/, scripts/ or an entry point of pyproject.toml. One only a string reaches is listed, with
    why, in tests/used_by_name.py; each name listed there is still defined under kit/."""
    import importlib.util

    assert importlib.util.find_spec("vulture"), "vulture is in requirements-test.txt"
    found = unused_names(ROOT, [REPO / "tests", REPO / "scripts"], _entry_points())
    assert not found, "names nothing uses (remove them, or list one a string reaches in tests/used_by_name.py):\n" + "\n".join(found)
    listed = {n.id for n in ast.walk(ast.parse(USED_BY_NAME.read_text(encoding="utf-8"))) if isinstance(n, ast.Name)}
    defined = {name for path in ROOT.rglob("*.py") for name, _ in _top_level(ast.parse(path.read_text(encoding="utf-8")))}
    assert listed <= defined, f"tests/used_by_name.py lists names kit/ no longer defines: {sorted(listed - defined)}"


# --- functions a reader follows ----------------------------------------------------------------

MAX_FUNCTION_LINES = 80
#: a comment line under a function's signature that starts so says why it may be longer
LONG_FUNCTION = "# long because:"
#: long functions whose reason is written here rather than under their def, each with its reason
LONG_FUNCTIONS = {
    "kit/bench/cifar/torch_engine.py:train_repeat":
        "one repeat of the torch engine's training loop, read top to bottom as nanoGPT's train.py",
    "kit/bench/gpt/train.py:run_repeat":
        "one repeat of the GPT's training loop, read top to bottom as nanoGPT's train.py",
    "kit/bench/gpt/suite.py:run_cell":
        "the GPT cell from its settings to its CellResult, one step after another",
}


def long_functions(source: str) -> list:
    """(line, name, lines) of each function in ``source`` (methods and nested ones too) longer than
    MAX_FUNCTION_LINES lines, its def to its last line, without a line between its def and its
    first statement that starts with LONG_FUNCTION and gives the reason."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        length = node.end_lineno - node.lineno + 1
        between = lines[node.lineno:node.body[0].lineno - 1]
        said = any(ln.strip().startswith(LONG_FUNCTION) and ln.strip()[len(LONG_FUNCTION):].strip() for ln in between)
        if length > MAX_FUNCTION_LINES and not said:
            found.append((node.lineno, node.name, length))
    return found


def test_a_long_function_says_why_under_its_def():
    body = "    x = 1\n" * MAX_FUNCTION_LINES
    assert long_functions("def f():\n" + body) == [(1, "f", MAX_FUNCTION_LINES + 1)]
    assert long_functions("def f():\n" + body[:-10]) == []
    assert long_functions("def f(\n    a,\n):\n    # long because: one table, row by row\n" + body) == []
    assert long_functions("def f():\n    # long because:\n" + body) != []  # the reason is missing
    assert long_functions("class C:\n    def m(self):\n" + "    " + body.replace("\n    ", "\n        ")) != []


def test_no_function_under_kit_exceeds_80_lines_unless_it_says_why():
    """A function past 80 lines is split into named steps a reader follows; one that is long for a
    good reason says why in a ``# long because: ...`` line under its signature (or in LONG_FUNCTIONS)."""
    offenders, listed = [], set()
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for line, name, length in long_functions(path.read_text(encoding="utf-8")):
            if f"{rel}:{name}" in LONG_FUNCTIONS:
                listed.add(f"{rel}:{name}")
            else:
                offenders.append(f"{rel}:{line} {name}: {length} lines")
    assert not offenders, "functions too long (split them, or say why):\n" + "\n".join(offenders)
    assert listed == set(LONG_FUNCTIONS), f"LONG_FUNCTIONS names functions no longer long: {sorted(set(LONG_FUNCTIONS) - listed)}"
