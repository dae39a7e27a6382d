"""The native benchmark stack: do torch, torchvision and fastai import in this Python, and agree?

`kit run` trains with them; `kit doctor` shows them. A package that does not import is an
install the kit cannot run on, not a cell this machine cannot run (no Apex, no bf16 before
Ampere, which are recorded as skipped): a torchvision built for another torch fails at
``import torchvision`` (``RuntimeError: operator torchvision::nms does not exist``), and a run
that went on would record every CIFAR cell as skipped and exit 0.

The host side never imports torch (pyproject.toml's import-linter contracts): the imports are
tried in a child of this same Python, with this process's import path, which prints what it
found as JSON lines. The versions come from the packages' metadata, which needs no import.

    probe()           {package: {"installed", "imports", "version", "error"}}
    findings(probe)   what is wrong, each with the command that fixes it
    check_for_run()   `kit run`'s check: EnvironmentCheckError (exit 6) for the first error
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Iterable

from kit.env.record import package_versions
from kit.errors import EnvironmentCheckError
from kit.facts.torch_pairs import TESTED_STACK, pair_agrees, tested_pair, torchvision_for

PACKAGES = ("torch", "torchvision", "fastai")
#: what is imported for each package: what the cells import first (the CIFAR models,
#: fastai's Learner)
MODULES = {"torch": "torch", "torchvision": "torchvision.models", "fastai": "fastai.learner"}
#: what each package is for, in a finding
NEEDED_FOR = {"torchvision": "the CIFAR suite needs it for its ResNets", "fastai": "the CIFAR suite's fastai engine needs it"}
#: a cold first `import torch` from a slow disk can take a minute
PROBE_TIMEOUT_S = 300

NOT_INSTALLED = "not installed"

# The child: for each package, a line saying it starts (so that a crash names the package it
# died in), then a line with what it found. It imports nothing of the kit.
_CHILD = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
todo = json.loads(sys.argv[1])
sys.path[:] = todo["path"]
for name, module in todo["modules"]:
    print(json.dumps({"trying": name}), flush=True)
    try:
        __import__(module)
        found = {"imports": True, "version": str(getattr(sys.modules[name], "__version__", ""))}
    except BaseException as exc:
        lines = str(exc).strip().splitlines()
        found = {"imports": False, "error": type(exc).__name__ + (": " + lines[0] if lines else "")}
    print(json.dumps({"name": name, "found": found}), flush=True)
"""


@dataclass
class Finding:
    """One thing wrong with the stack: ``severity`` "error" (kit run stops), "warning" or "info"."""

    severity: str
    package: str
    message: str
    remedy: str

    def to_dict(self) -> dict:
        return {"severity": self.severity, "package": self.package, "message": self.message, "remedy": self.remedy}


def probe(packages: Iterable[str] = PACKAGES, timeout: float = PROBE_TIMEOUT_S) -> dict[str, dict[str, Any]]:
    """For each package: ``installed`` (its version from metadata, or "not installed"),
    ``imports`` (True, False, or None when the child could not say), ``version`` (what the
    imported module says) and ``error`` (why it did not import). A package without metadata
    that imports (a source folder on the path) counts as installed."""
    wanted = set(packages)
    names = [n for n in PACKAGES if n in wanted]
    versions = package_versions(tuple(names))
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        installed = versions.get(name)
        out[name] = {"installed": installed if isinstance(installed, str) else "unknown", "imports": None}
    if names:
        _try_imports([(n, MODULES[n]) for n in names], out, timeout)
    return out


def _try_imports(todo: list, out: dict, timeout: float) -> None:
    arg = json.dumps({"path": list(sys.path), "modules": todo})
    trying = None
    try:
        proc = subprocess.run([sys.executable, "-c", _CHILD, arg], capture_output=True, text=True, timeout=timeout)
        stdout, died = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        died = f"no answer within {timeout:.0f} s"
    except OSError as exc:
        for name, _module in todo:
            out[name]["error"] = f"could not start {sys.executable} to try it ({exc})"
        return
    for line in stdout.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue  # a package printing on import
        if not isinstance(item, dict):
            continue
        if "trying" in item:
            trying = item["trying"]
        elif item.get("name") in out and isinstance(item.get("found"), dict):
            out[item["name"]].update(item["found"])
            trying = None
    if trying is not None:  # the child died (or hung) inside this import
        out[trying].update(imports=False, error=_death(died))


def _death(died: Any) -> str:
    """Why the child gave no answer for the package it was importing."""
    if isinstance(died, str):
        return died
    if died < 0:
        try:
            name = signal.Signals(-died).name
        except ValueError:
            name = f"signal {-died}"
        return f"the Python process importing it was killed by {name}"
    return f"the Python process importing it exited with status {died}"


def findings(stack: dict[str, dict[str, Any]], needs: Iterable[str] = PACKAGES) -> list[Finding]:
    """What is wrong with ``stack`` (a :func:`probe`) for the packages in ``needs``, most
    basic first. No torch at all is "info" (a host-only install: `kit launch` runs the kit's
    containers instead); a torch that does not import hides the others' findings (they
    fail because of it)."""
    needs = set(needs)
    torch = stack.get("torch") or {}
    torch_version = str(torch.get("version") or torch.get("installed") or "")
    if _missing(torch):
        return [Finding("info", "torch", "torch is not installed in this Python: kit run cannot run here "
                        "(the kit's containers have their own: kit launch)", install_remedy())]
    if torch.get("imports") is False:
        return [Finding("error", "torch", f"torch {torch_version} does not import ({torch.get('error')})",
                        "Reinstall a pair that works together, the one the kit tests: pip install --force-reinstall "
                        f"{tested_pair()}; or run in the kit's container instead: kit launch.")]
    out: list[Finding] = []
    tv = stack.get("torchvision")
    if tv is not None and "torchvision" in needs:
        out += _torchvision_findings(tv, torch_version)
    fa = stack.get("fastai")
    if fa is not None and "fastai" in needs and fa.get("imports") is False:
        version = "" if _missing(fa) else f" {fa.get('installed')}"
        what = "is not installed" if _missing(fa) else f"does not import ({fa.get('error')})"
        out.append(Finding("error", "fastai", f"fastai{version} {what}; {NEEDED_FOR['fastai']}",
                           f"Install it: pip install fastai=={TESTED_STACK.fastai}; or leave that engine out: --engines torch."))
    return out


def _torchvision_findings(tv: dict, torch_version: str) -> list[Finding]:
    want = torchvision_for(torch_version)
    version = str(tv.get("version") or tv.get("installed"))
    if want and want == f"torchvision=={version.split('+', 1)[0]}":  # the right one, damaged
        fix = f"Reinstall it: pip install --force-reinstall --no-deps {want}."
    elif want:
        fix = f"Install the torchvision built for torch {torch_version}: pip install {_quoted(want)}."
    else:
        fix = f"Install a pair that works together, the one the kit tests: pip install {tested_pair()}."
    if _missing(tv):
        return [Finding("error", "torchvision", f"torchvision is not installed; {NEEDED_FOR['torchvision']}", fix)]
    if tv.get("imports") is False:
        return [Finding("error", "torchvision", f"torchvision {version} does not import with torch {torch_version} "
                        f"({tv.get('error')}); {NEEDED_FOR['torchvision']}", fix)]
    if tv.get("imports") and pair_agrees(torch_version, version) is False:
        return [Finding("warning", "torchvision", f"torchvision {version} is not the release built for torch "
                        f"{torch_version}: it imports, but its operators may fail", fix)]
    return []


def _missing(found: dict) -> bool:
    """Not installed: no metadata, and no import either."""
    return found.get("installed") == NOT_INSTALLED and found.get("imports") is False


def _quoted(requirement: str) -> str:
    """A requirement as typed into a shell: quoted where it holds a wildcard."""
    return f"'{requirement}'" if "*" in requirement else requirement


def install_remedy() -> str:
    """How to install the benchmark stack natively (from the kit's clone), or not at all."""
    return ("Install it from the kit's clone: pip install '.[bench]' (on a machine without the PyTorch index, "
            f"the pinned pair first: pip install {tested_pair()}); or run in the kit's container instead: kit launch.")


def needed_for(cells: Iterable[Any]) -> tuple[str, ...]:
    """The packages a run's cells (CellSpecs) import: torch always, and what each cell's suite says
    it needs beyond (kit.results.suites: torchvision for CIFAR cells, fastai for the fastai engine's)."""
    from kit.results import suites

    needs = {"torch"}
    for spec in cells:
        found = suites.find(spec.workload)
        if found is not None and found.needs is not None:
            needs.update(found.needs(spec))
    return tuple(n for n in PACKAGES if n in needs)


def check_for_run(needs: Iterable[str], console: Any = None) -> None:
    """`kit run`'s check before anything is written: EnvironmentCheckError (exit 6) for the
    first package the run needs that does not import, with the fix; a warning for a pair the
    facts say does not agree but which imports."""
    needs = tuple(needs)
    found = findings(probe(needs), needs)
    for f in found:
        if f.severity in ("error", "info"):
            what = "The benchmark stack is broken" if f.severity == "error" else "kit run needs the benchmark stack"
            raise EnvironmentCheckError(f"{what}: {f.message}.", remedy=f.remedy)
    if console is not None:
        from rich.markup import escape

        for f in found:
            console.print(f"[yellow]warning:[/yellow] {escape(f.message)}. {escape(f.remedy)}", highlight=False)
