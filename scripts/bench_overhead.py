"""Measure what the kit's own instrumentation costs on a GPU.

1. fastai engine: the kit's timing callback vs a bare ``Learner.fit_one_cycle``
   on the same Learner, data and steps (ResNet-18, amp-fp16, batch 256,
   synthetic data).
2. Telemetry: the torch engine with and without the NVML sampler running, in
   its default configuration (one CUDA graph per step: GPU-bound, the headline
   figure) and in eager mode (launch-bound, where the sampler thread's share of
   the GIL would show most); plus the sampler's own busy time per second.

Each comparison is paired: ``--pairs`` pairs, the order alternating (A B, B A, ...)
so that drift cancels; the figure is the median of the per-pair ratios, with the
min and max beside it. Writes a JSON file with every sample; scripts/perf_table.py
reads it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def paired(a, b, pairs: int) -> tuple[list[float], list[float]]:
    """``pairs`` samples of each of ``a(seed)`` and ``b(seed)``, the order alternating per pair."""
    xs, ys = [], []
    for p in range(pairs):
        if p % 2 == 0:
            xs.append(a(p))
            ys.append(b(p))
        else:
            ys.append(b(p))
            xs.append(a(p))
    return xs, ys


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--pairs", type=int, default=7, help="paired samples per comparison (order alternates)")
    args = ap.parse_args()

    from kit.bench.cifar import fastai_engine, torch_engine
    from kit.bench.cifar.gpu_data import DeviceData
    from kit.bench.cifar.train_config import TrainConfig
    from kit.data.cifar import load_cifar100
    from kit.env import telemetry
    from kit.bench.context import CellContext

    arrays = load_cifar100("data", source="synthetic", seed=0)
    ctx = CellContext(device=args.device, data_dir=Path("data"), data_source="synthetic")
    out: dict = {"device": args.device, "data": "synthetic CIFAR-100-shaped", "steps": args.steps}

    # --- 1. fastai instrumentation
    cfg = TrainConfig(model="resnet18", precision="amp-fp16", device=args.device,
                                   batch_size=256, epochs=1, steps=args.steps)
    fastai_engine.bare_fit(cfg, arrays)  # warm-up: workers, cuDNN, allocator

    def bare(seed: int) -> float:
        return fastai_engine.bare_fit(replace(cfg, seed=seed), arrays)

    def inst(seed: int) -> float:
        return fastai_engine.train_repeat(replace(cfg, seed=seed), arrays, ctx, seed)["fit_seconds"]

    b, i = paired(bare, inst, args.pairs)
    ratios = [x / y for x, y in zip(b, i)]  # bare time / instrumented time: speed relative to bare
    out["fastai_bare_fit_s"], out["fastai_instrumented_fit_s"] = b, i
    out["fastai_pair_ratios"] = ratios
    out["fastai_instrumented_over_bare"] = statistics.median(ratios)
    out["fastai_note"] = (f"median of {len(ratios)} paired ratios, range {min(ratios):.2f}-{max(ratios):.2f}; "
                          f"bare {statistics.median(b):.2f} s vs instrumented {statistics.median(i):.2f} s "
                          f"per {args.steps} steps")

    # --- 2. telemetry sampler
    data = DeviceData.upload(arrays.train_x, arrays.train_y, arrays.test_x, arrays.test_y, args.device)
    self_time: list[float] = []

    def epoch(tcfg) -> float:
        reps, _notes = torch_engine.run_repeats(tcfg, data, ctx, 1)
        return reps[0]["epoch_seconds"][0]

    def measure(name: str, tcfg) -> None:
        epoch(tcfg)  # warm-up (compilation / graph capture, cuDNN autotuning)

        def off(seed: int) -> float:
            return epoch(replace(tcfg, seed=seed))

        def on(seed: int) -> float:
            sampler = telemetry.start_for_device(args.device)
            try:
                return epoch(replace(tcfg, seed=seed))
            finally:
                s = sampler.stop().get("sampler_overhead_s_per_s")
                if isinstance(s, float):
                    self_time.append(s)

        a, b2 = paired(off, on, args.pairs)
        slow = [y / x - 1 for x, y in zip(a, b2)]
        out[f"telemetry_{name}_epoch_s_without"], out[f"telemetry_{name}_epoch_s_with"] = a, b2
        out[f"telemetry_{name}_pair_slowdowns"] = slow
        out[f"telemetry_{name}_overhead_fraction"] = statistics.median(slow)

    graphed = TrainConfig(model="resnet18", precision="amp-bf16", device=args.device,
                                       batch_size=256, epochs=1, steps=args.steps * 6)
    eager = replace(graphed, steps=args.steps * 2, compile="eager")
    measure("graphed", graphed)
    measure("eager", eager)
    out["sampler_self_time_s_per_s"] = self_time
    g, e = out["telemetry_graphed_overhead_fraction"], out["telemetry_eager_overhead_fraction"]
    out["telemetry_overhead_fraction"] = g
    out["telemetry_note"] = (
        f"median of {args.pairs} paired epochs, ResNet-18 amp-bf16: {g:+.2%} in the engine's default one-graph-per-step "
        f"mode (range {min(out['telemetry_graphed_pair_slowdowns']):+.2%} to {max(out['telemetry_graphed_pair_slowdowns']):+.2%}), "
        f"{e:+.2%} in eager mode (range {min(out['telemetry_eager_pair_slowdowns']):+.2%} to "
        f"{max(out['telemetry_eager_pair_slowdowns']):+.2%}); sampler thread busy "
        f"{statistics.median(self_time or [0.0]):.2%} of wall time")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(json.dumps({k: v for k, v in out.items() if not isinstance(v, list)}, indent=2))


if __name__ == "__main__":
    main()
