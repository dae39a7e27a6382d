"""Where DistributedDataParallel loses time at world size 1, without the kit around it.

    python scripts/probe_ddp_h200.py [OUT_DIR]      (one CUDA GPU; about a minute on an H200)

ResNet-18 (32 px, batch 256) and ResNet-50 (224 px, batch 128), amp-bf16, channels_last, SGD with
Nesterov momentum, eager: the plain model against DDP with its defaults and with the options the kit
passes (kit.bench.distributed.state), each on its own copy of the model, in one process of an NCCL
group of one, in rounds whose order alternates. Prints ms per step (wall, synchronised) and the host's
share, and writes ddp_probe.json. A probe for the design of the kit's DDP wrapper: the kit's own check
is scripts/bench_ddp_h200.sh."""
import os, time, statistics, json, sys
import torch, torch.distributed as dist, torchvision
from torch.nn.parallel import DistributedDataParallel as DDP
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29512")
dist.init_process_group("nccl", rank=0, world_size=1)
torch.cuda.set_device(0); torch.backends.cudnn.benchmark = True
out = {}
def bench(model_name, size, bs, steps):
    base0 = getattr(torchvision.models, model_name)(num_classes=100).cuda().to(memory_format=torch.channels_last)
    x = torch.randn(bs, 3, size, size, device="cuda").contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 100, (bs,), device="cuda")
    variants = {
        "plain": lambda: base,
        "ddp-default": lambda: DDP(base, device_ids=[0]),
        "ddp-no-bcast": lambda: DDP(base, device_ids=[0], broadcast_buffers=False),
        "ddp-bucketview-no-bcast": lambda: DDP(base, device_ids=[0], broadcast_buffers=False, gradient_as_bucket_view=True),
        "ddp-static": lambda: DDP(base, device_ids=[0], broadcast_buffers=False, gradient_as_bucket_view=True, static_graph=True),
    }
    import copy
    models, opts = {}, {}
    for k, f in variants.items():
        base = copy.deepcopy(base0); models[k] = f(); opts[k] = torch.optim.SGD(base.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=5e-4)
    def run(m, n, opt):
        torch.cuda.synchronize(); t0 = time.perf_counter(); h = 0.0
        for _ in range(n):
            th = time.perf_counter()
            with torch.autocast("cuda", torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
            h += time.perf_counter() - th
        torch.cuda.synchronize(); return (time.perf_counter() - t0) / n * 1000, h / n * 1000
    for k, m in models.items(): run(m, 10, opts[k])
    res = {k: [] for k in models}
    for rnd in range(4):
        for k, m in (models.items() if rnd % 2 == 0 else reversed(list(models.items()))):
            res[k].append(run(m, steps, opts[k]))
    for k, v in res.items():
        ms = statistics.median(a for a, _ in v); hs = statistics.median(b for _, b in v)
        print(f"{model_name} {size}px bs{bs}: {k:26s} {ms:7.2f} ms/step (host {hs:6.2f} ms) {bs/ms*1000:9.0f} img/s", flush=True)
        out[f"{model_name}-{k}"] = {"ms_per_step": ms, "host_ms_per_step": hs}
bench("resnet18", 32, 256, 60)
bench("resnet50", 224, 128, 20)
json.dump(out, open(os.path.join(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "."), "ddp_probe.json"), "w"), indent=1)
