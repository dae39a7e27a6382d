"""The comparability warnings: what makes two machines' numbers hard to compare, most severe first.

Differences of device, host load, image stack, library versions, data source and parameters; the
same run given twice; throttling and noisy repeats; interrupted runs, unrecorded facts and kit
versions. Each message quotes a bundle's text made inert. :func:`warnings_for` is what
:func:`kit.compare.engine.build_comparison` lists under ``Comparison.warnings``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.bundle.inert import inert
from kit.compare.load import Source
from kit.results import suites
from kit.results.method import join_labels

#: Severity ranks (lower = more severe) and their names, in the order the
#: warnings are shown.
HIGH, MEDIUM, LOW = "high", "medium", "low"
_RANK = {
    "method": (0, HIGH),
    "group methods": (3, MEDIUM),
    "device": (0, HIGH),
    "busy": (0, HIGH),
    "same run": (0, HIGH),
    "stack": (1, HIGH),
    "libraries": (2, HIGH),
    "data": (3, MEDIUM),
    "params": (4, MEDIUM),
    "throttled": (5, MEDIUM),
    "noisy": (6, LOW),
    "interrupted": (7, LOW),
    "unknown": (8, LOW),
    "kit": (9, LOW),
}


@dataclass(frozen=True)
class CompareWarning:
    kind: str
    message: str

    @property
    def rank(self) -> int:
        return _RANK.get(self.kind, (99, LOW))[0]

    @property
    def severity(self) -> str:
        return _RANK.get(self.kind, (99, LOW))[1]

    def to_dict(self) -> dict:
        return {"severity": self.severity, "kind": self.kind, "message": self.message}


def _differs(sources: list[Source], attr: str) -> dict[str, list[str]] | None:
    values: dict[str, list[str]] = {}
    for s in sources:
        values.setdefault(getattr(s.env, attr), []).append(s.label)
    known = {v for v in values if v != "unknown"}
    return values if len(known) > 1 else None


def _measured_with(sources: list[Source], rows: list, package: str) -> list[Source]:
    """The sources that measured (ok) at least one compared cell which imports ``package`` (its
    suite's ``needs``): a package's version shapes only the figures of the cells that use it."""
    def imports(row) -> bool:
        found = suites.find(row.workload)
        return bool(found is not None and found.needs is not None and package in found.needs(row))

    used = [row for row in rows if imports(row)]
    return [s for i, s in enumerate(sources)
            if any(row.machines[i] is not None and row.machines[i].status == "ok" for row in used)]


def _fmt_values(values: dict[str, list[str]]) -> str:
    return ", ".join(f"{join_labels(labels)} {v}" for v, labels in values.items())


def _same_runs(sources: list[Source]) -> list[CompareWarning]:
    """Inputs that are copies of one run (same run id): they agree by construction."""
    by_run: dict[str, list[Source]] = {}
    for s in sources:
        rid = str(s.figures.run_id or "")
        if rid and rid != "unknown":
            by_run.setdefault(rid, []).append(s)
    out = []
    for rid, same in by_run.items():
        if len(same) > 1:
            names = " and ".join(f"{s.label} ({s.file_name})" for s in same)
            out.append(CompareWarning(
                "same run", f"{names} are the same run (run id {rid}): their numbers agree by construction, "
                "so this comparison says nothing about machines or changes."))
    return out


def _busy_hosts(sources: list[Source]) -> list[CompareWarning]:
    """Cells measured while the host was busy (load average past its cores, CPU steal;
    kit.env.hostload's thresholds, applied to the recorded numbers): their times include
    waiting, so a gap may be the load, not the machine or its image stack. One line, naming every
    input it holds for, however many they are."""
    hits = []
    for s in sources:
        busy = [(c.cell_id, c.busy) for c in s.figures.cells if c.ok and c.busy]
        if busy:
            hits.append((s, busy))
    if not hits:
        return []
    tail = ("their times include waiting for the CPU, so a gap may be the load, not the machine or its image "
            "stack; measure again on a quiet host.")
    if len(hits) == 1:
        s, busy = hits[0]
        shown = "; ".join(f"{inert(cid)}: {why}" for cid, why in busy[:2]) + ("; ..." if len(busy) > 2 else "")
        return [CompareWarning("busy", f"{s.label}: the host was busy during {len(busy)} cell(s) ({shown}): {tail}")]
    cells = sum(len(b) for _, b in hits)
    s, busy = hits[0]
    return [CompareWarning("busy", f"{len(hits)} inputs ({'+'.join(s.label for s, _ in hits)}): the host was busy during "
                                   f"{cells} cells in all (e.g. {s.label}: {inert(busy[0][0])}: {busy[0][1]}): {tail}")]


def _ranked_texts(changes: list[tuple[str, str]]) -> tuple[str, str]:
    """The two most common texts of ``changes`` ((cell id, text)), each with its first cell and how
    many more, and how many other kinds there are (in --json)."""
    by_text: dict[str, list[str]] = {}
    for cid, text in changes:
        by_text.setdefault(text, []).append(cid)
    ranked = sorted(by_text.items(), key=lambda kv: -len(kv[1]))
    shown = "; ".join(f"{cids[0]}{f' and {len(cids) - 1} more' if len(cids) > 1 else ''}: {text}"
                      for text, cids in ranked[:2])
    rest = len(ranked) - 2
    return shown, f" ({rest} more kind{'s' if rest != 1 else ''} of difference in --json)" if rest > 0 else ""


def _group_methods(changes: list[tuple[str, str]], group_by: str | None, baseline: str) -> list[CompareWarning]:
    """One MEDIUM line for the cells whose groups (``--group-by``) measured them by different methods:
    each group is judged within itself, and no machine gets a ratio to the baseline across methods."""
    if not changes:
        return []
    shown, more = _ranked_texts(changes)
    return [CompareWarning("group methods", f"the {group_by} groups measured {len(changes)} cell(s) by different "
                                            f"methods: {shown}{more}; each group is compared within itself, and a "
                                            f"machine measured otherwise than {baseline} gets no ratio to it.")]


def _methods(changes: list[tuple[str, str]], allowed: bool) -> list[CompareWarning]:
    """One HIGH line for the cells whose machines measured them by different methods
    (kit.results.method.method_change's words, the most common first)."""
    if not changes:
        return []
    shown, more = _ranked_texts(changes)
    fate = ("kept by --allow-method-change, each ratio marked \"method differs\"" if allowed else
            "left out of the ratios and findings (--allow-method-change compares them, marked)")
    return [CompareWarning("method", f"different method in {len(changes)} cell(s): {shown}{more}; {fate}. "
                                     "A figure from another engine revision or setting measures the method too "
                                     "(docs/compare.md, \"How each cell was measured\").")]


def _mixed_data(sources: list[Source], rows: list) -> list[CompareWarning]:
    """Real and synthetic data mixed, where the inputs' measured cells used both."""
    out: list[CompareWarning] = []
    data_by_source: dict[str, set[str]] = {}
    for s, idx in zip(sources, range(len(sources))):
        flags = set()
        for row in rows:
            mc = row.machines[idx]
            if mc and mc.status == "ok":
                flags.add(mc.data_source)
        data_by_source[s.label] = flags or {s.env.data_source}
    kinds = set().union(*data_by_source.values()) - {"unknown"}
    if {"real", "synthetic"} <= kinds:
        if len(data_by_source) <= 6:
            desc = ", ".join(f"{label} {'+'.join(sorted(v))}" for label, v in data_by_source.items())
        else:  # a fleet: the inputs grouped by what they used
            by_kind: dict[str, list[str]] = {}
            for label, v in data_by_source.items():
                by_kind.setdefault("+".join(sorted(v)), []).append(label)
            desc = _fmt_values(by_kind)
        out.append(CompareWarning("data", f"real and synthetic data are mixed ({desc}): loader costs differ; compare throughput with care."))
    return out


def _params_differ(sources: list[Source], rows: list) -> list[CompareWarning]:
    """A parameter (batch size, image size, ...) that differs between the machines of a cell."""
    out: list[CompareWarning] = []
    # each row's machines' params, where they are not all equal (mostly they are: one dict comparison)
    differing = []
    for row in rows:
        ps = [mc.params or {} for mc in row.machines if mc and mc.status == "ok"]
        if any(p != ps[0] for p in ps):
            differing.append((row, ps))
    for param in ("batch_size", "image_size", "steps", "bptt", "learner"):
        diff_cells = []
        for row, ps in differing:
            vals = {p.get(param) for p in ps}
            if len(vals) > 1:
                diff_cells.append(row.cell_id)
        if diff_cells:
            example = diff_cells[0]
            row = next(r for r in rows if r.cell_id == example)
            pairs = [(s.label, mc.params.get(param)) for s, mc in zip(sources, row.machines) if mc and mc.status == "ok"]
            if len(pairs) <= 6:
                detail = ", ".join(f"{label} {v}" for label, v in pairs)
            else:  # a fleet: the inputs grouped by the value
                by_value: dict[str, list[str]] = {}
                for label, v in pairs:
                    by_value.setdefault(str(v), []).append(label)
                detail = _fmt_values(by_value)
            more = f" and {len(diff_cells) - 1} more" if len(diff_cells) > 1 else ""
            out.append(CompareWarning("params", f"different {param} in {example} ({detail}){more}: these cells measure different work."))
    return out


def _flagged(sources: list[Source], rows: list) -> list[CompareWarning]:
    """The inputs whose cells throttled, or whose repeats varied by 10% or more."""
    out: list[CompareWarning] = []
    for flag, kind, text in (("throttled", "throttled", "the GPU throttled (power or thermal) during"), ("high ", "noisy", "repeats varied by 10% or more (epoch-time or throughput CV) in")):
        flagged = []
        for s, idx in zip(sources, range(len(sources))):
            hits = [r.cell_id for r in rows
                    if r.machines[idx] and r.machines[idx].flags and any(f.startswith(flag) for f in r.machines[idx].flags)]
            if hits:
                more = f" and {len(hits) - 3} more" if len(hits) > 3 else ""
                flagged.append((s.label, hits, CompareWarning(kind, f"{s.label}: {text} {', '.join(hits[:3])}{more}.")))
        if len(flagged) <= 6:
            out.extend(w for _, _, w in flagged)
        else:  # a fleet: one line for all of them (each input's flags are in --json and --csv)
            cells = sum(len(h) for _, h, _ in flagged)
            out.append(CompareWarning(kind, f"{len(flagged)} inputs ({join_labels([label for label, _, _ in flagged])}): "
                                            f"{text} {cells} cells in all (--csv lists each input's flags)."))
    return out


def _interrupted(sources: list[Source]) -> list[CompareWarning]:
    """The inputs from interrupted runs."""
    out: list[CompareWarning] = []
    interrupted = [s for s in sources if s.interrupted]
    if len(interrupted) == 1:
        s = interrupted[0]
        out.append(CompareWarning("interrupted", f"{s.label} ({s.file_name}) is from an interrupted run: some cells may be missing."))
    elif interrupted:
        out.append(CompareWarning("interrupted", f"{len(interrupted)} inputs ({'+'.join(s.label for s in interrupted)}) "
                                                 "are from interrupted runs: some cells may be missing."))
    return out


def _unrecorded(sources: list[Source]) -> list[CompareWarning]:
    """The inputs that did not record their stack, torch version or GPU."""
    out: list[CompareWarning] = []
    unknown: dict[str, list[str]] = {}
    for s in sources:
        missing = [what for what, v in (("stack", s.env.stack), ("torch version", s.env.torch), ("GPU", s.env.gpu)) if v == "unknown"]
        if missing:
            unknown.setdefault(", ".join(missing), []).append(s.label)
    for what, labels in unknown.items():
        who = labels[0] if len(labels) == 1 else f"{len(labels)} inputs ({'+'.join(labels)})"
        verb = "does" if len(labels) == 1 else "do"
        out.append(CompareWarning("unknown", f"{who} {verb} not record {'its' if len(labels) == 1 else 'their'} {what}; "
                                             "comparability cannot be fully checked."))
    return out


def warnings_for(sources: list[Source], rows: list, method_changes: list[tuple[str, str]] = (),
                 allow_method_change: bool = False, group_by: str | None = None,
                 group_methods: list[tuple[str, str]] = ()) -> list[CompareWarning]:
    """The warnings for a comparison of ``sources`` whose rows (kit.compare.engine.Row) are ``rows``;
    ``method_changes``: (cell id, what differs) where the machines' methods differ (within a group,
    with ``group_by``); ``group_methods``: (cell id, each group's method) where the groups' differ."""
    cpu = [s for s in sources if s.env.gpu == "CPU only"]
    gpu = [s for s in sources if s.env.gpu not in ("CPU only", "unknown")]
    out: list[CompareWarning] = _methods(list(method_changes), allow_method_change)
    out += _group_methods(list(group_methods), group_by, sources[0].label)
    if cpu and gpu:  # shown first: every other difference follows from it
        out.append(CompareWarning("device", f"{', '.join(s.label for s in cpu)} ran on a CPU, "
                                            f"{', '.join(s.label for s in gpu)} on a GPU: the numbers measure different "
                                            "hardware (a CPU run is a smoke test, not a GPU result)."))
    out += _busy_hosts(sources)
    out += _same_runs(sources)
    for attr, what in (("stack", "image stack"), ("image", "container image")):
        d = _differs(sources, attr)
        if d:
            out.append(CompareWarning("stack", f"different {what}: {_fmt_values(d)}; differences include the software, not only the hardware."))
    on_gpu = [s for s in sources if s not in cpu]  # a run that used no GPU used no cuDNN or CUDA (torch was only built with them)
    for attr, what, pool in (("torch", "torch", sources), ("cudnn", "cuDNN", on_gpu),
                             ("fastai", "fastai", _measured_with(sources, rows, "fastai")), ("cuda", "CUDA", on_gpu)):
        d = _differs(pool, attr)
        if d:
            out.append(CompareWarning("libraries", f"different {what} versions: {_fmt_values(d)}."))
    out += _mixed_data(sources, rows)
    out += _params_differ(sources, rows)
    out += _flagged(sources, rows)
    out += _interrupted(sources) + _unrecorded(sources)
    d = _differs(sources, "kit_version")
    if d:
        out.append(CompareWarning("kit", f"made by different kit versions: {_fmt_values(d)}."))
    # a message quotes a bundle's text (cell ids, parameters): inert, whatever view prints it
    return sorted((CompareWarning(w.kind, inert(w.message)) for w in out), key=lambda w: w.rank)
