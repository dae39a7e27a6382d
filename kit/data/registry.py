"""The data sets: each one module (or package) under kit/data/sets/, described there, found here.

A data set is ``kit/data/sets/NAME.py`` (or a folder ``NAME/`` with an ``__init__``) whose ``DATASET``
is a :class:`DataSet`: its facts (file, checksums, mirrors, published sizes, with their sources:
kit.facts.datasets for the kit's own), its reader and its synthetic stand-in, what a download is
turned into (WikiText-2's zip is extracted), what the data folder may hold besides the verified
archive (a decoded cache, files placed by hand), and the checks of ``kit data verify``. `kit data
fetch/verify/info`, the provenance a run records (kit.data.service) and the data a run fetches read
these descriptors; nothing else lists data sets. A suite names the data sets it reads (its
descriptor's ``datasets``).

The descriptors are found at run time (:func:`all_datasets` imports each module of kit.data.sets), as
the suites are (kit.results.suites): a descriptor depends on this module, never the other way round.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, Sequence

from kit.errors import UsageError
from kit.facts.datasets import DatasetFacts


class DataSet(NamedTuple):
    #: its name (``kit data fetch NAME``), file, checksums, mirrors and published sizes
    facts: DatasetFacts
    #: what it is, for `kit data`'s help ("60,000 32x32 colour images in 100 classes")
    help: str
    #: the reader: ``load(data_dir, source="real"|"synthetic", seed=0, **kw)`` -> the data in memory
    #: (kit.data.forms), the synthetic stand-in when ``source`` says so
    load: Callable[..., Any]
    #: the synthetic stand-in's generator (same shapes, generated; its name goes into a run's provenance)
    synthetic: Callable[..., Any]
    #: ``kit data verify``'s checks past the archive's checksum: ``verify(folder, facts) -> [check]``
    #: (each {"check", "ok", "detail"}; DataError for a missing or altered file)
    verify: Callable[[Path, DatasetFacts], list]
    #: other names `kit data` takes for it ("cifar-100")
    aliases: tuple = ()
    #: what a verified download is turned into: ``prepare(folder, facts) -> Path`` (the folder it
    #: extracted), or None: the archive is read as it is
    prepare: Optional[Callable[[Path, DatasetFacts], Path]] = None
    #: what the data folder holds where the archive does not verify (a decoded cache, files placed by
    #: hand): ``present(folder, facts, verification, splits) -> dict`` of the provenance's fields to
    #: change, or {} (splits: the parts a run reads, None: all)
    present: Optional[Callable[[Path, DatasetFacts, Any, Optional[Sequence[str]]], dict]] = None
    #: before a run reads files placed by hand: ``check_placed(data_dir, splits)``, DataError (exit 3)
    #: for what the reader would refuse
    check_placed: Optional[Callable[[Any, Optional[Sequence[str]]], None]] = None


_FOUND: list = []


def all_datasets() -> tuple:
    """Every data set, by name: the descriptors of kit.data.sets' modules (imported once)."""
    if not _FOUND:
        sets = importlib.import_module("kit.data.sets")
        for info in sorted(pkgutil.iter_modules(sets.__path__), key=lambda i: i.name):
            described = getattr(importlib.import_module(f"kit.data.sets.{info.name}"), "DATASET", None)
            if isinstance(described, DataSet):
                if described.facts.name != info.name:
                    raise ValueError(f"kit/data/sets/{info.name} describes a data set named {described.facts.name!r}")
                _FOUND.append(described)
    return tuple(_FOUND)


def names() -> tuple:
    return tuple(d.facts.name for d in all_datasets())


def dataset(name: str) -> DataSet:
    """The data set ``name`` names: its name, an alias, or a suite that reads one data set
    (``kit data fetch lstm``); a UsageError (exit 2) for anything else."""
    key = name.lower().strip()
    for d in all_datasets():
        if key == d.facts.name or key in d.aliases:
            return d
    from kit.results import suites

    found = suites.find(key)
    if found is not None and len(found.datasets) == 1:
        return dataset(found.datasets[0])
    raise UsageError(f"unknown data set {name!r}; choose {' or '.join(names())}")


def generator_name(d: DataSet) -> str:
    """The synthetic stand-in's generator as a run's provenance names it."""
    return f"{d.synthetic.__module__}.{d.synthetic.__name__}"
