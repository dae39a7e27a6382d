"""Merge bundles measured on one machine into one bundle.

A benchmark session is often several `kit run`s (one per workload, say);
sharing and comparing is easier with one bundle. Merging is refused unless
every input was measured on the same machine (same host id, GPUs and driver),
the same kit and schema, and no cell appears twice. The merged results keep
every cell as measured; the environment lists the merged bundles (name,
command line and sha256 of each manifest) under ``merged_from`` and the
settings the runs did not share under ``merged_config_differs``; the config is
the union of the runs' (see :func:`merged_config`), and the journals are
concatenated in input order (kept as a record; the merged bundle is built from
the merged results, never by replaying the journals).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import fields
from pathlib import Path
from typing import Callable, Iterable, Optional

from kit.bundle.export import Renderer, RunFolder, _tail, write_bundle
from kit.bundle.safe_open import MANIFEST_NAME, open_bundle
from kit.env import record as env_record
from kit.errors import UsageError
from kit.results.derive import derive
from kit.results.journal import JOURNAL_NAME
from kit.results.run_files import ENV_NAME, LOG_NAME
from kit.results.schema import RunConfig, RunResults

#: a run config -> the cell ids it plans (kit.runner.plan; passed in from above, the runner's layer)
Planner = Callable[[RunConfig], Iterable[str]]


def merged_config(configs: list[RunConfig]) -> tuple[RunConfig, dict]:
    """The config of a merged bundle: the union of what the source runs asked for, and
    the fields the runs set differently (per source, in input order). A field that
    differs and may be empty (steps, epochs, ...) is left empty; the others keep the
    first run's value. Each cell's own ``params`` stay the record of how it was run,
    and ``environment.merged_from`` holds each run's command line."""
    optional = {f.name for f in fields(RunConfig) if f.default is None}
    dicts = [c.to_dict() for c in configs]
    d = dicts[0]
    differs: dict[str, list] = {}
    for name, value in d.items():
        if name in ("command_line", "suite_options"):
            continue
        values = [c[name] for c in dicts]
        if isinstance(value, list):  # precisions, engines: first-seen order
            d[name] = list(dict.fromkeys(v for vs in values for v in vs))
        elif any(v != value for v in values):
            differs[name] = values
            if name == "suite":
                d[name] = "all"
            elif name in optional:
                d[name] = None
    # each suite's own options: a list the union of the runs', any other the first run's (of the runs
    # that measured the suite), and where those differ, each run's in differs as "suite_options.SUITE.NAME"
    own: dict = {}
    for suite in dict.fromkeys(name for c in dicts for name in c.get("suite_options", {})):
        runs = [c["suite_options"][suite] for c in dicts if suite in c.get("suite_options", {})]
        own[suite] = dict(runs[0])
        for name, value in runs[0].items():
            values = [r.get(name) for r in runs]
            if isinstance(value, list):
                own[suite][name] = list(dict.fromkeys(v for vs in values if isinstance(vs, list) for v in vs))
            elif any(v != value for v in values):
                differs[f"suite_options.{suite}.{name}"] = values
    d["suite_options"] = own
    d["command_line"] = []
    return RunConfig.from_dict(d), differs


def _identity(env: dict, same_model: bool = False) -> dict:
    """What must match for bundles to be merged: the machine (host, each GPU's UUID,
    driver), or with ``same_model`` only the GPU models (which models, not how many the
    host has: a cell runs on the GPUs it names, and merged_from keeps each source's) and
    the driver."""
    nvml = env.get("nvml") or {}
    gpus = env_record.gpu_records(env)
    if gpus is None:
        models = None
    elif same_model:
        models = env_record.gpu_models(env)
    else:
        models = [g.get("uuid") or g.get("name") for g in gpus]
    ident = {
        "gpus": models,
        "driver": nvml.get("driver_version") if isinstance(nvml, dict) else None,
    }
    if not same_model:
        ident["host_id"] = env_record.host_id_of(env)
    return ident


def merged_status(bundles: list, cells: list, planned: Optional[Planner] = None) -> str:
    """"complete" when every source run is, or when each source run that did not end complete
    (cut short, then finished by another run: a batch curve's last points measured in a run of
    their own) planned only cells that some source measured; otherwise "interrupted".
    ``planned(config)`` gives a config's cell ids as today's kit plans them (kit.runner.plan, passed
    in by the callers above it), so that they match the cells' own ids, computed when read; without
    it, or for a config that no longer plans, an unfinished source leaves the merge interrupted.
    ``environment.merged_from`` keeps each source's own status either way."""
    measured = {c.cell_id for c in cells}
    for b in bundles:
        if b.results.status == "complete":
            continue
        if planned is None:
            return "interrupted"
        try:
            ids = set(planned(b.results.config))
        except (KeyError, TypeError, ValueError, UsageError):  # a config today's kit cannot plan: be conservative
            return "interrupted"
        if not ids or not ids <= measured:
            return "interrupted"
    return "complete"


def _sources_of(b) -> list[dict]:
    """``merged_from`` entries for one source bundle: itself, or, for a bundle that is itself a
    merge (the shipped reference), the runs it was merged from, each marked ``via`` that bundle,
    so that merging again keeps every run's record."""
    inner = env_record.merged_sources(b.environment)
    if inner:
        return [dict(e, via=e["via"] or b.path.name) for e in inner]
    return [
        {"bundle": b.path.name, "run_id": b.results.run_id, "status": b.results.status,
         "device": b.environment.get("run_device"),
         "gpu_uuids": [g.get("uuid") for g in (env_record.gpu_records(b.environment) or [])],
         "host_id": env_record.host_id_of(b.environment),
         "command_line": b.results.config.command_line,
         # a resumed source run's earlier sessions (kit.env.record.keep_earlier_session), each with its cells
         "earlier_sessions": [env_record.session_summary(s) for s in b.environment.get("earlier_sessions") or []
                              if isinstance(s, dict)],
         "manifest_sha256": hashlib.sha256(b.files["manifest.json"]).hexdigest() if "manifest.json" in b.files else None,
         # which cells the run measured, and its own calibration: each merged cell's ceilings and
         # efficiency come from the run that measured it (kit.results.ceilings.calibration_for)
         "cells": [c.cell_id for c in b.results.cells],
         **env_record.calibration_records(b.environment)}
    ]


def _refuse_twice(paths: list[Path]) -> None:
    """A UsageError (exit 2) when one bundle file is given twice (the same path, or two paths to one file)."""
    for i, p in enumerate(paths):
        for q in paths[:i]:
            try:
                same = p.resolve() == q.resolve() or os.path.samefile(p, q)
            except OSError:  # one does not exist: open_bundle says so
                same = False
            if same:
                given = f"{q}" if str(p) == str(q) else f"{q} and {p}"
                raise UsageError(f"the same bundle was given twice ({given}); merging it with itself would count its "
                                 "cells twice.", remedy="Give each bundle once.")


def _refuse_copies(bundles: list) -> None:
    """A UsageError (exit 2) when two of the bundles are copies of one (the same manifest, byte for byte)."""
    seen: dict[str, str] = {}
    for b in bundles:
        manifest = b.files.get(MANIFEST_NAME)
        if manifest is None:
            continue
        digest = hashlib.sha256(manifest).hexdigest()
        if digest in seen:
            raise UsageError(f"the same bundle was given twice: {b.path.name} is a copy of {seen[digest]} (the same "
                             "manifest, so the same files); merging it with itself would count its cells twice.",
                             remedy="Give each bundle once.")
        seen[digest] = b.path.name


def merge_bundles(paths: list[Path], out_dir: Path, same_model: bool = False, *, render: Renderer,
                  planned: Optional[Planner] = None) -> Path:
    """One bundle from several. By default they must come from one machine; with
    ``same_model`` from machines with the same GPU models and driver (e.g. two hosts
    of one cloud instance type), and ``environment.merged_from`` says which GPU
    (UUID and device) measured each source bundle. ``planned``: see :func:`merged_status`."""
    # Bundles that cannot be merged are bad arguments (exit 2); a bundle that fails
    # its checks is refused by open_bundle (exit 5, or 4 when malformed).
    if len(paths) < 2:
        raise UsageError("give at least two bundles to merge")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir} is a file, not a folder.")
    _refuse_twice([Path(p) for p in paths])
    bundles = [open_bundle(p) for p in paths]
    _refuse_copies(bundles)
    first = bundles[0]
    ident = _identity(first.environment, same_model)
    seen: dict[str, str] = {}
    for b in bundles:
        if _identity(b.environment, same_model) != ident:
            what = "GPU models or driver" if same_model else "machine or driver"
            raise UsageError(
                f"{b.path.name} was measured on another {what} than {first.path.name} "
                f"({_identity(b.environment, same_model)} vs {ident}); only bundles of one "
                + ("GPU model and driver" if same_model else "machine") + " can be merged.",
                remedy="Compare them instead: kit compare A B"
                + ("" if same_model else " (or, for identical GPUs on another host, kit bundle merge --same-model)"),
            )
        if b.results.kit_version != first.results.kit_version:
            raise UsageError(f"{b.path.name} was written by kit {b.results.kit_version}, {first.path.name} by "
                              f"{first.results.kit_version}; merge bundles of one kit version only.")
        for c in b.results.cells:
            if c.cell_id in seen:
                raise UsageError(f"cell {c.cell_id} is in both {seen[c.cell_id]} and {b.path.name}; merging would hide one.")
            seen[c.cell_id] = b.path.name
    env = dict(first.environment)
    env.pop("earlier_sessions", None)  # the first source's alone; merged_from keeps every source's
    if same_model:
        env["merged_across_machines"] = ("cells come from more than one machine with the same GPU model and driver; "
                                         "merged_from names the GPUs of each source bundle")
    env["merged_from"] = [entry for b in bundles for entry in _sources_of(b)]
    config, differs = merged_config([b.results.config for b in bundles])
    if differs:
        env["merged_config_differs"] = differs
    cells = [c for b in bundles for c in b.results.cells]
    merged = RunResults(
        run_id=f"merged-{time.strftime('%Y%m%d-%H%M%S')}",
        config=config,
        environment=env,
        cells=cells,
        status=merged_status(bundles, cells, planned),
        started_at=min((b.results.started_at or 0) for b in bundles) or None,
        finished_at=max((b.results.finished_at or 0) for b in bundles) or None,
    )
    # a stranger's env.json: derive reads its calibrations only through kit.results.ceilings' number test
    merged.derived = derive(cells, config.mode, config.tolerance, env)
    # The bundle is built from the merged results directly: the sources' journals are kept
    # as a record, never replayed (a journal's cell_end events must not add cells that the
    # source's results.json does not hold).
    raw = {
        ENV_NAME: (json.dumps(env, indent=2) + "\n").encode("utf-8"),
        JOURNAL_NAME: _tail(b"".join(b.files[JOURNAL_NAME] for b in bundles if JOURNAL_NAME in b.files)),
        LOG_NAME: _tail("".join(f"==> {b.path.name}\n" + (b.text(LOG_NAME) if LOG_NAME in b.files else "")
                                for b in bundles).encode("utf-8")),
    }
    folder = RunFolder(path=Path(merged.run_id), results=merged, environment=env, raw=raw)
    return write_bundle(folder, Path(out_dir), render)


def reference_roots() -> list[Path]:
    """Where shipped references live: inside the installed package (a wheel carries
    them as ``kit/_references/``, see setup.py), then the source checkout's
    ``references/`` (the one copy in the repository). Never the current folder."""
    package = Path(__file__).resolve().parents[1]
    roots = [package / "_references"]
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "references").is_dir():
        roots.append(checkout / "references")
    return roots


def reference_bundles(name: str) -> list[Path]:
    """The shipped reference bundle(s) called ``name`` (e.g. "h200"), from any folder."""
    roots = reference_roots()
    if name and "/" not in name and "\\" not in name and name not in (".", ".."):
        for root in roots:
            found = sorted((root / name).glob("*.tar.gz"))
            if found:
                return found
    known = sorted({p.parent.name for r in roots if r.is_dir() for p in r.glob("*/*.tar.gz")})
    raise UsageError(f"no reference called {name!r}" + (f"; known: {', '.join(known)}" if known else "; none is installed"),
                     remedy="See references/ in the kit's repository, or compare with a bundle path instead.")
