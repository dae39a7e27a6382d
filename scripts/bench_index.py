"""How fast the results index is: `kit index add` of N bundles and `kit compare --index` of M of them.

    python scripts/bench_index.py [OUT_DIR] [--bundles 1000] [--compare 200] [--rounds 3] [--shape small|h200]

Makes N SYNTHETIC bundles in the real format, with the kit's own bundle writer
(kit.bundle.export.build_bundle): host names ``synthetic-nodeNNN``, every environment marked
``"_synthetic"``, throughputs invented (each host 0.6-1.2x, each run a little noise). Two shapes:

- ``small`` (default): 9 cells (resnet18/50/101 x fp32/amp-fp16/amp-bf16, 3 repeats each) with the
  report.html and charts the kit renders for them (kit.report.export.bundle_files);
- ``h200``: the cells, report and charts of the committed H200 reference bundle
  (references/h200/vm_NVIDIA-H200_native_*.tar.gz: 156 cells, 1.4 MB of results.json), its numbers
  rescaled the same way (so they too are synthetic).

Then, in rounds (the machine is shared: the best of the rounds is the figure, every round is kept):
``kit index add`` of all N into a new index (one process, wall time); the same again (every bundle a
no-op); ``kit compare --index`` of the first M by run date, ``--json -`` and the terminal tables
(COLUMNS=120, to a file); ``kit index history`` of one host (its summary table, from the whole
index); each in a process of its own, with its peak RSS from ``os.wait4``. The targets: 1,000 small
bundles added in 2 minutes, 1,000 full-suite (``h200``) bundles in 5.
Writes index-bench.json to OUT_DIR and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kit.bundle.export import RunFolder, build_bundle  # noqa: E402
from kit.bundle.safe_open import open_bundle  # noqa: E402
from kit.results.schema import CellResult, RunConfig, RunResults  # noqa: E402
from kit.results.stats import summarise_repeats  # noqa: E402

SYNTHETIC = "bench_index.py: synthetic bundle, invented numbers, not a measurement"
DAY = 86400.0
START = 1793491200.0  # 2026-11-01 00:00 UTC
H200_REFERENCE = sorted((ROOT / "references" / "h200").glob("vm_NVIDIA-H200_native_*.tar.gz"))


def small_template() -> tuple[RunResults, dict, dict]:
    """(results, environment, the rendered report files) of a 9-cell synthetic CIFAR run."""
    from kit.report.export import bundle_files

    cells = []
    for i, model in enumerate(("resnet18", "resnet50", "resnet101")):
        for precision, speedup in (("fp32", 1.0), ("amp-fp16", 1.6), ("amp-bf16", 1.55)):
            epoch = (10.0 + 5 * i) / speedup
            reps = [{"epoch_seconds": [epoch * j], "epoch_seconds_median": epoch * j,
                     "throughput_items_per_s": 256 * 60 / (epoch * j), "time_to_first_step_s": 1.5,
                     "peak_memory_bytes": 2 * 2**30, "overflow_steps": 0, "nan_losses": 0, "final_loss": 4.6,
                     "final_metric": 0.01, "metrics": {}} for j in (1.0, 1.01, 0.99)]
            cells.append(CellResult("cifar", model, precision, "torch", "ok",
                                    params={"batch_size": 256, "image_size": 32, "epochs": 1, "steps": 60},
                                    throughput_unit="images", repeats=reps, summary=summarise_repeats(reps),
                                    telemetry={"available": False, "reason": "synthetic"}, data={"source": "synthetic"},
                                    notes=[SYNTHETIC]))
    env = {"_synthetic": SYNTHETIC, "host": {"name": "synthetic-node000"}, "gpus": [{"name": "Synthetic GPU H"}],
           "driver": "580.159", "stack": "cuda12", "torch": "2.11.0", "kit_version": "0.1.0", "data_source": "synthetic"}
    config = RunConfig.of(suite="cifar", data="synthetic", repeats=3, command_line=["kit", "run", "(synthetic)"])
    results = RunResults(run_id="SYNTHETIC-0", config=config, environment=env, cells=cells, status="complete",
                         started_at=START, finished_at=START + 600)
    files = bundle_files(RunFolder(Path("synthetic"), results, env), "synthetic.tar.gz")
    return results, env, files


def h200_template() -> tuple[RunResults, dict, dict]:
    b = open_bundle(H200_REFERENCE[0])
    files = {n: d for n, d in b.files.items() if n.startswith("charts/") or n == "report.html"}
    env = dict(b.environment, _synthetic=SYNTHETIC)
    return b.results, env, files


def variant(template: tuple, i: int, hosts: int, rng: random.Random) -> tuple[RunFolder, str]:
    results, env, _ = template
    host = f"synthetic-node{i % hosts:03d}"
    run = i // hosts
    speed = 0.6 + 0.6 * ((i % hosts) * 7919 % hosts) / max(hosts - 1, 1)  # each host its own 0.6-1.2x
    d = results.to_dict()
    e = json.loads(json.dumps(env))
    if isinstance(e.get("host"), dict):
        e["host"]["name"] = host
    e["hostname"] = host
    d.update(run_id=f"SYNTHETIC-{host}-{run}", started_at=START + run * DAY + (i % hosts) * 60.0, environment=e)
    d["finished_at"] = d["started_at"] + 600
    for c in d["cells"]:
        if c.get("status") == "ok":  # as today's engines record it (kit.results.method), one per engine
            c["method"] = {"engine": f"{c['workload']}/{c['engine']}", "revision": 1, "details": {"synthetic": SYNTHETIC},
                           "settings": {"step": "synthetic", "optimizer": "fused", "loss_scale": "none",
                                        "data": "device-resident", "untimed_warmup_steps": 12, "excluded_steps": 11,
                                        "timed_steps": 100, "batch_size": 256, "image_size": 32}}
        for r in c.get("repeats") or []:
            f = speed * (1 + rng.gauss(0, 0.01))
            if isinstance(r.get("throughput_items_per_s"), (int, float)):
                r["throughput_items_per_s"] *= f
            if isinstance(r.get("epoch_seconds_median"), (int, float)):
                r["epoch_seconds_median"] /= f
            if isinstance(r.get("epoch_seconds"), list):
                r["epoch_seconds"] = [s / f for s in r["epoch_seconds"] if isinstance(s, (int, float))]
        if c.get("repeats") and isinstance(c.get("summary"), dict):
            for key in ("throughput_items_per_s", "epoch_seconds_median"):  # the two numbers rescaled
                if key in c["summary"]:
                    c["summary"][key] = summarise_repeats([{key: r.get(key)} for r in c["repeats"]]).get(key, c["summary"][key])
    res = RunResults.from_dict(d, "synthetic")
    return RunFolder(Path(host), res, e), f"{host}_run{run:03d}"


def make_bundles(shape: str, n: int, hosts: int, out: Path) -> float:
    template = small_template() if shape == "small" else h200_template()
    rng = random.Random(20261203)
    out.mkdir(parents=True)
    t0 = time.perf_counter()
    for i in range(n):
        folder, stem = variant(template, i, hosts, rng)
        (out / f"{stem}.tar.gz").write_bytes(build_bundle(folder, stem, lambda f, name: template[2], created_at=START))
    return time.perf_counter() - t0


#: runs argv[2:] and writes its exit code and peak RSS (os.wait4) to the file argv[1]; a small process of
#: its own, so the peak is the command's, not that of this script, which holds the bundles in memory
WRAP = ("import json, os, subprocess, sys; p = subprocess.Popen(sys.argv[2:]); _, st, ru = os.wait4(p.pid, 0); "
        "open(sys.argv[1], 'w').write(json.dumps({'rc': os.waitstatus_to_exitcode(st), 'maxrss_kib': ru.ru_maxrss, "
        "'cpu_s': ru.ru_utime + ru.ru_stime}))")


def timed(cmd: list, stdout=subprocess.DEVNULL, env=None, cwd: Path = ROOT) -> dict:
    """Wall seconds and peak RSS (MiB) of one command in a process of its own."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        report = Path(fh.name)
    try:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", WRAP, str(report), *map(str, cmd)], cwd=cwd, stdout=stdout,
                              stderr=subprocess.PIPE, env=env)
        wall = time.perf_counter() - t0
        got = json.loads(report.read_text())
    finally:
        report.unlink(missing_ok=True)
    if got["rc"] != 0:
        raise SystemExit(f"{' '.join(map(str, cmd[:6]))} ... failed ({got['rc']}):\n{proc.stderr.decode(errors='replace')[-2000:]}")
    # cpu_s: user + system time of the command and of the processes it waited for (kit index add's
    # verifying workers), which a busy shared machine inflates less than the wall time; peak_rss_mib:
    # the largest of those processes' peaks (os.wait4's ru_maxrss)
    return {"wall_s": round(wall, 3), "cpu_s": round(got["cpu_s"], 3), "peak_rss_mib": round(got["maxrss_kib"] / 1024, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=".", type=Path)
    ap.add_argument("--bundles", type=int, default=1000)
    ap.add_argument("--compare", type=int, default=200)
    ap.add_argument("--hosts", type=int, default=200, help="distinct host names among the bundles")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shape", choices=("small", "h200"), default="small")
    args = ap.parse_args()
    kit = [sys.executable, "-m", "kit"]
    work = Path(tempfile.mkdtemp(prefix="kit-bench-index-"))
    # the commands run a copy of the kit's code compiled once, as `pip install` leaves it (where
    # PYTHONDONTWRITEBYTECODE is set, as on the CI machines, a source checkout is compiled again by
    # every command; the libraries' own bytecode is the installed one either way)
    env = dict(os.environ, PYTHONPATH=str(work / "src"), COLUMNS="120")
    try:
        shutil.copytree(ROOT / "kit", work / "src" / "kit", ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(work / "src" / "kit")], check=True,
                       stdout=subprocess.DEVNULL)
        speed = python_speed()
        print(f"this machine's Python speed: a 10M-step loop in {speed:.2f} s (best of 3)", flush=True)
        bundles = work / "bundles"
        made_s = make_bundles(args.shape, args.bundles, args.hosts, bundles)
        sizes = [p.stat().st_size for p in bundles.glob("*.tar.gz")]
        rounds = []
        for r in range(args.rounds):
            index = work / f"index-{r}.sqlite"
            add = timed(kit + ["index", "add", "--index", str(index), str(bundles)], env=env, cwd=work)
            again = timed(kit + ["index", "add", "--index", str(index), str(bundles)], env=env, cwd=work)
            # the first M runs by date: the index's own order; --since picks them without naming files
            sub = work / f"sub-{r}.sqlite"
            first = sorted(bundles.glob("*.tar.gz"), key=lambda p: (int(p.name.split("_run")[1][:3]), p.name))[:args.compare]
            timed(kit + ["index", "add", "--index", str(sub), *map(str, first)], env=env, cwd=work)
            loop_s = python_speed()  # how fast the machine is just before the compares (it varies)
            with open(work / "compare.json", "wb") as fh:
                cmp_json = timed(kit + ["compare", "--index", str(sub), "--json", "-"], stdout=fh, env=env, cwd=work)
            with open(work / "compare.txt", "wb") as fh:
                cmp_text = timed(kit + ["compare", "--index", str(sub)], stdout=fh, env=env, cwd=work)
            n_sources = len(json.loads((work / "compare.json").read_text())["sources"])
            # one machine's history from the whole index: its summary table (every run of that host)
            with open(work / "history.txt", "wb") as fh:
                hist = timed(kit + ["index", "history", "--index", str(index), "--host", "synthetic-node000"],
                             stdout=fh, env=env, cwd=work)
            rounds.append({"python_loop_10M_s": loop_s, "add": add, "re_add_no_op": again, "compare_json": cmp_json,
                           "compare_terminal": cmp_text, "history_summary": hist,
                           "compared_runs": n_sources, "index_mib": round(index.stat().st_size / 2**20, 1)})
            print(f"round {r + 1} (loop {loop_s:.2f} s): add {args.bundles} {add['wall_s']:.1f} s ({add['peak_rss_mib']:.0f} MiB), "
                  f"no-op re-add {again['wall_s']:.1f} s, compare --index of {n_sources} --json {cmp_json['wall_s']:.2f} s "
                  f"({cmp_json['peak_rss_mib']:.0f} MiB), tables {cmp_text['wall_s']:.2f} s ({cmp_text['peak_rss_mib']:.0f} MiB), "
                  f"history of one host {hist['wall_s']:.2f} s", flush=True)

        def best(key, what):
            return min(r[key][what] for r in rounds)

        summary = {
            "what": "kit index add / kit compare --index on synthetic bundles (scripts/bench_index.py)",
            "synthetic": SYNTHETIC,
            "shape": args.shape,
            "cells_per_bundle": len(open_bundle(next(bundles.glob("*.tar.gz"))).results.cells),
            "bundles": args.bundles, "hosts": args.hosts, "compared": args.compare,
            "bundle_kib_median": round(sorted(sizes)[len(sizes) // 2] / 1024, 1),
            "making_bundles_s": round(made_s, 1),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                        "processor": _cpu_name(), "python_loop_10M_s": speed},
            "best_of_rounds": {
                "add_s": best("add", "wall_s"), "add_s_per_bundle": round(best("add", "wall_s") / args.bundles, 4),
                "add_peak_rss_mib": best("add", "peak_rss_mib"), "re_add_no_op_s": best("re_add_no_op", "wall_s"),
                "compare_json_s": best("compare_json", "wall_s"), "compare_json_cpu_s": best("compare_json", "cpu_s"), "compare_json_peak_rss_mib": best("compare_json", "peak_rss_mib"),
                "compare_terminal_s": best("compare_terminal", "wall_s"), "compare_terminal_cpu_s": best("compare_terminal", "cpu_s"),
                "compare_terminal_peak_rss_mib": best("compare_terminal", "peak_rss_mib"),
                "history_summary_s": best("history_summary", "wall_s"),
            },
            "load_average_at_end": list(os.getloadavg()),
            # small bundles: 1,000 in 2 minutes; full-suite (h200) bundles: 1,000 in 5 minutes
            "targets": {"add_1000_s": 120 if args.shape == "small" else 300, "compare_200_s": 3,
                        "compare_200_peak_rss_mib": 500},
            "rounds": rounds,
        }
        args.out.mkdir(parents=True, exist_ok=True)
        target = args.out / f"index-bench-{args.shape}.json"
        target.write_text(json.dumps(summary, indent=2) + "\n")
        print(json.dumps(summary["best_of_rounds"], indent=2))
        print(f"wrote {target}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def python_speed() -> float:
    """Seconds for a fixed pure-Python loop (10 million additions), best of 3: how fast this machine
    runs the interpreter today. The CI kind of machine varies by 2x between days; the figures above
    scale with this one, so two runs of the benchmark are compared through it."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        total = 0
        for i in range(10_000_000):
            total += i
        best = min(best, time.perf_counter() - t0)
    return round(best, 3)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    main()
