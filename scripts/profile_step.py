"""Where does a torch-engine training step spend its time? (GPU; a diagnostic, not a test)

    python scripts/profile_step.py --model resnet18 --precision amp-bf16 --compile reduce-overhead

Prints ms/step and images/s over timed steps after warm-up, the GPU-busy
fraction (sum of kernel times / wall time) and the top operators by CPU and
device time from torch.profiler, so a missed throughput target can be
explained (launch-bound vs math-bound). Synthetic CIFAR-shaped data.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--precision", default="amp-bf16")
    ap.add_argument("--compile", default="reduce-overhead", help="eager, default, reduce-overhead or cuda-graph (the whole step)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args()

    import torch

    from kit.bench.cifar.gpu_data import DeviceData
    from kit.bench.cifar.train_config import TrainConfig
    from kit.bench.cifar.trainer import Trainer
    from kit.data.synthetic import cifar100_like

    torch._logging.set_logs(perf_hints=True)

    def sync() -> None:
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
    device = args.device
    torch.backends.cudnn.benchmark = device.startswith("cuda")
    arrays = cifar100_like(0, n_train=100 * (-(-args.batch_size * 8 // 100)), n_test=1000)
    data = DeviceData.upload(arrays.train_x, arrays.train_y, arrays.test_x, arrays.test_y, device)
    cfg = TrainConfig(model=args.model, precision=args.precision, device=device, batch_size=args.batch_size,
                      steps=args.steps, compile="eager" if args.compile == "eager" else "on")
    mode = None if args.compile == "eager" else args.compile
    if mode == "cuda-graph":
        from kit.bench.cifar.graphed import GraphedTrainer
        from kit.bench.cifar.schedule import one_cycle_factor

        total = args.steps + 30
        # as the torch engine builds it: the uint8 batch converted inside the captured step
        tr = GraphedTrainer(cfg, total, lambda s: cfg.max_lr() * one_cycle_factor(s, total),
                            prepare=lambda u8: data.to_input(u8, 32))
    else:
        tr = Trainer(cfg, total_steps=args.steps + 30, compile_mode=mode)
    bs = args.batch_size
    raw = [data.train_x[i * bs:(i + 1) * bs] for i in range(8)]
    xs = raw if mode == "cuda-graph" else [data.to_input(x, 32) for x in raw]
    ys = [data.train_y[i * bs:(i + 1) * bs] for i in range(8)]
    def run(steps: int) -> float:
        """Seconds for ``steps`` training steps, the device synchronised at the end."""
        t0 = time.perf_counter()
        for i in range(steps):
            tr.step(xs[i % 8], ys[i % 8])
        sync()
        return time.perf_counter() - t0

    warm = run(15)
    dt = run(args.steps) / args.steps
    print(f"{args.model} {args.precision} compile={args.compile}: warm-up {warm:.1f} s, "
          f"{dt * 1e3:.2f} ms/step, {bs / dt:,.0f} images/s (batch {bs}, data pre-normalised)")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            wall = run(10)
        events = prof.key_averages()
        kernel_us = sum(e.self_device_time_total for e in events if e.device_type.name == "CUDA")
        print(f"GPU busy {kernel_us / 1e6 / wall:.0%} of wall time over 10 profiled steps")
        print(events.table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=60))
        print(events.table(sort_by="self_device_time_total", row_limit=8, max_name_column_width=60))


if __name__ == "__main__":
    main()
