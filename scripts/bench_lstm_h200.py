"""The LSTM suite's targets on one GPU: both engines, tensor-core and apex-2018 presets, every precision.

    python scripts/bench_lstm_h200.py bench   --out DIR [--repeats 3] [--max-batches 600] [--engines kit,graphed]
    python scripts/bench_lstm_h200.py profile --out DIR [--preset tensor-core] [--precisions amp-fp16,fp32]
    python scripts/bench_lstm_h200.py convergence --out DIR --data-dir D [--epochs 4] [--repeats 3]
    python scripts/bench_lstm_h200.py targets DIR/results.json      (the targets table of a finished bench run)

``bench`` runs ``kit run --suite lstm --data synthetic`` (the kit's synthetic WikiText-2, labelled synthetic:
throughput only) and writes its results.json, bundle, and targets.json / targets.md (each target, the
measured median, met or missed, and every cell's GPU-busy fraction: the CUDA-event time of the timed steps
over their wall time). ``profile`` runs torch.profiler over replays of the graphed engine's captured step
and writes the kernel summary (where the GPU time goes) for each precision.

The targets (tokens/s, tensor-core preset: 1504 units x 2 layers, batch 24, bptt 35, tied, dropout 0.65)
are the figures an independent captured step reached on one H200 on 2026-12-03, minus about 3%.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: (preset, precision) -> the graphed engine's target, tokens/s (median of the repeats)
TARGETS = {("tensor-core", "amp-fp16"): 198_000, ("tensor-core", "amp-bf16"): 208_000,
           ("tensor-core", "fp32"): 54_000, ("tensor-core", "tf32"): 142_000}
#: amp-fp16 over strict fp32 on the tensor-core preset (kit.results.ratios.speedup_over_fp32)
SPEEDUP_TARGET = 3.5
BUSY_TARGET = 0.90
PRECISIONS = ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-master"]


def bench(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = out / "runs"
    cmd = [sys.executable, "-m", "kit", "run", "--suite", "lstm", "--engines", args.engines,
           "--preset", args.presets, "--precisions", args.precisions, "--data", "synthetic", "--device", "cuda",
           "--repeats", str(args.repeats), "--max-batches", str(args.max_batches), "--skip-checks",
           "--results-dir", str(work)]
    print(" ".join(cmd), flush=True)
    t0 = time.time()
    rc = subprocess.call(cmd, cwd=ROOT)
    print(f"kit run: exit {rc} after {time.time() - t0:.0f} s", flush=True)
    found = sorted(work.glob("*/results.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        return rc or 1
    shutil.copy(found[-1], out / "results.json")
    for b in sorted(work.glob("*.tar.gz")):
        shutil.copy(b, out / b.name)
    (out / "command.txt").write_text(" ".join(cmd[1:]) + "\n")
    report = targets(out / "results.json")
    (out / "targets.json").write_text(json.dumps(report, indent=2))
    (out / "targets.md").write_text(targets_markdown(report))
    print(targets_markdown(report), flush=True)
    return rc


def targets(results_json: Path) -> dict:
    from kit.results.ratios import speedup_over_fp32
    from kit.results.schema import CellResult

    doc = json.loads(Path(results_json).read_text())
    cells = [CellResult.from_dict(c) for c in doc["cells"]]
    by = {(c.model, c.engine, c.precision): c for c in cells}
    env = doc.get("environment") or {}
    gpus = (env.get("nvml") or {}).get("gpus") or [{}]
    rows = []
    for c in cells:
        if c.status != "ok":
            rows.append({"preset": c.model, "engine": c.engine, "precision": c.precision, "status": c.status,
                         "reason": c.reason})
            continue
        s = c.summary or {}
        med = (s.get("throughput_items_per_s") or {}).get("median")
        busy = [r.get("gpu_busy_fraction") for r in c.repeats]
        fp32 = by.get((c.model, c.engine, "fp32"))
        target = TARGETS.get((c.model, c.precision)) if c.engine == "graphed" else None
        rows.append({
            "preset": c.model, "engine": c.engine, "precision": c.precision, "status": "ok",
            "tokens_per_s_median": med,
            "tokens_per_s_repeats": [r.get("throughput_items_per_s") for r in c.repeats],
            "speedup_over_fp32": speedup_over_fp32(c, fp32) if fp32 is not None and c.precision != "fp32" else None,
            "gpu_busy_fraction_repeats": busy,
            "gpu_busy_min": min([b for b in busy if b is not None], default=None),
            "target_tokens_per_s": target,
            "target_met": (med >= target) if target and med else None,
            "busy_target_met": (min(b for b in busy if b is not None) >= BUSY_TARGET)
                               if c.engine == "graphed" and any(b is not None for b in busy) else None,
            "overflow_steps": [r.get("overflow_steps") for r in c.repeats],
        })
    amp = by.get(("tensor-core", "graphed", "amp-fp16"))
    fp32 = by.get(("tensor-core", "graphed", "fp32"))
    sp = speedup_over_fp32(amp, fp32) if amp is not None and fp32 is not None and amp.status == fp32.status == "ok" else None
    return {"device": gpus[0].get("name"), "driver": (env.get("nvml") or {}).get("driver_version"),
            "torch": (env.get("packages") or {}).get("torch"), "run_id": doc.get("run_id"),
            "started_at": doc.get("started_at"), "rows": rows,
            "speedup_amp_fp16_over_fp32_tensor_core_graphed": sp, "speedup_target": SPEEDUP_TARGET,
            "speedup_target_met": (sp >= SPEEDUP_TARGET) if sp else None, "busy_target": BUSY_TARGET}


def targets_markdown(report: dict) -> str:
    lines = [f"{report.get('device')}, driver {report.get('driver')}, torch {report.get('torch')}, run {report.get('run_id')}",
             "", "| preset | engine | precision | tokens/s (median) | x fp32 | GPU busy (min) | target | met |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in report["rows"]:
        if r["status"] != "ok":
            lines.append(f"| {r['preset']} | {r['engine']} | {r['precision']} | {r['status']}: {r.get('reason')} | | | | |")
            continue
        med = f"{r['tokens_per_s_median']:,.0f}" if r["tokens_per_s_median"] else "—"
        sp = f"{r['speedup_over_fp32']:.2f}" if r["speedup_over_fp32"] else "—"
        busy = f"{r['gpu_busy_min']:.1%}" if r["gpu_busy_min"] is not None else "—"
        tgt = f"≥ {r['target_tokens_per_s']:,}" if r["target_tokens_per_s"] else "—"
        met = {True: "yes", False: "**no**", None: "—"}[r["target_met"]]
        if r["busy_target_met"] is False:
            met += " (busy < 90%)"
        lines.append(f"| {r['preset']} | {r['engine']} | {r['precision']} | {med} | {sp} | {busy} | {tgt} | {met} |")
    sp = report.get("speedup_amp_fp16_over_fp32_tensor_core_graphed")
    lines.append("")
    lines.append(f"tensor-core, graphed: amp-fp16 ÷ strict fp32 = {sp:.2f}x (target ≥ {SPEEDUP_TARGET}x)" if sp else
                 "tensor-core, graphed: amp-fp16 ÷ strict fp32 not measured")
    return "\n".join(lines) + "\n"


def convergence(args) -> int:
    """fp16's accuracy on real text: ``kit run --mode convergence --train-split valid`` (the GPU machine has
    only WikiText-2's real valid and test splits and no network), both engines, 3 seeds; then the test
    perplexity per cell and seed and the parity verdict (kit.results.derive.parity, as `kit bundle show`)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = out / "runs"
    cmd = [sys.executable, "-m", "kit", "run", "--suite", "lstm", "--mode", "convergence", "--data", "real",
           "--data-dir", args.data_dir, "--train-split", "valid", "--engines", args.engines, "--preset", args.presets,
           "--precisions", args.precisions, "--epochs", str(args.epochs), "--repeats", str(args.repeats),
           "--device", "cuda", "--skip-checks", "--results-dir", str(work)]
    print(" ".join(cmd), flush=True)
    t0 = time.time()
    try:  # a time limit keeps what finished: results.json is written after every cell
        rc = subprocess.run(cmd, cwd=ROOT, timeout=args.time_limit).returncode
    except subprocess.TimeoutExpired:
        rc = 124
        print(f"kit run stopped at the --time-limit of {args.time_limit} s; the cells finished by then are kept", flush=True)
    print(f"kit run: exit {rc} after {time.time() - t0:.0f} s", flush=True)
    found = sorted(work.glob("*/results.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        return rc or 1
    shutil.copy(found[-1], out / "results.json")
    for b in sorted(work.glob("*.tar.gz")):
        shutil.copy(b, out / b.name)
    (out / "command.txt").write_text(" ".join(cmd[1:]) + "\n")
    report = parity_report(out / "results.json")
    (out / "parity.json").write_text(json.dumps(report, indent=2))
    (out / "parity.md").write_text(parity_markdown(report))
    print(parity_markdown(report), flush=True)
    return rc


def parity_report(results_json: Path) -> dict:
    from kit.results.derive import parity
    from kit.results.schema import CellResult

    doc = json.loads(Path(results_json).read_text())
    cells = [CellResult.from_dict(c) for c in doc["cells"]]
    verdicts = {(r["model"], r["engine"], r["precision"]): r for r in parity(cells)}
    rows = []
    for c in cells:
        if c.status != "ok":
            rows.append({"preset": c.model, "engine": c.engine, "precision": c.precision, "status": c.status, "reason": c.reason})
            continue
        v = verdicts.get((c.model, c.engine, c.precision))
        rows.append({"preset": c.model, "engine": c.engine, "precision": c.precision, "status": "ok",
                     "test_perplexity_by_seed": {str(r.get("seed")): r.get("final_metric") for r in c.repeats},
                     "test_perplexity_median": ((c.summary or {}).get("final_metric") or {}).get("median"),
                     "overflow_steps": [r.get("overflow_steps") for r in c.repeats],
                     "epochs": len((c.repeats[0].get("metrics") or {}).get("val_loss") or []) if c.repeats else None,
                     "gap_vs_fp32": v["gap"] if v else None, "verdict": v["verdict"] if v else None,
                     "rule": v["rule"] if v else None})
    data = next((c.data for c in cells if c.status == "ok"), {}) or {}
    return {"run_id": doc.get("run_id"), "rows": rows, "data": data,
            "notes": sorted({n for c in cells for n in (c.notes or []) if "split" in n})}


def parity_markdown(report: dict) -> str:
    lines = [f"run {report.get('run_id')}", "",
             "| preset | engine | precision | test perplexity by seed | median | vs fp32 | verdict |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in report["rows"]:
        if r["status"] != "ok":
            lines.append(f"| {r['preset']} | {r['engine']} | {r['precision']} | {r['status']}: {r.get('reason')} | | | |")
            continue
        seeds = " / ".join(f"{v:.2f}" if v is not None else "diverged" for v in r["test_perplexity_by_seed"].values())
        med = f"{r['test_perplexity_median']:.2f}" if r["test_perplexity_median"] is not None else "—"
        gap = f"{r['gap_vs_fp32']:+.2%}" if r["gap_vs_fp32"] is not None else "—"
        lines.append(f"| {r['preset']} | {r['engine']} | {r['precision']} | {seeds} | {med} | {gap} | {r['verdict'] or '(the base)'} |")
    return "\n".join(lines + [""] + report.get("notes", [])) + "\n"


def profile(args) -> int:
    """torch.profiler over replays of the captured step: the kernels' GPU time, per precision."""
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    from kit.bench.lstm import graphed
    from kit.bench.lstm.batching import batchify
    from kit.bench.lstm.config import resolve
    from kit.bench.lstm.suite import precision_kwargs
    from kit.bench.lstm.train import SplitData
    from kit.data.synthetic import wikitext2_like

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for preset in args.preset.split(","):
        cfg = resolve({"preset": preset})
        corpus = wikitext2_like(seed=0, pad_vocab_to=cfg.pad_vocab_to)
        data = SplitData(batchify(corpus.train, cfg.batch_size, "cuda"), None, None, int(corpus.vocab_size))
        for mode in args.precisions.split(","):
            kwargs, _ = precision_kwargs(mode, cfg)
            step = graphed.GraphedStep(cfg, data, mode, "cuda", 1111, kwargs)
            for _ in range(graphed.WARMUP_BEFORE_CAPTURE + 20):
                step.window()
            torch.cuda.synchronize()
            n = args.steps
            t0 = time.perf_counter()
            for _ in range(n):
                step.window()
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
            with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(n):
                    step.window()
                torch.cuda.synchronize()
            table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=25)
            tok = n * cfg.bptt * cfg.batch_size / wall
            head = f"{preset} {mode}: {n} replays, {wall * 1e3 / n:.3f} ms/step, {tok:,.0f} tokens/s (unprofiled)\n"
            (out / f"profile-{preset}-{mode}.txt").write_text(head + table + "\n")
            print(head + table, flush=True)
            del step
            torch.cuda.empty_cache()
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--out", required=True)
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--max-batches", type=int, default=600)
    b.add_argument("--engines", default="graphed,kit")
    b.add_argument("--presets", default="tensor-core,apex-2018")
    b.add_argument("--precisions", default=",".join(PRECISIONS))
    f = sub.add_parser("profile")
    f.add_argument("--out", required=True)
    f.add_argument("--preset", default="tensor-core")
    f.add_argument("--precisions", default="amp-fp16,fp32")
    f.add_argument("--steps", type=int, default=50)
    c = sub.add_parser("convergence")
    c.add_argument("--out", required=True)
    c.add_argument("--data-dir", required=True, help="a folder with wikitext-2/wiki.valid.tokens and wiki.test.tokens")
    c.add_argument("--epochs", type=int, default=4)
    c.add_argument("--repeats", type=int, default=3)
    c.add_argument("--engines", default="graphed,kit")
    c.add_argument("--presets", default="tensor-core,apex-2018")
    c.add_argument("--precisions", default="fp32,fp16-master,amp-fp16,amp-bf16")
    c.add_argument("--time-limit", type=float, default=None, help="seconds; stop kit run then, keeping the finished cells")
    t = sub.add_parser("targets")
    t.add_argument("results")
    args = p.parse_args(argv)
    if args.what == "bench":
        return bench(args)
    if args.what == "profile":
        return profile(args)
    if args.what == "convergence":
        return convergence(args)
    print(targets_markdown(targets(Path(args.results))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
