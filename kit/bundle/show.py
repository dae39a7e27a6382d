"""What `kit bundle show` and `kit bundle verify` print about a bundle."""

from __future__ import annotations

from kit.bundle.envinfo import summarise_environment
from kit.bundle.safe_open import MANIFEST_NAME, Bundle
from kit.compare import measures


def verify_lines(bundle: Bundle) -> list[str]:
    """The checks a bundle passed, one line each (printed by `kit bundle verify`)."""
    m = bundle.manifest
    listed = m.get("files", {})
    total = sum(len(d) for d in bundle.files.values())
    ok = sum(c.status == "ok" for c in bundle.results.cells)
    return [
        f"archive: {len(bundle.files)} regular files, {total:,} bytes, no links, devices or unsafe paths",
        f"{MANIFEST_NAME}: bundle format {m.get('bundle_format', '?')}, results schema v{m.get('schema_version')}, "
        f"made by kit {m.get('kit_version', 'unknown')} at {m.get('created_at', 'unknown')}",
        f"sha256 and size match the manifest for all {len(listed)} listed files; no unlisted files",
        f"results.json: schema v{bundle.results.schema_version}, run {bundle.results.run_id}, "
        f"status {bundle.results.status}, {len(bundle.results.cells)} cells ({ok} ok)",
    ] + (["note: the run was interrupted; some cells were never measured"] if bundle.interrupted else [])


def print_show(bundle: Bundle, console) -> None:
    from rich.markup import escape
    from rich.table import Table

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
    for k, v in (("machine", env.machine), ("GPU", gpus), ("driver", env.driver), ("stack", env.stack),
                 ("torch", env.torch), ("cuDNN", env.cudnn), ("fastai", env.fastai), ("data", env.data_source),
                 ("run", f"{res.run_id} ({res.status})"), ("kit", bundle.manifest.get("kit_version", "unknown"))):
        head.add_row(k, escape(str(v)))
    console.print(head)
    ratios = measures.speedup_vs_fp32(res)
    t = Table(title="Cells (median over repeats)", title_justify="left")
    for col, just in (("cell", "left"), ("status", "left"), ("throughput", "right"), ("s/epoch", "right"),
                      ("cv", "right"), ("vs fp32", "right"), ("notes", "left")):
        t.add_column(col, justify=just)
    for c in sorted(res.cells, key=measures.order_key):
        if c.status != "ok":
            t.add_row(escape(c.cell_id), f"[yellow]{escape(c.status)}[/yellow]", "—", "—", "—", "—", escape(c.reason or ""))
            continue
        thr, ep = measures.sample(c, measures.THROUGHPUT), measures.sample(c, measures.EPOCH_S)
        # spread of the steady-state throughput: epoch times also carry warm-up and autotuning
        spread = thr if thr and thr.n > 1 else ep
        cv = spread.cv if spread and spread.n > 1 else None
        est = ratios.get((c.workload, c.model, c.precision, c.engine))
        notes = []
        if cv is not None and cv >= 0.10:
            notes.append("high cv")
        if measures.throttled(c):
            notes.append("throttled")
        t.add_row(
            escape(c.cell_id),
            "ok",
            escape(f"{thr.median:,.0f} {c.throughput_unit}/s" if thr.median >= 100 else f"{thr.median:.3g} {c.throughput_unit}/s") if thr else "—",
            f"{ep.median:.3f}" if ep else "—",
            f"{cv:.1%}" if cv is not None else ("n=1" if (thr or ep) else "—"),
            f"x{est.ratio:.2f}" + ("" if est.significant else " (ns)" if est.verdict == "not significant" else "") if est else "—",
            ", ".join(notes),
        )
    console.print(t)
