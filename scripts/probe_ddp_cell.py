"""Splits what `kit run --gpus 1` loses on one GPU between the kit's data-parallel step and the spawned
rank process around it.

    python scripts/probe_ddp_cell.py [OUT_DIR] [--rounds 2] [--device cuda:0]   (one CUDA GPU; about 1.5 min on an H200)

The kit's own CIFAR cell of scripts/bench_ddp_h200.sh's judged row (torch engine, ResNet-50, 224 px,
batch 128, amp-bf16, 40 steps, eager, synthetic data, 3 repeats), run by kit.bench.api.run_cell in this
one process, alternately plain and with the data-parallel state on (an NCCL group of one, the model in
DDP as kit.bench.distributed.state builds it): the same code a spawned rank runs, without the spawn.
Compare its two medians with bench_ddp_h200.sh's plain and `--gpus 1` rows: if the in-process
data-parallel cell loses as much as `--gpus 1` did, the cost is in the kit's data-parallel step; if it
loses only DDP's own hooks (references/h200/ddp/probe.json), the cost is in the spawned rank. A third
way runs the same data-parallel step without torch's all-reduce communication hook (DDP's own reducer
path), so one machine says what the hook changes (references/h200/ddp/run5-probe-with-hook/).
Writes ddp_cell_probe.json to OUT_DIR (default: the current folder).
"""

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: the ways the cell runs, in the order of the odd rounds (even rounds reverse it): plain; the kit's
#: data-parallel step (DDP with torch's all-reduce communication hook, kit.bench.distributed.state);
#: the same without the hook (DDP's own reducer path), to measure what the hook changes on a GPU
WAYS = ("plain", "data-parallel-in-process", "data-parallel-no-hook")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=".")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--precision", default="amp-bf16")
    ap.add_argument("--compile", default="eager", help="the cell's --compile (eager: DDP's eager step; off: the "
                    "captured step, which a rank captures with its all-reduce)")
    args = ap.parse_args()

    import torch
    import torch.distributed as dist

    from kit.bench.api import resolve_device, run_cell
    from kit.bench.context import CellContext
    from kit.bench.distributed import state
    from kit.results.schema import RunConfig
    from kit.runner.plan import build_plan

    device = resolve_device(args.device)  # "cpu" (gloo) runs the same code, to check it without a GPU
    backend = "nccl" if device.startswith("cuda") else "gloo"
    work = Path(tempfile.mkdtemp(prefix="kit-ddp-cell-"))
    config = RunConfig.of(suite="cifar", data="synthetic", data_dir=str(work / "data"), device=device,
                       models=[args.model], precisions=[args.precision], engines=["torch"], repeats=3,
                       steps=args.steps, batch_size=args.batch_size, image_size=args.image_size, compile=args.compile)
    (spec,) = build_plan(config).cells
    ctx = CellContext(device=device, data_dir=work / "data", data_source="synthetic", seed=config.seed,
                      repeats=config.repeats)
    dist.init_process_group(backend, init_method="file://" + str(work / "store"), rank=0, world_size=1)
    medians = {way: [] for way in WAYS}
    repeats = {way: [] for way in WAYS}  # every repeat's throughput, by round
    ddp_used: dict = {}  # the DDP options and hook each data-parallel way ran with
    step_modes: dict = {}  # the step each way ran (eager, or cuda-graph: the captured step)
    try:
        for r in range(args.rounds):
            for way in (WAYS if r % 2 == 0 else tuple(reversed(WAYS))):
                info = (state.activate(state.RankInfo(0, 1, backend, device, comm_hook=way != "data-parallel-no-hook"))
                        if way != "plain" else None)
                try:
                    result = run_cell(spec, ctx)
                finally:
                    state.deactivate()
                if info is not None:
                    ddp_used[way] = info.ddp_options
                if result.status != "ok":
                    sys.exit(f"{way}: the cell {result.status}: {result.reason}")
                step_modes[way] = sorted({str(rec.get("compile_mode")) for rec in result.repeats})
                m = result.summary["throughput_items_per_s"]["median"]
                medians[way].append(m)
                repeats[way].append([r.get("throughput_items_per_s") for r in result.repeats])
                print(f"round {r + 1} {way:26s} {m:9.1f} images/s", flush=True)
    finally:
        dist.destroy_process_group()
        shutil.rmtree(work, ignore_errors=True)
    plain = statistics.median(medians["plain"])
    ddp = statistics.median(medians["data-parallel-in-process"])
    no_hook = statistics.median(medians["data-parallel-no-hook"])
    report = {"cell": spec.cell_id, "params": spec.params, "device": torch.cuda.get_device_name(device) if backend == "nccl" else "cpu",
              "torch": torch.__version__, "rounds": args.rounds, "medians_by_round": medians,
              "repeats_by_round": repeats, "ddp_options": dict(ddp_used),
              "compile": args.compile, "step_modes": step_modes,
              "plain_images_per_s": plain, "data_parallel_in_process_images_per_s": ddp,
              "in_process_over_plain": ddp / plain, "no_hook_images_per_s": no_hook, "no_hook_over_plain": no_hook / plain,
              "data": "synthetic",
              "method": "kit.bench.api.run_cell in one process, plain and with the data-parallel state on "
                        "(a process group of one), alternating by round; each figure the cell's median of 3 repeats"}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "ddp_cell_probe.json").write_text(json.dumps(report, indent=2))
    print(f"plain {plain:.1f}, data-parallel in process {ddp:.1f} images/s: ratio {ddp / plain:.3f}; "
          f"without the communication hook {no_hook:.1f}: ratio {no_hook / plain:.3f}")


if __name__ == "__main__":
    main()
