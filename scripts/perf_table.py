"""Print the performance tables (docs/performance.md) from the runs' own files.

    python scripts/perf_table.py references/h200/perf
        the targets table (references/h200/perf/perf.md) from a bench_h200.sh output
        folder, or a folder holding bundles and an overhead.json;
    python scripts/perf_table.py --suite references/h100/vm_NVIDIA-H100-*.tar.gz
        the full-suite tables of docs/performance.md (the H100 reference's, and the H200's) from a bundle;
    python scripts/perf_table.py --curve references/h200/curve/*/*.tar.gz
        the batch-curve tables of docs/performance.md, "Batch curve": one table per model and
        image size, a row per precision (kit.results.curve: the knee, the speedup over fp32
        at each size, images per joule);
    python scripts/perf_table.py --scaling OUT/*/*.tar.gz
        the data-parallel table of docs/fleet.md (scripts/bench_scaling_h200x2.sh): per cell
        the one-GPU baseline, the total and per-GPU throughput on N GPUs, the scaling efficiency
        (as kit.runner.isolate recorded it), the all-reduce time and the interconnect.

Every figure is read from the runs' results.json files (medians over repeats); the
speedup over fp32 is computed and printed by kit.results.ratios, the one function
every view of the kit uses. Nothing here is typed in by hand except the targets,
which are the project's goals.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kit.results import ratios  # noqa: E402
from kit.results.schema import CellResult, RunResults, load_results  # noqa: E402


def _runs(folder: Path) -> list[RunResults]:
    from kit.bundle.safe_open import open_bundle

    runs = [load_results(p) for p in sorted(folder.glob("*/results.json"))]
    runs += [open_bundle(p).results for p in sorted(folder.glob("*.tar.gz"))]
    return runs


def cells(folder: Path) -> tuple[dict[str, CellResult], dict]:
    """The cells of the run folders (*/results.json) and bundles (*.tar.gz) in
    ``folder`` by cell id, and the environment of the last run read."""
    out: dict[str, CellResult] = {}
    env: dict = {}
    for res in _runs(folder):
        for c in res.cells:
            out[c.cell_id] = c
        env = res.environment or env
    return out, env


#: the performance targets (H200, bs 256, 32 px, synthetic, medians of 3 repeats): the project's goals
INDUCTOR_TARGETS = {
    "resnet18": {"fp32": 58_000, "amp-fp16": 180_000, "amp-bf16": 185_000},
    "resnet50": {"fp32": 21_000, "amp-fp16": 76_000, "amp-bf16": 78_000},
}


def _ok(cell: CellResult | None) -> CellResult | None:
    return cell if cell is not None and cell.status == "ok" else None


def median(cell: CellResult | None, key: str = ratios.THROUGHPUT) -> float | None:
    """The median over repeats the kit's views use (kit.results.ratios.metric_values)."""
    import statistics

    xs = ratios.metric_values(cell, key) if _ok(cell) else []
    return statistics.median(xs) if xs else None


def speedup(cell: CellResult | None, fp32: CellResult | None) -> float | None:
    return ratios.speedup_over_fp32(_ok(cell), _ok(fp32))


def cv(cell: CellResult | None) -> str:
    s = (cell.summary or {}).get(ratios.THROUGHPUT) if _ok(cell) else None
    return f"throughput CV {s['cv']:.1%}" if s else "throughput CV n/a"


def _gpu(env: dict) -> str:
    gpus = env.get("gpus") or (env.get("nvml") or {}).get("gpus") or []
    return gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else "unknown GPU"


def main(out: Path) -> None:
    c, env = cells(out)
    for sub in ("r18-torch", "r50-torch", "r18-fastai", "lstm-tc"):
        if (out / sub).is_dir():
            more, env2 = cells(out / sub)
            c.update(more)
            env = env or env2
    r18bf = c.get("cifar/resnet18/amp-bf16/torch")
    r18h = c.get("cifar/resnet18/amp-fp16/torch")
    r50h = c.get("cifar/resnet50/amp-fp16/torch")
    r50f = c.get("cifar/resnet50/fp32/torch")
    fa18 = c.get("cifar/resnet18/amp-fp16/fastai")
    lh = c.get("lstm/tensor-core/amp-fp16/kit")
    lf = c.get("lstm/tensor-core/fp32/kit")
    overhead = json.loads((out / "overhead.json").read_text()) if (out / "overhead.json").exists() else {}

    rows = []

    def row(name, value, unit, target, ok, note=""):
        shown = "not measured" if value is None else (f"{value:,.0f} {unit}" if unit else ratios.fmt_ratio(value))
        verdict = "n/a" if value is None else ("met" if ok(value) else "MISSED")
        rows.append(f"| {name} | {shown} | {target} | {verdict} | {note} |")

    row("torch engine, ResNet-18, amp-bf16", median(r18bf), "images/s", "≥ 85,000 images/s", lambda v: v >= 85000, cv(r18bf))
    # the captured step with Inductor inside, against the same cells with eager kernels
    graph: dict[str, CellResult] = {}
    for sub in ("r18-graph", "r50-graph"):
        if (out / sub).is_dir():
            graph.update(cells(out / sub)[0])
    for model, targets in INDUCTOR_TARGETS.items():
        label = SUITE[0][3][model]  # "ResNet-18", as the suite tables name it
        for prec, target in targets.items():
            cell = c.get(f"cifar/{model}/{prec}/torch")
            eager = graph.get(f"cifar/{model}/{prec}/torch")
            modes = sorted({r.get("compile_mode") for r in (cell.repeats if _ok(cell) else [])} - {None})
            vs = ratios.ratio_of_medians(ratios.metric_values(cell, ratios.THROUGHPUT) if _ok(cell) else [],
                                         ratios.metric_values(eager, ratios.THROUGHPUT) if _ok(eager) else [])
            note = f"step {', '.join(modes) or 'n/a'}; {ratios.fmt_ratio(vs) if vs else 'n/a'} the eager-kernel graph; {cv(cell)}"
            row(f"torch engine, {label}, {prec} (Inductor inside the captured step)", median(cell), "images/s",
                f"≥ {target:,} images/s", lambda v, t=target: v >= t, note)
    row("torch engine, ResNet-50, amp-fp16", median(r50h), "images/s", "≥ 38,000 images/s", lambda v: v >= 38000, cv(r50h))
    row("ResNet-50 amp-fp16, speedup over strict fp32 (torch engine)", speedup(r50h, r50f), "", "≥ 1.80×",
        lambda v: v >= 1.8, f"fp32 {median(r50f) or 0:,.0f} images/s")
    torch_vs_fastai = ratios.ratio_of_medians(ratios.metric_values(r18h, ratios.THROUGHPUT) if _ok(r18h) else [],
                                              ratios.metric_values(fa18, ratios.THROUGHPUT) if _ok(fa18) else [])
    row("torch vs fastai engine, ResNet-18, amp-fp16 (throughput ratio)", torch_vs_fastai, "", "≥ 5.00×", lambda v: v >= 5,
        f"torch {median(r18h) or 0:,.0f}, fastai {median(fa18) or 0:,.0f} images/s")
    fo = overhead.get("fastai_instrumented_over_bare")
    row("fastai engine vs bare Learner.fit (same data)", fo, "", "≥ 0.95×", lambda v: v >= 0.95, overhead.get("fastai_note", ""))
    row("LSTM tensor-core, amp-fp16, speedup over strict fp32", speedup(lh, lf), "", "≥ 1.60×", lambda v: v >= 1.6,
        f"fp32 {median(lf) or 0:,.0f}, amp-fp16 {median(lh) or 0:,.0f} tokens/s")
    to = overhead.get("telemetry_overhead_fraction")
    rows.append(f"| telemetry sampler overhead | {'not measured' if to is None else f'{to:.2%}'} | ≤ 1% | "
                f"{'n/a' if to is None else ('met' if to <= 0.01 else 'MISSED')} | {overhead.get('telemetry_note', '')} |")
    print(f"Measured on {_gpu(env)}; medians of 3 repeats; synthetic data (throughput only); "
          f"{ratios.SPEEDUP_DEFINITION}.\n")
    print("| workload | measured | target | verdict | notes |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(rows))


#: (workload, engine, first header, model label per model id, header per precision)
SUITE = (
    ("cifar", "torch", "`torch` engine",
     {"resnet18": "ResNet-18", "resnet34": "ResNet-34", "resnet50": "ResNet-50", "resnet101": "ResNet-101", "resnet152": "ResNet-152"},
     {"fp32": "fp32 (strict)", "tf32": "tf32", "amp-fp16": "amp-fp16", "amp-bf16": "amp-bf16", "fp16-master": "fp16-master"}),
    ("cifar", "fastai", "`fastai` engine",
     {"resnet18": "ResNet-18", "resnet34": "ResNet-34", "resnet50": "ResNet-50", "resnet101": "ResNet-101", "resnet152": "ResNet-152"},
     {"fp32": "fp32", "tf32": "tf32", "amp-fp16": "amp-fp16 (`to_fp16`)", "amp-bf16": "amp-bf16 (`to_bf16`)",
      "fp16-master": "fp16-master (`to_non_native_fp16`)"}),
    ("lstm", "kit", "LSTM, `kit` engine (tokens/s)",
     {"apex-2018": "`apex-2018` (200 units)", "tensor-core": "`tensor-core` (1504 units)"},
     {"fp32": "fp32", "tf32": "tf32", "amp-fp16": "amp-fp16", "amp-bf16": "amp-bf16", "fp16-master": "fp16-master"}),
    ("lstm", "graphed", "LSTM, `graphed` engine (tokens/s)",
     {"apex-2018": "`apex-2018` (200 units)", "tensor-core": "`tensor-core` (1504 units)"},
     {"fp32": "fp32", "tf32": "tf32", "amp-fp16": "amp-fp16", "amp-bf16": "amp-bf16", "fp16-master": "fp16-master"}),
)


def suite_tables(results: RunResults, precision: str = "amp-fp16") -> str:
    """Median throughput per model and precision, and the speedup over fp32 of ``precision``; an engine
    the run has no cell of is left out."""
    by_id = {c.cell_id: c for c in results.cells}
    out = []
    for workload, engine, first, models, precisions in SUITE:
        if not any(c.workload == workload and c.engine == engine for c in results.cells):
            continue
        head = [first] + list(precisions.values()) + [f"{ratios.SPEEDUP_NAME} ({precision})"]
        lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for model, label in models.items():
            cell = {p: by_id.get(f"{workload}/{model}/{p}/{engine}") for p in precisions}
            values = [median(cell[p]) for p in precisions]
            shown = ["—" if v is None else f"{v:,.0f}" for v in values]
            lines.append("| " + " | ".join([label] + shown + [ratios.fmt_speedup(speedup(cell[precision], cell["fp32"]))]) + " |")
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def curve_tables(results: RunResults) -> str:
    """One markdown table per model x image size of a --batch-sizes run: throughput, speedup over
    fp32 and images per joule at each batch size, and the knee (kit.results.curve)."""
    from kit.results import curve as batch_curve

    groups: dict = {}
    for cv in batch_curve.curves(results.cells):
        if not cv.shown:
            continue
        size = next((p.cell.params.get("image_size") for p in cv.points if p.cell is not None), None)
        groups.setdefault((cv.workload, cv.model, cv.engine, size), []).append(cv)
    out = []
    for (workload, model, engine, size), cvs in groups.items():
        sizes = sorted({p.batch_size for cv in cvs for p in cv.points})
        head = [f"{model}, {size} px ({engine} engine)", "knee"] + [f"batch {b:,}" for b in sizes]
        lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for cv in cvs:
            at = {p.batch_size: p for p in cv.points}
            shown = ["<br>".join(batch_curve.point_parts(at[b], cv.unit)) if b in at else "not run" for b in sizes]
            lines.append("| " + " | ".join([cv.precision, batch_curve.fmt_knee(cv)] + shown) + " |")
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def scaling_table(results: RunResults) -> str:
    """One row per data-parallel cell: what it recorded under metrics.data_parallel (nothing computed here;
    printed with kit.compare.measures' formatters, as `kit bundle show` and the report print them)."""
    from kit.compare.measures import fmt_allreduce_ms, fmt_scaling

    head = ["cell", "GPUs", "1 GPU", "N GPUs (total)", "per GPU", "scaling efficiency", "all-reduce ms a step",
            "interconnect"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for c in sorted(results.cells, key=lambda c: c.cell_id):
        dp = (c.metrics or {}).get("data_parallel") if c.status == "ok" else None
        if not isinstance(dp, dict):
            if c.status != "ok" and (c.params or {}).get("world_size"):
                lines.append(f"| {c.cell_id} | {c.params['world_size']} | {c.status}: {c.reason or ''} | | | | | |")
            continue
        unit = f" {c.throughput_unit}/s"
        scaling = dp.get("scaling") or {}
        one = scaling.get("baseline_throughput_items_per_s_median")
        eff = scaling.get("efficiency")
        comm = (dp.get("allreduce") or {}).get("seconds_per_step")
        link = (dp.get("interconnect") or {}).get("kind", "—")

        def num(v):
            return "—" if v is None else f"{v:,.0f}{unit}"

        lines.append("| " + " | ".join([
            c.cell_id, str(dp.get("world_size")), num(one), num(median(c)),
            num(dp.get("throughput_per_gpu_items_per_s_median")),
            "—" if eff is None else fmt_scaling(eff), "—" if comm is None else fmt_allreduce_ms(comm), str(link),
        ]) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--curve"]:
        from kit.bundle.safe_open import open_bundle

        for path in args[1:]:
            print(curve_tables(open_bundle(Path(path)).results))
    elif args[:1] == ["--scaling"]:
        from kit.bundle.safe_open import open_bundle

        for path in args[1:]:
            print(scaling_table(open_bundle(Path(path)).results))
    elif args[:1] == ["--suite"]:
        from kit.bundle.safe_open import open_bundle

        for path in args[1:]:
            print(suite_tables(open_bundle(Path(path)).results), end="")
    else:
        main(Path(args[0] if args else "bench-out"))
