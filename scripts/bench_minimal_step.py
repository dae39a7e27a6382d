"""The torch engine's CIFAR step beside an independent minimal step, in one process on one GPU.

    python scripts/bench_minimal_step.py --out references/h100/perf \
        [--models resnet18,resnet50] [--precisions fp32,amp-fp16,amp-bf16] [--repeats 7] \
        [--baseline-engine DIR [--baseline-cells resnet18/amp-fp16,...]] [--no-check-variant] [--profile-steps 20]

Per model and precision (a "cell": batch 256, 32 px, synthetic CIFAR-100-shaped data on the GPU):

    kit          the engine's own repeat (kit.bench.cifar.torch_engine.train_repeat, the step mode a cell
                 runs on a GPU, cuda-graph-inductor): a fresh model, its captured step, its steady-state
                 images/s, which is what a cell records
    independent  the yardstick, written here in one screen (independent_step): the data on the GPU, the
                 whole step (forward, loss, backward, fused SGD, loss scaling) captured in one CUDA graph
                 with Inductor's kernels, a static loss scale; the same model (kit.bench.cifar.models),
                 batch, data and precision rules (autocast's dtype, TF32 off, amp-fp16's overflowed steps
                 skipped on the device); none of the engine's bookkeeping (schedule, loss sum, counters)
    no-check     (amp-fp16, unless --no-check-variant) the independent step with no overflow check at all:
                 the unscale folded into the fused SGD (grad_scale=), what amp-fp16 costs without the rule
                 that skips an overflowed step; context, not the yardstick
    baseline     (--baseline-engine DIR) another revision's engine: DIR holds its
                 kit/bench/cifar/graphed.py and torch_engine.py, loaded beside this one's and timed alike
                 (in every cell, or in those --baseline-cells names)

A cell compiles its step once per engine (as a cell does, after kit.bench.compilation.fresh_compilation),
warms each up, then alternates their repeats (kit, baseline, independent, kit, ...), so a drift of the
GPU's clocks falls on all alike. One difference from a cell: an engine's repeat here does not empty the
allocator's cache (torch.cuda.empty_cache would free a cuBLAS workspace the yardstick's graph, alive across
the repeats, recorded); a repeat's steady state does not depend on it. The independent step times as many steps as the kit's steady state holds,
between two synchronisations, as kit.bench.timing's clock does. After the repeats, a profiled window of each
(kit.bench.profile_window's events, classed as `kit explain` classes them: device time by kernel class,
the time no kernel ran, kernels per step).

Writes perf.json (every repeat, every window, the environment) and perf.md (the table) to --out after each
cell, so a command cut short keeps the cells it finished. Synthetic data: throughput only.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: the static loss scale of the independent amp-fp16 step (GradScaler's starting scale, the engine's too)
STATIC_SCALE = 2.0**16


def independent_step(model_name: str, precision: str, device: str, prepare, xs, ys, check: bool = True):
    """The yardstick: a minimal CIFAR training step, the whole of it one CUDA graph.

    ``xs``/``ys``: batches on the GPU (uint8 images, int64 labels), ``prepare`` turns a uint8 batch into
    the model's input (float, normalise, channels_last). Returns ``run(i)``: copy batch i into the graph's
    input and replay it. amp-fp16: a static loss scale; ``check`` unscales and checks the gradients for
    inf/NaN (GradScaler's kernel) so the fused SGD skips an overflowed step, without it the unscale is
    folded into the fused SGD and nothing is checked."""
    import torch
    import torch.nn.functional as F

    from kit.bench.cifar.models import build

    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # fp32 is fp32
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = build(model_name, 100).to(device, memory_format=torch.channels_last).train()
    params = list(model.parameters())
    amp = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(precision)
    scale = STATIC_SCALE if precision == "amp-fp16" else None
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4, fused=True)
    found_inf = torch.zeros((), device=device)
    inv_scale = torch.full((), 1.0 / (scale or 1.0), device=device)
    if scale and check:
        opt.found_inf = found_inf  # the fused SGD skips the step on the device where it is 1 (GradScaler's hand-off)
    elif scale:
        opt.grad_scale = torch.full((), scale, device=device)  # the fused SGD divides the gradients by it

    @torch.compile(dynamic=False)
    def loss_of(x_u8, y):
        with torch.autocast("cuda", dtype=amp or torch.float32, enabled=amp is not None, cache_enabled=False):
            out = model(prepare(x_u8))
        return F.cross_entropy(out.float(), y)

    x, y = xs[0].clone(), ys[0].clone()  # the graph's input: each step copies its batch in

    def step():
        loss = loss_of(x, y)
        if scale:
            (loss * scale).backward()
            if check:
                found_inf.zero_()
                torch._amp_foreach_non_finite_check_and_unscale_([p.grad for p in params], found_inf, inv_scale)
        else:
            loss.backward()
        opt.step()
        return loss.detach()

    side = torch.cuda.Stream(device=device)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compilation, cuDNN's autotuning, the momentum buffers: before capture
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream().wait_stream(side)
    opt.zero_grad(set_to_none=True)  # backward inside the capture allocates the gradients in the graph's pool
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        step()

    def run(i: int) -> None:
        x.copy_(xs[i])
        y.copy_(ys[i])
        graph.replay()

    return run


def load_engine(folder: Path):
    """Another revision's torch engine: its graphed.py and torch_engine.py from ``folder``, as modules of
    their own (the engine's own imports still reach this tree for everything else)."""
    mods = {}
    for name in ("graphed", "torch_engine"):
        spec = importlib.util.spec_from_file_location(f"baseline_{name}", folder / f"{name}.py")
        mods[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mods[name])
    mods["torch_engine"].GraphedTrainer = mods["graphed"].GraphedTrainer  # its repeats build its own step
    return mods["torch_engine"]


def window(step, device: str, steps: int) -> dict:
    """A profiled window of ``steps`` calls of ``step`` (after 3 unprofiled ones): kit.bench.profile_window's
    device events, classed by kit.results.step_profile as `kit explain` reads them, and kernels per step."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from kit.bench import profile_window
    from kit.results import step_profile

    for _ in range(3):
        step()
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize(device)
        wall = time.perf_counter() - t0
    events = profile_window.device_events(prof)
    out = step_profile.device_profile([(n, e - s) for n, s, e in events], wall, steps, f"{steps} steps",
                                      intervals=[(s, e) for _, s, e in events])
    out["events_per_step"] = len(events) / steps
    return out


def pair_stats(kit: list, other: list) -> dict:
    """Medians, spreads ((max - min) / median) and the ratio of each repeat's pair, kit ÷ other."""
    pairs = [a / b for a, b in zip(kit, other)]
    spread = lambda v: (max(v) - min(v)) / statistics.median(v)  # noqa: E731
    return {"ratio_of_medians": statistics.median(kit) / statistics.median(other),
            "pair_ratio_median": statistics.median(pairs), "pair_ratio_min": min(pairs),
            "pair_ratio_max": max(pairs), "kit_spread": spread(kit), "other_spread": spread(other)}


def run_cell(model: str, precision: str, args, data, baseline) -> dict:
    """One cell: compile and warm each engine, alternate their repeats, profile each."""
    import torch

    from kit.bench.cifar import torch_engine
    from kit.bench.cifar.gpu_data import augment
    from kit.bench.cifar.graphed import INDUCTOR_GRAPH
    from kit.bench.cifar.train_config import TrainConfig
    from kit.bench.compilation import fresh_compilation
    from kit.bench.context import CellContext

    device = args.device
    torch.backends.cudnn.benchmark = True  # as a torch cell sets it
    cfg = TrainConfig(model=model, precision=precision, device=device, batch_size=256, image_size=32, compile="on")
    ctx = CellContext(device=device, data_dir=Path("unused"), data_source="synthetic", repeats=args.repeats)
    fresh_compilation(precision)  # as a cell: Dynamo's compilations dropped, AOTAutograd's cache off under autocast
    engines = {"kit": torch_engine}
    if baseline is not None:
        engines["baseline"] = baseline
    for eng in engines.values():
        # a repeat empties the allocator's cache at its start and end, and torch.cuda.empty_cache() frees
        # cuBLAS's workspaces too, one of which the yardstick's graph (alive across the engines' repeats)
        # recorded: its replays then read freed memory. Here a repeat only collects garbage; a steady
        # state does not depend on what the cache held before it
        eng.free_device_memory = gc.collect
    t0 = time.perf_counter()
    warm = {name: eng.train_repeat(cfg, data, ctx, -1, INDUCTOR_GRAPH) for name, eng in engines.items()}
    steps = int(warm["kit"]["steady_items"]) // cfg.batch_size  # the kit's steady steps, timed for the yardstick too
    spe = cfg.steps_per_epoch(data.train_x.shape[0])
    gen = torch.Generator(device=device).manual_seed(0)
    idx = torch_engine.epoch_indices(data.train_x.shape[0], spe * 256, device, gen)
    xs = augment(data.train_x[idx], gen).view(spe, 256, 3, 32, 32)
    ys = data.train_y[idx].view(spe, 256)
    prepare = lambda u8: data.to_input(u8, 32)  # noqa: E731
    yardsticks = {"independent": independent_step(model, precision, device, prepare, xs, ys)}
    if precision == "amp-fp16" and not args.no_check_variant:
        yardsticks["no-check"] = independent_step(model, precision, device, prepare, xs, ys, check=False)
    compile_s = time.perf_counter() - t0

    def timed(run) -> float:
        torch.cuda.synchronize(device)
        t = time.perf_counter()
        for i in range(steps):
            run(i % spe)
        torch.cuda.synchronize(device)
        return steps * 256 / (time.perf_counter() - t)

    for run in yardsticks.values():
        timed(run)  # a first pass of replays: the yardstick's own warm-up
    rates: dict = {name: [] for name in [*engines, *yardsticks]}
    notes: list = []
    profiles: dict = {}
    first_step: dict = {name: [] for name in engines}  # seconds to each repeat's first step: a recompile shows here
    for r in range(args.repeats):
        for name, eng in engines.items():
            # the last repeat's own step is profiled once its record is complete (as a cell's window)
            after = (None if r < args.repeats - 1 else
                     lambda step, name=name, **_: profiles.__setitem__(name, window(step, device, args.profile_steps)))
            rec = eng.train_repeat(replace(cfg, seed=r), data, ctx, r, INDUCTOR_GRAPH, after=after)
            rates[name].append(rec["throughput_items_per_s"])
            first_step[name].append(rec.get("time_to_first_step_s"))
            if rec.get("compile_mode") != INDUCTOR_GRAPH:
                notes.append(f"{name} repeat {r} ran {rec.get('compile_mode')}")
        for name, run in yardsticks.items():
            rates[name].append(timed(run))
    for name, run in yardsticks.items():
        profiles[name] = window(lambda run=run: run(0), device, args.profile_steps)
    cell = {"model": model, "precision": precision, "steps_timed": steps, "repeats": args.repeats,
            "images_per_s": rates, "compile_and_warm_s": compile_s, "time_to_first_step_s": first_step, "profiles": profiles, "notes": notes,
            "kit_vs": {name: pair_stats(rates["kit"], rates[name]) for name in rates if name != "kit"}}
    del yardsticks, xs, ys
    torch.cuda.empty_cache()
    return cell


def environment(device: str) -> dict:
    import torch

    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit,serial",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        smi = f"nvidia-smi failed: {exc}"
    return {"gpu": torch.cuda.get_device_name(device), "nvidia_smi": smi, "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "data": "synthetic CIFAR-100-shaped images (kit.data.synthetic): throughput only"}


def table(result: dict) -> str:
    """perf.md: one row per cell, medians over the repeats, the ratio of each repeat's pair."""
    env = result["environment"]
    lines = [f"# The torch engine beside an independent minimal step ({env['gpu']}, {env['date_utc']})", "",
             f"torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}; `nvidia-smi`: {env['nvidia_smi']}.",
             "Batch 256, 32 px, synthetic data; images/s are medians over the repeats (spread: (max - min) / median); "
             "kit ÷ independent is the median of the repeats' pairs (range in brackets).", "",
             "| model | precision | kit images/s (spread) | independent images/s (spread) | kit ÷ independent | others ÷ independent |",
             "| --- | --- | --- | --- | --- | --- |"]
    for c in result["cells"]:
        r = c["images_per_s"]
        vs = c["kit_vs"]["independent"]
        others = []
        for name in r:
            if name not in ("kit", "independent"):
                ratio = statistics.median([a / b for a, b in zip(r[name], r["independent"])])
                others.append(f"{name} {ratio:.3f}")
        lines.append(f"| {c['model']} | {c['precision']} | {statistics.median(r['kit']):,.0f} ({vs['kit_spread']:.1%}) | "
                     f"{statistics.median(r['independent']):,.0f} ({vs['other_spread']:.1%}) | "
                     f"{vs['pair_ratio_median']:.3f} [{vs['pair_ratio_min']:.3f}–{vs['pair_ratio_max']:.3f}] | "
                     f"{', '.join(others) or '—'} |")
    lines += ["", "Profiled windows (ms per step: the step, kernels' busy time, no kernel running, kernels per step):", "",
              "| model | precision | step | busy | idle | kernels | largest classes |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in result["cells"]:
        for name, p in c["profiles"].items():
            if not p.get("available"):
                lines.append(f"| {c['model']} | {c['precision']} {name} | — | — | — | — | {p.get('reason', '')} |")
                continue
            top = sorted(p["device_s_by_class"].items(), key=lambda kv: -kv[1])[:4]
            classes = ", ".join(f"{k} {v * 1e3:.3f}" for k, v in top)
            busy = p.get("busy_s", p["device_s"])
            lines.append(f"| {c['model']} | {c['precision']} {name} | {p['step_s'] * 1e3:.3f} | {busy * 1e3:.3f} | "
                         f"{max(p['step_s'] - busy, 0) * 1e3:.3f} | {p['events_per_step']:.0f} | {classes} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,resnet50")
    ap.add_argument("--precisions", default="fp32,amp-fp16,amp-bf16")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--profile-steps", type=int, default=20)
    ap.add_argument("--baseline-engine", type=Path, default=None,
                    help="a folder with another revision's kit/bench/cifar/graphed.py and torch_engine.py")
    ap.add_argument("--baseline-cells", default="",
                    help="time the baseline engine in these cells only (model/precision, comma-separated; default: all)")
    ap.add_argument("--no-check-variant", action="store_true", help="skip amp-fp16's no-check yardstick")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()
    import torch

    from kit.bench import profile_window
    from kit.bench.cifar.gpu_data import DeviceData
    from kit.data.synthetic import cifar100_like

    if not torch.cuda.is_available():
        sys.exit("error: this benchmark needs a CUDA GPU")
    profile_window.release_cupti_reason()  # CUPTI released after each window: it would slow what follows
    for limit in ("recompile_limit", "cache_size_limit"):  # each repeat builds a step: none may fall back
        if hasattr(torch._dynamo.config, limit):
            setattr(torch._dynamo.config, limit, 64)
    args.out.mkdir(parents=True, exist_ok=True)
    arrays = cifar100_like(seed=0)
    data = DeviceData.upload(arrays.train_x, arrays.train_y, arrays.test_x, arrays.test_y, args.device)
    baseline = load_engine(args.baseline_engine) if args.baseline_engine else None
    result = {"environment": environment(args.device), "cells": [], "command": " ".join(sys.argv)}
    for model in args.models.split(","):
        for precision in args.precisions.split(","):
            t0 = time.perf_counter()
            chosen = not args.baseline_cells or f"{model}/{precision}" in args.baseline_cells.split(",")
            result["cells"].append(run_cell(model, precision, args, data, baseline if chosen else None))
            result["cells"][-1]["wall_s"] = time.perf_counter() - t0
            (args.out / "perf.json").write_text(json.dumps(result, indent=1, default=str))
            (args.out / "perf.md").write_text(table(result))
            c = result["cells"][-1]
            print(f"{model} {precision}: " + ", ".join(f"{k} {statistics.median(v):,.0f}" for k, v in c["images_per_s"].items())
                  + " images/s; kit ÷ independent " + f"{c['kit_vs']['independent']['pair_ratio_median']:.3f}"
                  + f" ({c['wall_s']:.0f} s)", flush=True)
    print(table(result))


if __name__ == "__main__":
    main()
