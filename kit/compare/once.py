"""Each run counted once: the inputs of a comparison that are the same run, reduced to one.

Two inputs with the same run id are one run: the same bundle under two names (identical content),
or a run's ``X.interrupted.tar.gz`` beside the bundle its resume completed. Counted twice, the copy
would sit in its own group's pool ("51% below the other 26 machines" would include its own copies)
and weigh twice in every median. So, before a comparison is built:

- of inputs with the same run id and identical content (results and environment), the first is kept;
- an interrupted input is superseded by a complete input of the same run id and left out;

each with one line saying so (:attr:`kit.compare.engine.Comparison.counted_once`). Inputs with the
same run id and different content that neither rule covers stay, and the comparability warnings
say they are the same run.
"""

from __future__ import annotations

import hashlib
import json

from kit.compare.load import Source, _label


def _content(src: Source) -> str:
    """A fingerprint of what the input holds: its results and environment, as JSON with sorted keys."""
    text = json.dumps([src.run_results().to_dict(), src.environment], sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def count_once(sources: list[Source]) -> tuple[list[Source], list[str]]:
    """The inputs with each run once (the baseline first, as given, or the complete run that
    supersedes it), relabelled A, B, ... in order where any was left out; and one line per input left out."""
    by_run: dict[str, list[Source]] = {}
    for s in sources:
        rid = str(s.figures.run_id or "")
        if rid and rid != "unknown":
            by_run.setdefault(rid, []).append(s)
    dropped: dict[int, Source] = {}  # id(left out) -> the input kept in its place
    lines = []
    for rid, same in by_run.items():
        if len(same) < 2:
            continue
        complete = [s for s in same if not s.interrupted]
        for s in same:
            if s.interrupted and complete:
                dropped[id(s)] = complete[0]
                lines.append(f"{s.file_name} is superseded by {complete[0].file_name}: the same run (run id {rid}), "
                             "resumed to completion; left out.")
        kept: dict[str, Source] = {}
        for s in same:
            if id(s) in dropped:
                continue
            fp = _content(s)
            if fp in kept:
                dropped[id(s)] = kept[fp]
                lines.append(f"{s.file_name} is the same input as {kept[fp].file_name} (run id {rid}, identical "
                             "content): counted once.")
            else:
                kept[fp] = s
    if not dropped:
        return sources, []
    out = [s for s in sources if id(s) not in dropped]
    first = sources[0]
    if id(first) in dropped:  # the baseline's place goes to the input that stands for it
        stand_in = dropped[id(first)]
        out.remove(stand_in)
        out.insert(0, stand_in)
    for i, s in enumerate(out):
        s.index, s.label = i, _label(i)
    return out, lines
