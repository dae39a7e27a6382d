"""What a cell in a process of its own costs (cell isolation; target: at most 2 s a cell).

    python scripts/bench_isolation.py [OUT_DIR] [--device cuda] [--rounds 3] [--precisions fp32,tf32,amp-fp16,amp-bf16]

Runs the same small run (LSTM ``apex-2018``, one cell per precision, ``--max-batches 60``, 1 repeat,
synthetic data) three ways, in alternating rounds: every cell in the runner's process (``--isolate
none``); every cell in a process of its own started by multiprocessing's fork server (``--isolate all``,
the kit's way where the platform has it: kit.runner.isolate.start_method); and the same with each child
a freshly spawned interpreter (what the kit did before the fork server). Each way is one ``kit run`` in a
fresh interpreter, so the first cell's start-up (imports, CUDA) is in every way's figure alike.

Per way: the median over rounds of each cell's wall time (``finished_at - started_at`` in results.json)
and of the cell's steady throughput. Isolation's cost per cell = isolated median - in-process median,
over the cells after the first (the first isolated cell also starts the fork server). Prints a table and
writes isolation.json to OUT_DIR (default: the current folder); isolation-rounds.json there holds every
finished way's cells as soon as it finishes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: how each way starts the kit: (--isolate, start method or None for the kit's own choice)
WAYS = {"in-process": ("none", None), "fork server": ("all", None), "spawn": ("all", "spawn")}
#: runs the kit's CLI with kit.runner.isolate.start_method replaced (the "spawn" way only)
LAUNCH = ("import sys, kit.runner.isolate as iso; m = sys.argv.pop(1); "
          "iso.start_method = (lambda: m) if m != '-' else iso.start_method; "
          "from kit.cli.main import main; sys.argv[0] = 'kit'; main()")


def run_way(way: str, args, work: Path) -> list[dict]:
    isolate, method = WAYS[way]
    out = work / way.replace(" ", "-")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-c", LAUNCH, method or "-", "run", "--suite", "lstm", "--preset", "apex-2018",
           "--precisions", args.precisions, "--data", "synthetic", "--device", args.device,
           "--repeats", "1", "--max-batches", str(args.max_batches), "--skip-checks", "--isolate", isolate,
           "--results-dir", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    found = sorted(out.glob("*/results.json"))
    if proc.returncode != 0 or not found:
        raise SystemExit(f"{way}: kit run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    cells = json.loads(found[-1].read_text())["cells"]
    return [{"precision": c["precision"], "status": c["status"], "wall_s": c["finished_at"] - c["started_at"],
             "throughput": ((c.get("summary") or {}).get("throughput_items_per_s") or {}).get("median")}
            for c in cells]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=".")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--precisions", default="fp32,tf32,amp-fp16,amp-bf16",
                    help="at least two (on the CPU: fp32,amp-bf16)")
    ap.add_argument("--max-batches", type=int, default=60)
    args = ap.parse_args()
    order = list(WAYS)
    runs: dict = {w: [] for w in order}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kit-isolation-") as tmp:
        for r in range(args.rounds):
            for way in (order if r % 2 == 0 else order[::-1]):
                runs[way].append(run_way(way, args, Path(tmp)))
                walls = ", ".join(f"{c['precision']} {c['wall_s']:.2f} s" for c in runs[way][-1])
                print(f"round {r + 1}/{args.rounds}: {way} done: {walls}", file=sys.stderr, flush=True)
                # every finished way's cells, as measured, so a command cut short keeps them
                (Path(args.out) / "isolation-rounds.json").write_text(json.dumps(runs, indent=2))
    per_way = {}
    for way, rounds in runs.items():
        cells = []
        for i in range(len(rounds[0])):
            walls = [rnd[i]["wall_s"] for rnd in rounds]
            tputs = [rnd[i]["throughput"] for rnd in rounds if rnd[i]["throughput"]]
            cells.append({"precision": rounds[0][i]["precision"], "status": sorted({rnd[i]["status"] for rnd in rounds}),
                          "wall_s_median": statistics.median(walls), "wall_s": walls,
                          "throughput_median": statistics.median(tputs) if tputs else None})
        per_way[way] = cells
    base = per_way["in-process"]
    cost = {}
    for way in ("fork server", "spawn"):
        later = [c["wall_s_median"] - b["wall_s_median"] for c, b in zip(per_way[way][1:], base[1:])]
        cost[way] = {"first_cell_s": per_way[way][0]["wall_s_median"] - base[0]["wall_s_median"],
                     "later_cells_s_median": statistics.median(later)}
    report = {"device": args.device, "rounds": args.rounds, "max_batches": args.max_batches,
              "precisions": args.precisions, "ways": per_way, "isolation_cost": cost,
              "method": __doc__.split("\n\n")[2].replace("\n", " ")}
    (Path(args.out) / "isolation.json").write_text(json.dumps(report, indent=2))
    print("| cell | in-process s | fork server s | spawn s | tokens/s in-process / fork server / spawn |")
    print("| --- | --- | --- | --- | --- |")
    for i, b in enumerate(base):
        f, s = per_way["fork server"][i], per_way["spawn"][i]
        tp = " / ".join(f"{c['throughput_median']:,.0f}" if c["throughput_median"] else "-" for c in (b, f, s))
        print(f"| {b['precision']} | {b['wall_s_median']:.2f} | {f['wall_s_median']:.2f} | {s['wall_s_median']:.2f} | {tp} |")
    for way, c in cost.items():
        print(f"{way}: +{c['later_cells_s_median']:.2f} s a cell after the first (first cell +{c['first_cell_s']:.2f} s)")


if __name__ == "__main__":
    main()
