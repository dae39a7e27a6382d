"""Print the README's performance table from a bench_h200.sh output folder, or from
a folder holding bundles and an overhead.json (e.g. references/h200).

Every figure is read from the runs' results.json files (medians over repeats);
nothing here is typed in by hand except the targets, which are the project's goals.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kit.results.schema import load_results  # noqa: E402


def cells(folder: Path) -> dict[str, dict]:
    """Cells of the run folders (*/results.json) and bundles (*.tar.gz) in ``folder``."""
    from kit.bundle.safe_open import open_bundle

    runs = [load_results(p) for p in sorted(folder.glob("*/results.json"))]
    runs += [open_bundle(p).results for p in sorted(folder.glob("*.tar.gz"))]
    out = {}
    for res in runs:
        for c in res.cells:
            out[c.cell_id] = {"status": c.status, "reason": c.reason, "summary": c.summary, "env": res.environment}
    return out


def median(cell: dict | None, key: str = "throughput_items_per_s") -> float | None:
    if not cell or cell["status"] != "ok" or key not in cell["summary"]:
        return None
    return cell["summary"][key]["median"]


def cv(cell: dict | None) -> str:
    s = (cell or {}).get("summary", {}).get("throughput_items_per_s")
    return f"{s['cv']:.1%}" if s else "n/a"


def main(out: Path) -> None:
    c = cells(out)
    for sub in ("r18-torch", "r50-torch", "r18-fastai", "lstm-tc"):
        c.update(cells(out / sub))
    r18bf = c.get("cifar/resnet18/amp-bf16/torch")
    r18h = c.get("cifar/resnet18/amp-fp16/torch")
    r50h = c.get("cifar/resnet50/amp-fp16/torch")
    r50f = c.get("cifar/resnet50/fp32/torch")
    fa18 = c.get("cifar/resnet18/amp-fp16/fastai")
    lh = c.get("lstm/tensor-core/amp-fp16/kit")
    lf = c.get("lstm/tensor-core/fp32/kit")
    overhead = json.loads((out / "overhead.json").read_text()) if (out / "overhead.json").exists() else {}

    def ratio(a, b):
        return (a / b) if a and b else None

    rows = []

    def row(name, value, unit, target, ok, note=""):
        shown = "not measured" if value is None else (f"{value:,.0f} {unit}" if unit else f"{value:.2f}x")
        verdict = "n/a" if value is None else ("met" if ok(value) else "MISSED")
        rows.append(f"| {name} | {shown} | {target} | {verdict} | {note} |")

    row("torch engine, ResNet-18, amp-bf16", median(r18bf), "images/s", "≥ 85,000 images/s", lambda v: v >= 85000, f"CV {cv(r18bf)}")
    row("torch engine, ResNet-50, amp-fp16", median(r50h), "images/s", "≥ 38,000 images/s", lambda v: v >= 38000, f"CV {cv(r50h)}")
    row("ResNet-50 amp-fp16 / strict fp32 (torch engine)", ratio(median(r50h), median(r50f)), "", "≥ 1.8x", lambda v: v >= 1.8,
        f"fp32 {median(r50f) or 0:,.0f} images/s")
    row("torch vs fastai engine, ResNet-18, amp-fp16", ratio(median(r18h), median(fa18)), "", "≥ 5x", lambda v: v >= 5,
        f"torch {median(r18h) or 0:,.0f}, fastai {median(fa18) or 0:,.0f} images/s")
    fo = overhead.get("fastai_instrumented_over_bare")
    row("fastai engine vs bare Learner.fit (same data)", fo, "", "≥ 0.95x", lambda v: v >= 0.95, overhead.get("fastai_note", ""))
    row("LSTM tensor-core, amp-fp16 / strict fp32 tokens/s", ratio(median(lh), median(lf)), "", "≥ 1.6x", lambda v: v >= 1.6,
        f"fp32 {median(lf) or 0:,.0f}, amp-fp16 {median(lh) or 0:,.0f} tokens/s")
    to = overhead.get("telemetry_overhead_fraction")
    rows.append(f"| telemetry sampler overhead | {'not measured' if to is None else f'{to:.2%}'} | ≤ 1% | "
                f"{'n/a' if to is None else ('met' if to <= 0.01 else 'MISSED')} | {overhead.get('telemetry_note', '')} |")
    env = next(iter(c.values()))["env"] if c else {}
    gpus = env.get("gpus") or (env.get("nvml") or {}).get("gpus") or []
    gpu = gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else "unknown GPU"
    print(f"Measured on {gpu}; medians of 3 repeats; synthetic data (throughput only).\n")
    print("| workload | measured | target | verdict | notes |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "bench-out"))
