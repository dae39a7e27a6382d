"""Turn each `kit compare` argument into a Source: a bundle, a run folder or a results.json."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from kit.bundle.envinfo import EnvSummary, summarise_environment
from kit.bundle.inert import inert
from kit.compare.figures import RunFigures, run_figures
from kit.errors import KitError, UsageError
from kit.results.plausible import check_host_name, check_results as check_plausible
from kit.results.schema import RunResults


@dataclass(eq=False)  # one input: the same source is the same object (never compared field by field)
class Source:
    index: int
    label: str  # "A", "B", ... in the order given (baseline first)
    path: Path
    kind: str  # "bundle" | "run folder" | "results file" | "index"
    #: the run's results; None for a source from the index until a view asks for them (run_results)
    results: Optional[RunResults]
    environment: dict
    env: EnvSummary
    interrupted: bool
    #: what a comparison reads of the run (kit.compare.figures): computed from ``results`` when first
    #: asked for, or given (the index stores them)
    given_figures: Optional[RunFigures] = None
    #: reads the results of a source given without them (the index's copy of its results.json)
    load_results: Optional[Callable[[], RunResults]] = None

    def __repr__(self) -> str:
        """Short (pytest prints a failing comparison's operands with it; a run's results are thousands of lines)."""
        return f"Source({self.label}, {self.env.machine if self.env else '?'}, {self.kind}, {self.file_name})"

    @property
    def figures(self) -> RunFigures:
        if self.given_figures is None:
            self.given_figures = run_figures(self.run_results())
        return self.given_figures

    def run_results(self) -> RunResults:
        """The run's results (what the per-run charts draw): read now if the source was given without them."""
        if self.results is None:
            if self.load_results is None:
                raise ValueError(f"source {self.label} has neither results nor a way to read them")
            self.results = self.load_results()
        return self.results

    @property
    def short_name(self) -> str:
        return f"{self.env.machine}, {self.env.gpu}"

    @property
    def file_name(self) -> str:
        """The input's file name as the views show it (a file name is a stranger's text too)."""
        return inert(self.path.name)

    def describe(self) -> dict:
        return {
            "label": self.label,
            "path": str(self.path),
            "kind": self.kind,
            "run_id": self.figures.run_id,
            "interrupted": self.interrupted,
            **self.env.to_dict(),
        }


def _label(i: int) -> str:
    letters = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        letters = chr(65 + r) + letters
    return letters


def load_source(path: str | Path, index: int = 0) -> Source:
    from kit.bundle.export import load_run_folder
    from kit.bundle.safe_open import is_bundle_file, open_bundle
    from kit.results.schema import load_results

    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder.", remedy="Pass bundles (.tar.gz), run folders or results.json files.")
    if path.is_dir():
        folder = load_run_folder(path)
        results, env, kind, interrupted = folder.results, folder.environment, "run folder", folder.interrupted
        check_plausible(results, f"{inert(path.name)} (results)")
        check_host_name(env, f"{inert(path.name)} (env.json)")
    elif path.suffix == ".json" and not is_bundle_file(path):
        results = load_results(path)
        env, kind, interrupted = results.environment or {}, "results file", results.status != "complete"
        check_plausible(results, inert(path.name))
        check_host_name(env, inert(path.name))
    else:  # open_bundle checks the figures' bounds itself (kit bundle verify)
        bundle = open_bundle(path)
        results, env, kind, interrupted = bundle.results, bundle.environment, "bundle", bundle.interrupted
    summary = summarise_environment(env, results.config, results.cells)
    return Source(index, _label(index), path, kind, results, env, summary, interrupted)


@dataclass(frozen=True)
class Refused:
    """An input that could not be read (missing, corrupt, tampered, not the kit's), and why."""

    path: Path
    error: KitError

    @property
    def line(self) -> str:
        """One line: ``refused bad.tar.gz: not a gzip file ...`` (the error's own message, made inert)."""
        return " ".join(inert(f"refused {self.path}: {self.error.message}").split())

    @property
    def exit_code(self) -> int:
        return self.error.exit_code


def _ordered(paths: list[str | Path], baseline: str | None) -> list[Path]:
    """The inputs with the baseline first (``--baseline N`` 1-based, or a path; a baseline path
    not among ``paths`` is added); UsageError for too few inputs or one given twice."""
    paths = [Path(p) for p in paths]
    if baseline is not None and str(baseline).strip():
        b = str(baseline).strip()
        if b.isdigit():
            i = int(b)
            if not 1 <= i <= len(paths):
                n = len(paths)
                raise UsageError(f"--baseline {i}: there {'is' if n == 1 else 'are'} only {n} input{'s' if n != 1 else ''} "
                                 "(count from 1).")
            paths.insert(0, paths.pop(i - 1))
        else:
            bp = Path(b)
            match = next((p for p in paths if p.resolve() == bp.resolve()), None)
            if match is not None:
                paths.remove(match)
            paths.insert(0, bp)
    if len(paths) < 2:
        raise UsageError("compare needs at least two inputs (bundles, run folders or results.json files).")
    seen: set[Path] = set()
    for p in paths:
        rp = p.resolve()
        if rp in seen:
            raise UsageError(f"{p} is given twice.")
        seen.add(rp)
    return paths


def load_sources(paths: list[str | Path], baseline: str | None = None) -> list[Source]:
    """Load every argument; the baseline (``--baseline N`` 1-based, or a path)
    is moved first and labelled A. The first input that cannot be read raises its error."""
    return [load_source(p, i) for i, p in enumerate(_ordered(paths, baseline))]


def load_sources_keep_going(paths: list[str | Path], baseline: str | None = None) -> tuple[list[Source], list[Refused]]:
    """Load every argument as :func:`load_sources` does, but an input that cannot be read (a
    corrupt, tampered or hostile bundle among many) is refused with its reason and the rest are
    loaded, labelled A, B, ... in order with the refused left out. Raises the baseline's own error
    when the baseline is refused (the comparison is relative to it), and the first refused input's
    error when fewer than two inputs remain."""
    sources: list[Source] = []
    refused: list[Refused] = []
    for i, p in enumerate(_ordered(paths, baseline)):
        try:
            sources.append(load_source(p, len(sources)))
        except KitError as exc:
            if i == 0:
                raise
            refused.append(Refused(p, exc))
    if len(sources) < 2 and refused:
        raise refused[0].error
    return sources, refused


def older_reference_note(name: str, source: Source) -> str | None:
    """`kit compare --against NAME`: where the shipped reference ``source`` was measured by an older
    method (cells that do not record how they were measured: kit.results.method's "method unknown"),
    the line that says so, with the references whose cells all record it; None where every cell of
    it does."""
    import time

    from kit.bundle.merge import reference_bundles, reference_roots
    from kit.bundle.safe_open import open_bundle

    cells = [c for c in source.figures.cells if c.ok]
    unknown = sum(c.method is None for c in cells)
    if not unknown:
        return None
    when = source.results.started_at if source.results is not None else None
    made = f"kit {source.env.kit_version}" + (f" on {time.strftime('%Y-%m-%d', time.gmtime(when))}" if when else "")
    others = []
    for other in sorted({p.parent.name for r in reference_roots() if r.is_dir() for p in r.glob("*/*.tar.gz")} - {name}):
        try:
            ok = [c for b in reference_bundles(other) for c in open_bundle(b).results.cells if c.status == "ok"]
        except KitError:  # a reference that does not open is not named
            continue
        if ok and all(c.method for c in ok):
            others.append(other)
    return (f"The {name} reference is an older measurement, made by an older method: {made}, before cells "
            f"recorded how they were measured ({unknown} of its {len(cells)} measured cells are method unknown), so "
            "its cells are left out of the ratios against bundles that record it (--allow-method-change shows them, "
            "marked)." + (f" Measured by a kit that records its method: {', '.join(f'--against {o}' for o in others)}."
                          if others else ""))
