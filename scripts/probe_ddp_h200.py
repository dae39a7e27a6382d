"""Where DistributedDataParallel loses time at world size 1, without the kit around it.

    python scripts/probe_ddp_h200.py [OUT_DIR]      (one CUDA GPU; about a minute on an H200)

ResNet-18 (32 px, batch 256) and ResNet-50 (224 px, batch 128), amp-bf16, channels_last, SGD with
Nesterov momentum, eager: the plain model against DDP with its defaults and with the options the kit
passes (kit.bench.distributed.state), each on its own copy of the model, in one process of an NCCL
group of one, in rounds whose order alternates. Prints ms per step (wall, synchronised) and the host's
share, and writes ddp_probe.json. A probe for the design of the kit's DDP wrapper: the kit's own check
is scripts/bench_ddp_h200.sh."""

import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the kit, for the "ddp-kit" variant
#: DDP's options per variant (None: the plain model), in the order they run
VARIANTS = {
    "plain": None,
    "ddp-default": {},
    "ddp-no-bcast": {"broadcast_buffers": False},
    "ddp-bucketview-no-bcast": {"broadcast_buffers": False, "gradient_as_bucket_view": True},
    "ddp-static": {"broadcast_buffers": False, "gradient_as_bucket_view": True, "static_graph": True},
    "ddp-kit": "kit",  # what kit.bench.distributed.state.wrap_model builds (its options, no later DDP statistics)
}


def bench(model_name: str, size: int, batch: int, steps: int, rounds: int = 4) -> dict:
    import torch
    import torchvision
    from torch.nn.parallel import DistributedDataParallel

    from kit.bench.distributed.state import DDP_STATS_WARMUP, build_ddp

    base = getattr(torchvision.models, model_name)(num_classes=100).cuda().to(memory_format=torch.channels_last)
    x = torch.randn(batch, 3, size, size, device="cuda").contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 100, (batch,), device="cuda")
    models, opts = {}, {}
    for name, options in VARIANTS.items():
        own = copy.deepcopy(base)  # one DDP per module: their hooks would collide on a shared one
        if options == "kit":
            models[name] = build_ddp(DistributedDataParallel, own, device_ids=[0])
        else:
            models[name] = own if options is None else DistributedDataParallel(own, device_ids=[0], **options)
        opts[name] = torch.optim.SGD(own.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=5e-4)

    def run(name: str, n: int) -> tuple:
        model, opt = models[name], opts[name]
        torch.cuda.synchronize()
        t0, host = time.perf_counter(), 0.0
        for _ in range(n):
            th = time.perf_counter()
            with torch.autocast("cuda", torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            host += time.perf_counter() - th
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / n * 1000, host / n * 1000

    for name in models:
        run(name, DDP_STATS_WARMUP)  # warm-up: cuDNN autotuning, DDP's first buckets and its statistics syncs
    times = {name: [] for name in models}
    for r in range(rounds):
        for name in (list(models) if r % 2 == 0 else list(reversed(models))):
            times[name].append(run(name, steps))
    out = {}
    for name, v in times.items():
        ms, hs = statistics.median(a for a, _ in v), statistics.median(b for _, b in v)
        print(f"{model_name} {size}px bs{batch}: {name:26s} {ms:7.2f} ms/step (host {hs:6.2f} ms) "
              f"{batch / ms * 1000:9.0f} img/s", flush=True)
        out[f"{model_name}-{name}"] = {"ms_per_step": ms, "host_ms_per_step": hs}
    return out


def main() -> None:
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    torch.backends.cudnn.benchmark = True
    out = {**bench("resnet18", 32, 256, 60), **bench("resnet50", 224, 128, 20)}
    folder = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", ".")
    with open(os.path.join(folder, "ddp_probe.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
