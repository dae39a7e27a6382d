"""Measure what the kit's own instrumentation costs on a GPU.

1. fastai engine: the kit's timing callback vs a bare ``Learner.fit_one_cycle``
   on the same Learner, data and steps (ResNet-18, amp-fp16, batch 256,
   synthetic data), alternating bare/instrumented, 3 of each; ratio of medians.
2. Telemetry: the torch engine in eager mode (launch-bound, so the sampler
   thread's share of the GIL would show) with and without the NVML sampler
   running, alternating, 3 of each; plus the sampler's own time per second.

Writes a JSON file with every sample; scripts/perf_table.py reads it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()

    from kit.bench.cifar import fastai_engine, torch_engine
    from kit.bench.cifar.gpu_data import DeviceData
    from kit.data.cifar import load_cifar100
    from kit.env import telemetry
    from kit.runner.context import CellContext

    arrays = load_cifar100("data", source="synthetic", seed=0)
    ctx = CellContext(device=args.device, data_dir=Path("data"), data_source="synthetic")
    out: dict = {"device": args.device, "data": "synthetic CIFAR-100-shaped", "steps": args.steps}

    # --- 1. fastai instrumentation
    cfg = torch_engine.TrainConfig(model="resnet18", precision="amp-fp16", device=args.device,
                                   batch_size=256, epochs=1, steps=args.steps)
    fastai_engine.bare_fit(cfg, arrays)  # warm-up: workers, cuDNN, allocator
    bare, inst = [], []
    for r in range(3):
        bare.append(fastai_engine.bare_fit(replace(cfg, seed=r), arrays))
        inst.append(fastai_engine.train_repeat(replace(cfg, seed=r), arrays, ctx, r)["fit_seconds"])
    out["fastai_bare_fit_s"] = bare
    out["fastai_instrumented_fit_s"] = inst
    out["fastai_instrumented_over_bare"] = statistics.median(bare) / statistics.median(inst)
    out["fastai_note"] = (f"bare {statistics.median(bare):.2f} s vs instrumented {statistics.median(inst):.2f} s "
                          f"for {args.steps} steps (medians of 3)")

    # --- 2. telemetry sampler
    data = DeviceData.upload(arrays.train_x, arrays.train_y, arrays.test_x, arrays.test_y, args.device)
    tcfg = torch_engine.TrainConfig(model="resnet18", precision="amp-bf16", device=args.device,
                                    batch_size=256, epochs=1, steps=args.steps * 2, compile="off")

    def one(seed: int) -> float:
        reps, _notes = torch_engine.run_repeats(replace(tcfg, seed=seed), data, ctx, 1)
        return reps[0]["epoch_seconds"][0]

    one(0)  # warm-up
    off, on, self_time = [], [], []
    for r in range(3):
        off.append(one(r))
        sampler = telemetry.start_for_device(args.device)
        on.append(one(r))
        summary = sampler.stop()
        self_time.append(summary.get("sampler_overhead_s_per_s"))
    out["epoch_s_without_sampler"] = off
    out["epoch_s_with_sampler"] = on
    out["sampler_self_time_s_per_s"] = self_time
    slowdown = statistics.median(on) / statistics.median(off) - 1
    out["telemetry_overhead_fraction"] = max(0.0, slowdown)
    out["telemetry_note"] = (f"eager ResNet-18 epoch {statistics.median(off):.3f} s without vs "
                             f"{statistics.median(on):.3f} s with the 5 Hz sampler (medians of 3); "
                             f"sampler busy {statistics.median([s for s in self_time if isinstance(s, float)] or [0]):.2%} of wall time")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(json.dumps({k: v for k, v in out.items() if not isinstance(v, list)}, indent=2))


if __name__ == "__main__":
    main()
