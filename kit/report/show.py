"""What `kit bundle show` and `kit bundle verify` print about a bundle."""

from __future__ import annotations

from kit.bundle.envinfo import summarise_environment
from kit.bundle.inert import inert
from kit.bundle.safe_open import MANIFEST_NAME, Bundle
from kit.compare import measures
from kit.compare.stats import ONE_REPEAT
from kit.errors import UsageError
from kit.results.curve import KNEE_DEFINITION, curves, fmt_knee, point_parts
from kit.results.method import UNKNOWN, method_of
from kit.results.ratios import EPOCH_S, THROUGHPUT, fmt_speedup
from kit.results.cell_ids import cell_learner, key_of, matches


def escape(text: object) -> str:
    """A bundle's text for a rich console: inert (no escape sequence or control character reaches the
    terminal, kit.bundle.inert) and escaped (no rich markup)."""
    from rich.markup import escape as markup_escape

    return markup_escape(inert(text))


#: what the s/epoch column is: the wall time of an epoch, not the steady state the throughput is of
EPOCH_NOTE = "s/epoch: wall time, warm-up included"


def verify_lines(bundle: Bundle) -> list[str]:
    """The checks a bundle passed, one line each (printed by `kit bundle verify`)."""
    m = bundle.manifest
    listed = m.get("files", {})
    total = sum(len(d) for d in bundle.files.values())
    ok = sum(c.status == "ok" for c in bundle.results.cells)
    lines = [
        f"archive: {len(bundle.files)} regular files, {total:,} bytes, no links, devices or unsafe paths",
        f"{MANIFEST_NAME}: bundle format {m.get('bundle_format', '?')}, results schema v{m.get('schema_version')}, "
        f"made by kit {m.get('kit_version', 'unknown')} at {m.get('created_at', 'unknown')}",
        f"sha256 and size match the manifest for all {len(listed)} listed files; no unlisted files",
        f"results.json: schema v{bundle.results.schema_version}, run {bundle.results.run_id}, "
        f"status {bundle.results.status}, {len(bundle.results.cells)} cells ({ok} ok)",
    ] + (["note: the run was interrupted; some cells were never measured"] if bundle.interrupted else [])
    return [inert(line) for line in lines]  # the manifest's and results' fields are a stranger's text


def run_status(bundle: Bundle) -> str:
    """The run's state as `kit bundle show` says it: "interrupted" (or "failed"), "complete", or
    "complete, resumed from <the interrupted session's bundle>" (the manifest's resumed_from;
    without those, how often the journal says it was resumed). Bundle text made inert."""
    from kit.bundle.inert import inert
    from kit.errors import KitError
    from kit.results.journal import JOURNAL_NAME, parse_journal

    status = bundle.results.status
    if status != "complete" or bundle.interrupted:
        return inert(status if status != "complete" else "interrupted")
    earlier = [inert(n) for n in bundle.manifest.get("resumed_from") or [] if isinstance(n, str)]
    if earlier:
        return "complete, resumed from " + ", ".join(earlier)
    try:
        resumes = sum(1 for e in parse_journal(bundle.files.get(JOURNAL_NAME, b""), JOURNAL_NAME)
                      if e.get("event") == "note" and e.get("resumed") is True)
    except KitError:
        resumes = 0
    return f"complete, resumed {resumes} time{'s' if resumes > 1 else ''}" if resumes else "complete"


def engine_revisions(cells: list) -> str:
    """``cifar/torch r6, lstm/kit r1``: the engines and revisions that measured the run's cells
    (kit.results.method), or that the run recorded none."""
    measured = [c for c in cells if c.status == "ok"]
    seen = dict.fromkeys(f"{m['engine']} r{m['revision']}" for m in map(method_of, measured) if m is not None)
    if seen:
        return ", ".join(seen) + " (each cell's settings: results.json, method)"
    return UNKNOWN if measured else "no cell measured"


def no_cell_matches(bundle_name: str, patterns: list[str], what: str = "cell") -> UsageError:
    """The error of a ``--cell`` that matches nothing (`kit bundle show`, `kit explain`)."""
    return UsageError(f"--cell {' --cell '.join(patterns)}: no {what} of {bundle_name} matches.",
                      remedy="`kit bundle show BUNDLE` lists the cells; --cell takes a shell pattern such as "
                             "'cifar/resnet18/*' and may be given again.")


def print_show(bundle: Bundle, console, patterns: list[str] | None = None) -> None:
    """The headline, then the cells (those matching any of ``patterns``: shell patterns on the cell id,
    the batch curves on their name; UsageError where none matches) with their speedups over fp32."""
    res = bundle.results
    shown = [c for c in res.cells if matches(c.cell_id, patterns)]
    if not shown and patterns:
        raise no_cell_matches(bundle.path.name, patterns)
    _print_headline(bundle, console)
    ratios = measures.speedup_vs_fp32(res)
    units = sorted({c.throughput_unit for c in res.cells if c.status == "ok" and c.throughput_unit})
    ok = {key_of(c): c for c in res.cells if c.status == "ok"}
    busy = [c for c in ok.values() if measures.host_busy(c)]
    if busy:
        console.print(f"[yellow]⚠ {measures.BUSY} in {len(busy)} of {len(ok)} cells[/yellow] (marked below): "
                      f"{escape(measures.BUSY_WHEN)}: their {escape(measures.BUSY_WHY)}.")
    _print_cells([_cell_row(c, ratios, ok) for c in sorted(shown, key=measures.order_key)], units, console)
    print_parity(res, console, patterns)
    print_batch_curve(res, console, patterns)


def _print_headline(bundle: Bundle, console) -> None:
    """The bundle's name with its badges (synthetic data, interrupted), then the machine, its
    software and the run, one fact a row."""
    from rich.table import Table

    from kit.report.env_rows import cpu_only, earlier_session_rows, machine_name, used_or_built

    res = bundle.results
    env = summarise_environment(bundle.environment, res.config, res.cells)
    badges = []
    if env.data_source == "synthetic":
        badges.append("[black on yellow] SYNTHETIC DATA [/]")
    if bundle.interrupted:
        badges.append("[white on red] INTERRUPTED [/]")
    # Everything read from the bundle is escaped: it must not be able to inject rich markup.
    console.print(f"[bold]{escape(bundle.path.name)}[/bold] " + " ".join(badges))
    head = Table(show_header=False, box=None, pad_edge=False)
    head.add_column(style="dim")
    head.add_column()
    gpus = env.gpu if not env.gpu_count or env.gpu_count == 1 else f"{env.gpu_count} x {env.gpu}"
    driver = "none (CPU run)" if cpu_only(env) and env.driver == "unknown" else env.driver
    for k, v in (("machine", machine_name(env.machine, bundle.environment)), ("GPU", gpus), ("driver", driver), ("stack", env.stack),
                 ("torch", env.torch), ("cuDNN", used_or_built(env.cudnn, env)), ("fastai", env.fastai), ("data", env.data_source),
                 ("run", f"{res.run_id} ({run_status(bundle)})"), ("kit", bundle.manifest.get("kit_version", "unknown"))):
        head.add_row(k, escape(str(v)))
    head.add_row("engines", escape(engine_revisions(res.cells)))
    for k, v in earlier_session_rows(bundle.environment):  # a resumed run's sessions before the last
        head.add_row(k, escape(v))
    console.print(head)


def _cell_row(c, ratios: dict, ok: dict) -> tuple:
    """One cell's row of the cells table: its id, throughput, s/epoch, CV, speedup over fp32 and notes."""
    if c.status != "ok":
        return (escape(c.cell_id), f"[yellow]{escape(c.status)}[/yellow]", "—", "—", "—", escape(c.reason or ""))
    thr, ep = measures.sample(c, THROUGHPUT), measures.sample(c, EPOCH_S)
    # spread of the steady-state throughput: epoch times also carry warm-up and autotuning
    cv = thr.cv if thr and thr.n > 1 else None
    est = ratios.get(key_of(c))
    # a fastai cell's learner heads its notes (in the cell column it would widen every row)
    learner = cell_learner(c.engine, c.params)
    notes = ([f"learner {learner}"] if learner else []) + measures.high_cv_flags(c)
    parallel = measures.data_parallel_note(c)
    if parallel:
        notes.insert(0, parallel)
    why = measures.host_busy(c)
    if why:
        notes.insert(0, measures.busy_note(why))
    base_busy = measures.speedup_busy(key_of(c), ok) if est is not None and not why else None
    if base_busy:
        notes.append(f"speedup over a cell measured on a busy host ({base_busy})")
    if est is not None and not est.significant:
        notes.append("speedup " + ("from 1 repeat" if est.verdict == ONE_REPEAT else est.verdict))
    if measures.throttled(c):
        notes.append("throttled")
    return (
        escape(c.cell_id),
        (f"{thr.median:,.0f}" if thr.median >= 100 else f"{thr.median:.3g}") if thr else "—",
        f"{ep.median:.3f}" if ep else "—",
        f"{cv:.1%}" if cv is not None else ("n=1" if (thr or ep) else "—"),
        fmt_speedup(est.ratio) if est else "—",
        escape(", ".join(notes)),
    )


def _print_cells(rows: list, units: list, console) -> None:
    """The cells table. The cell id and the numbers are never cut: their columns keep their full
    width and the headers wrap at spaces. Notes get a column when the terminal has room for one,
    else a line of their own under the cell id."""
    import textwrap

    from rich import box
    from rich.table import Table

    titles = (("cell", "left"), ("throughput", "right"), ("s/epoch with warm-up", "right"), ("throughput CV", "right"),
              ("speedup over fp32", "right"))
    widths = [max([len(_plain(r[i])) for r in rows] + [max(len(w) for w in col.split())])
              for i, (col, _j) in enumerate(titles)]
    notes_column = console.width >= sum(widths) + 2 * len(widths) + 24
    t = Table(title=f"Cells (median over repeats; throughput in {' or '.join(u + '/s' for u in units) or 'items/s'}, "
                    f"steady; {EPOCH_NOTE})",
              title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    # where the s/epoch header on one line leaves the notes too little room, it wraps at its spaces
    # rather than widen its column of short figures
    wrap = console.width < sum(max(w, len(col)) for (col, _j), w in zip(titles, widths)) + 2 * len(widths) + 24
    for i, ((col, just), width) in enumerate(zip(titles, widths)):
        t.add_column(col, justify=just, no_wrap=i == 0, min_width=width,
                     max_width=width if wrap and i == 2 else None)
    if notes_column:
        t.add_column("notes", justify="left", overflow="fold")
    for r in rows:
        if notes_column:
            t.add_row(*r)
            continue
        t.add_row(*r[:-1])
        if r[-1]:
            for line in textwrap.wrap(_plain(r[-1]), width=max(widths[0] - 2, 20)):
                t.add_row(f"[dim]  {escape(line)}[/dim]", "", "", "", "")
    console.print(t)


def print_parity(res, console, patterns: list[str] | None = None) -> None:
    """A convergence run: each reduced precision's final metric against its base's, and the verdict."""
    from rich import box
    from rich.table import Table

    rows = [r for r in measures.parity_rows(res)
            if matches(f"{r['workload']}/{r['model']}/{r['precision']}/{r['engine']}", patterns)]
    if not rows:
        return
    t = Table(title="Convergence parity (median over repeats)", title_justify="left", box=box.SIMPLE_HEAD,
              pad_edge=False, show_edge=False, collapse_padding=True)
    for col, just in (("cell", "left"), ("value", "right"), ("base", "right"), ("diff.", "right"), ("verdict", "left")):
        t.add_column(col, justify=just, no_wrap=True)
    for r in rows:
        cell = f"{r['workload']}/{r['model']}/{r['precision']}/{r['engine']}"
        t.add_row(escape(cell), f"{r['value']:.5g}", f"{r.get('reference', r.get('fp32')):.5g}",
                  escape(measures.fmt_parity_gap(r)), escape(r["verdict"]))
    console.print(t)
    rules = sorted({r["rule"] for r in rows})
    console.print(f"[dim]{escape('; '.join(rules))}[/dim]")


def print_batch_curve(res, console, patterns: list[str] | None = None) -> None:
    """A run with --batch-sizes: the curve per model, engine and precision (kit.results.curve), one
    column per batch size where that fits the console, else one row per point (curve, batch, result).
    A curve is shown whole where ``patterns`` match its name or any of its points' cell ids (``…/bs512``)."""
    from rich import box
    from rich.table import Table

    cs = [c for c in curves(res.cells) if c.shown and (matches(c.name, patterns) or any(
          p.cell is not None and matches(p.cell.cell_id, patterns) for p in c.points))]
    if not cs:
        return
    cs.sort(key=lambda c: (c.image_size or 0, measures.order_key((c.workload, c.model, c.precision, c.engine))))
    sizes = sorted({p.batch_size for c in cs for p in c.points})
    title = "Batch curve (median over repeats; speedup over fp32 at the same batch size)"

    def table() -> Table:
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                  collapse_padding=True)
        t.add_column("curve", no_wrap=True)
        t.add_column("knee", justify="right")
        return t

    def result(p, unit: str) -> str:
        if p.status == "ok":
            return escape(" · ".join(point_parts(p, unit)))
        return f"[yellow]{escape(point_parts(p, unit)[0])}[/yellow]"

    wide = table()
    for b in sizes:
        wide.add_column(f"batch {b:,}", justify="right")
    for c in cs:
        at = {p.batch_size: p for p in c.points}
        wide.add_row(escape(c.name), escape(fmt_knee(c)), *("—" if at.get(b) is None else result(at[b], c.unit) for b in sizes))
    if console.measure(wide, options=console.options.update_width(100_000)).maximum <= console.width:
        console.print(wide)
    else:  # too wide for this console (a pipe is 80 columns): one row per point
        long = table()
        long.add_column("batch", justify="right")
        long.add_column("result", overflow="fold")
        for c in cs:
            for i, p in enumerate(sorted(c.points, key=lambda p: p.batch_size)):
                long.add_row(escape(c.name) if i == 0 else "", escape(fmt_knee(c)) if i == 0 else "",
                             f"{p.batch_size:,}", result(p, c.unit))
        console.print(long)
    console.print(f"[dim]{escape(KNEE_DEFINITION)}[/dim]")


def _plain(markup: str) -> str:
    from rich.text import Text

    return Text.from_markup(markup).plain
