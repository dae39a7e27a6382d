"""Time `kit compare` on a SYNTHETIC fleet of bundles read from tarballs, and the fleet page's size.

Builds N synthetic bundles (invented numbers: host names ``synthetic-node000``..., one H200 cell set
of six CIFAR cells, speeds spread 0.6-1.2x, three repeats a cell) in the real bundle format, through
the kit's own writer (kit.bundle.export.build_bundle: results.json, env.json, journal, manifest with
every sha256). The report.html and charts a bundle carries are rendered once, for the first machine,
by the kit's report code, and shared by all (the numbers differ per bundle, the report's bytes do
not: the cost of reading and verifying a real-sized bundle is kept without rendering 500 reports).

Then, for each N, it times the library call behind `kit compare` from the tarballs
(kit.compare.engine.compare_paths + the terminal rendering to a null console), in a fresh process per
run (so peak RSS, from resource.getrusage, is that run's), and keeps the minimum of ``--runs`` runs (the
machine may be shared). Writes JSON with every run.

    python scripts/bench_fleet_compare.py --out references/cpu-vm/fleet-compare/results.json
    python scripts/bench_fleet_compare.py --write-fleet /tmp/fleet --n 64    # just the bundles

``--doctor`` times the fleet views of 200 machines of the full suite (156 cells, shaped on the H200
reference bundle; :func:`doctor_fleet`: two GPU models, four machines faulty in different ways),
recorded in a results index: the summary view, the findings as JSON and the fleet page
(:func:`doctor_bench`). The tests build the same fleet in memory (:func:`suite_sources`).

    python scripts/bench_fleet_compare.py --doctor --n 200 --runs 3 --out references/cpu-vm/fleet-compare/doctor.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SYNTHETIC_NOTE = "synthetic: invented numbers for a benchmark of kit compare, not a measurement"
CELLS = [("resnet18", "fp32", 1.0), ("resnet18", "amp-fp16", 1.6), ("resnet18", "amp-bf16", 1.68),
         ("resnet50", "fp32", 0.4), ("resnet50", "amp-fp16", 0.72), ("resnet50", "amp-bf16", 0.75)]


def synthetic_results(i: int, speed: float, rng: random.Random, host: str | None = None,
                      driver: str = "580.159.04", gpu: str = "NVIDIA H200", noise: float = 0.01,
                      jitter: tuple | None = None):
    """One synthetic machine's RunResults: six CIFAR cells, three repeats, ``speed`` x the base throughput."""
    from kit.results.schema import CellResult, RunConfig, RunResults
    from kit.results.stats import summarise_repeats

    cells = []
    items = 256 * 60
    for model, precision, rel in CELLS:
        base_s = items / (50_000.0 * rel * speed)
        repeats = []
        for r in range(3):
            s = base_s * (jitter[r] if jitter else 1.0 + rng.gauss(0.0, noise))
            repeats.append({"epoch_seconds": [s], "epoch_seconds_median": s, "throughput_items_per_s": items / s,
                            "time_to_first_step_s": 1.5, "peak_memory_bytes": 2 * 2**30, "overflow_steps": 0,
                            "nan_losses": 0, "final_loss": 4.6, "final_metric": 0.01, "metrics": {}})
        cells.append(CellResult("cifar", model, precision, "torch", "ok",
                                params={"batch_size": 256, "image_size": 32, "epochs": 1, "steps": 60},
                                throughput_unit="images", repeats=repeats, summary=summarise_repeats(repeats),
                                telemetry={"available": False, "reason": "synthetic"}, data={"source": "synthetic"},
                                notes=[SYNTHETIC_NOTE]))
    env = {"_synthetic": SYNTHETIC_NOTE, "hostname": host or f"synthetic-node{i:03d}",
           "gpus": [{"name": gpu, "memory_total_bytes": 141 * 2**30}], "driver": driver, "stack": "cuda12",
           "torch": "2.11.0", "cudnn": "91900", "python": "3.12.0", "data_source": "synthetic", "kit_version": "0.1.0"}
    config = RunConfig.of(suite="cifar", data="synthetic", repeats=3, command_line=["kit", "run", "(synthetic)"])
    t0 = 1796000000.0 + i * 3600
    return RunResults(run_id=f"SYNTHETIC-{i:04d}", config=config, environment=env, status="complete",
                      started_at=t0, finished_at=t0 + 600, cells=cells)


def fleet_machines(n: int, profile: str, rng: random.Random):
    """(speed, gpu, jitter) per machine. ``spread``: one GPU model, speeds uniform in 0.6-1.2x (the
    fleet a new user tried first). ``groups``: five eighths H200s within ±1.5% of each other but for node017
    (0.62x) and node023 (noisy: repeats 0.7x-1.3x around the same median), the rest H100s at 0.62x."""
    out = []
    for i in range(n):
        if profile == "spread":
            out.append((rng.uniform(0.6, 1.2), "NVIDIA H200", None))
        elif i < n * 5 // 8:
            speed = 0.62 if i == 17 else rng.uniform(0.985, 1.015)
            out.append((speed, "NVIDIA H200", (1.0, 1.3, 0.7) if i == 23 else None))
        else:
            out.append((rng.uniform(0.61, 0.63), "NVIDIA H100", None))
    return out


# --- the full suite: 200 machines x 156 cells, with machines faulty in different ways ------------------

#: the committed H200 reference bundle: its cells (156: CIFAR on two engines and seven precisions, the
#: batch curves, the LSTM) give the full suite's shape and each cell's base throughput
H200_REFERENCE = "references/h200/vm_NVIDIA-H200_native_20261130-141944.tar.gz"
#: the engines whose loop the host paces (kit.bench.methods.HOST_PACED; their method record says so)
_HOST_PACED = ("fastai", "kit")
_SUITE: list = []


def suite_shape() -> list:
    """The reference bundle's cells (CellResults), read once: their identity, status, parameters and
    median throughput are the template every synthetic machine rescales."""
    if not _SUITE:
        from kit.bundle.safe_open import open_bundle

        _SUITE.extend(open_bundle(Path(__file__).resolve().parents[1] / H200_REFERENCE).results.cells)
    return _SUITE


@dataclass(frozen=True)
class Machine:
    """One synthetic machine of a fleet: its host name, GPU model, speed (x the reference), the
    precisions where it is slower (``slow_in``: precision -> factor), whether only its GPU-paced cells
    are slower (a power cap does not slow a loop the host paces), its repeats' noise (a fraction) and
    its GPU's power limit (W)."""

    host: str
    gpu: str = "NVIDIA H200"
    speed: float = 1.0
    slow_in: tuple = ()
    gpu_paced_factor: float = 1.0
    noise: float = 0.01
    power_limit_w: float = 700.0


def doctor_fleet(n: int = 200, seed: int = 0, healthy: bool = False) -> list[Machine]:
    """``n`` machines, three fifths H200s and the rest H100s (0.62x), each within +-1.5% of its model
    ("silicon lottery") with 1% noise between repeats; unless ``healthy``, four of the H200s are
    faulty: node011 20% slower everywhere, node022 20% slower in amp-fp16 only, node033 noisy (its
    repeats scatter 12%, its medians unchanged), node044 power-capped at 500 W (GPU-paced cells 15%
    slower, host-paced ones not)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        h200 = i < n * 3 // 5
        m = Machine(f"synthetic-node{i:03d}", "NVIDIA H200" if h200 else "NVIDIA H100",
                    rng.uniform(0.985, 1.015) * (1.0 if h200 else 0.62), power_limit_w=700.0 if h200 else 700.0)
        if not healthy and i == 11:
            m = replace(m, speed=m.speed * 0.8)
        elif not healthy and i == 22:
            m = replace(m, slow_in=(("amp-fp16", 0.8),))
        elif not healthy and i == 33:
            m = replace(m, noise=0.12)
        elif not healthy and i == 44:
            m = replace(m, gpu_paced_factor=0.85, power_limit_w=500.0)
        out.append(m)
    return out


def suite_results(i: int, m: Machine, rng: random.Random):
    """Machine ``m``'s RunResults of the full suite (:func:`suite_shape`), synthetic: every ok cell's
    three repeats at the reference's median throughput x the machine's speed, each with its noise."""
    from kit.results.schema import CellResult, RunConfig, RunResults
    from kit.results.stats import summarise_repeats

    slow = dict(m.slow_in)
    cells = []
    for ref in suite_shape():
        paced = ref.engine in _HOST_PACED
        method = {"engine": f"{ref.workload}/{ref.engine}", "revision": 1, "settings": {},
                  **({"paced_by": "host"} if paced else {})}
        if ref.status != "ok":
            cells.append(CellResult(ref.workload, ref.model, ref.precision, ref.engine, ref.status, params=ref.params,
                                    reason=ref.reason, throughput_unit=ref.throughput_unit, notes=[SYNTHETIC_NOTE]))
            continue
        base = ref.summary["throughput_items_per_s"]["median"]
        speed = m.speed * slow.get(ref.precision, 1.0) * (1.0 if paced else m.gpu_paced_factor)
        items = base * 10.0
        repeats = []
        for _ in range(3):
            tp = base * speed * (1.0 + rng.gauss(0.0, m.noise))
            repeats.append({"epoch_seconds": [items / tp], "epoch_seconds_median": items / tp,
                            "throughput_items_per_s": tp, "metrics": {}})
        cells.append(CellResult(ref.workload, ref.model, ref.precision, ref.engine, "ok", params=ref.params,
                                throughput_unit=ref.throughput_unit, repeats=repeats, summary=summarise_repeats(repeats),
                                telemetry={"available": False, "reason": "synthetic"}, data={"source": "synthetic"},
                                notes=[SYNTHETIC_NOTE], method=method,
                                host={"cores": 32, "load_1m_start": 0.5, "load_1m_end": 0.6, "steal_pct": 0.0,
                                      "busy": None, "source": "synthetic"}))
    env = {"_synthetic": SYNTHETIC_NOTE, "host": {"name": m.host},
           "nvml": {"available": True, "state": "ok", "driver_version": "580.159.04", "gpu_count": 1,
                    "gpus": [{"index": 0, "name": m.gpu, "power_limit_w": m.power_limit_w,
                              "clocks_mhz": {"sm": 1980, "memory": 3201}}]},
           "cpu": {"model": "Synthetic Xeon", "logical_cores": 32, "usable_cores": 32},
           "stack": "cuda12", "torch": "2.11.0", "cudnn": "91900", "python": "3.12.0", "data_source": "synthetic",
           "kit_version": "0.2.0"}
    config = RunConfig.of(suite="all", data="synthetic", repeats=3, command_line=["kit", "run", "(synthetic)"])
    t0 = 1796000000.0 + i * 3600
    return RunResults(run_id=f"SYNTHETIC-SUITE-{i:04d}", config=config, environment=env, status="complete",
                      started_at=t0, finished_at=t0 + 3600, cells=cells)


def suite_sources(machines: list[Machine], seed: int = 0) -> list:
    """The fleet as in-memory Sources (kit.compare.load.Source, as a bundle's are read), without
    writing tarballs: what the tests and the in-process timings compare."""
    from kit.bundle.envinfo import summarise_environment
    from kit.compare.load import Source, _label

    rng = random.Random(seed)
    out = []
    for i, m in enumerate(machines):
        res = suite_results(i, m, rng)
        env = summarise_environment(res.environment, res.config, res.cells)
        out.append(Source(i, _label(i), Path(f"{m.host}.tar.gz"), "bundle", res, res.environment, env, False))
    return out


def write_fleet(folder: Path, n: int, seed: int = 0, profile: str = "spread") -> list[Path]:
    """``n`` synthetic bundles in ``folder`` (:func:`fleet_machines`); returns their paths in order."""
    from kit.bundle.export import RunFolder, build_bundle
    from kit.report.export import bundle_files

    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    shared: dict = {}
    paths = []
    for i, (speed, gpu, jitter) in enumerate(fleet_machines(n, profile, rng)):
        res = synthetic_results(i, speed, rng, gpu=gpu, jitter=jitter)
        run = RunFolder(folder, res, res.environment)

        def render(rf, name):
            if not shared:
                shared.update(bundle_files(rf, name))
            return shared

        stem = f"synthetic-node{i:03d}_{gpu.replace(' ', '-')}_cuda12"
        path = folder / f"{stem}.tar.gz"
        path.write_bytes(build_bundle(run, stem, render, created_at=res.started_at))
        paths.append(path)
    return paths


def write_doctor_fleet(folder: Path, n: int = 200) -> list[Path]:
    """The :func:`doctor_fleet` as ``n`` bundles of the full suite in ``folder``, in the real format
    (kit.bundle.export.build_bundle), each carrying the reference bundle's report.html and charts
    (its numbers are the synthetic machine's; the report's bytes are the reference's, as
    scripts/bench_index.py's h200 shape does)."""
    from kit.bundle.export import RunFolder, build_bundle
    from kit.bundle.safe_open import open_bundle

    ref = open_bundle(Path(__file__).resolve().parents[1] / H200_REFERENCE)
    report = {name: data for name, data in ref.files.items() if name.startswith("charts/") or name == "report.html"}
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    paths = []
    for i, m in enumerate(doctor_fleet(n)):
        res = suite_results(i, m, rng)
        stem = f"{m.host}_{m.gpu.replace(' ', '-')}_cuda12"
        path = folder / f"{stem}.tar.gz"
        path.write_bytes(build_bundle(RunFolder(folder, res, res.environment), stem, lambda rf, name: report,
                                      created_at=res.started_at))
        paths.append(path)
    return paths


#: runs argv[2:], and writes its exit code and peak RSS (os.wait4) to the file argv[1]: the command's
#: own peak, not this script's
_WRAP = ("import json, os, subprocess, sys; p = subprocess.Popen(sys.argv[2:]); _, st, ru = os.wait4(p.pid, 0); "
         "open(sys.argv[1], 'w').write(json.dumps({'rc': os.waitstatus_to_exitcode(st), 'maxrss_kib': ru.ru_maxrss, "
         "'cpu_s': ru.ru_utime + ru.ru_stime}))")


def _timed(cmd: list, out: Path, env: dict) -> dict:
    """Wall seconds and peak RSS of ``cmd`` in a process of its own, its stdout to ``out``."""
    report = out.with_suffix(".rc.json")
    with open(out, "wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", _WRAP, str(report), *map(str, cmd)], stdout=fh,
                              stderr=subprocess.PIPE, env=env)
        wall = time.perf_counter() - t0
    got = json.loads(report.read_text())
    if got["rc"] != 0:
        raise SystemExit(f"{' '.join(map(str, cmd[:8]))} ... failed ({got['rc']}):\n{proc.stderr.decode()[-2000:]}")
    # cpu_s: user + system time of the command (and of what it waited for), which a busy shared machine
    # inflates less than the wall time
    return {"wall_s": round(wall, 3), "cpu_s": round(got["cpu_s"], 3), "peak_rss_mib": round(got["maxrss_kib"] / 1024, 1)}


def doctor_bench(n: int, rounds: int, keep: Path | None) -> dict:
    """The fleet views of the :func:`doctor_fleet` (``n`` machines of the full suite): its bundles
    recorded in a results index (``kit index add``, as the kit is here), then each view of
    ``kit compare --index`` ``rounds`` times, each in a fresh process (wall time with Python's start;
    the best is the figure, every round is kept): the summary view (``--group-by gpu``, the terminal
    at 160 columns to a file), the findings as JSON (``--group-by gpu --json -``), and the fleet page
    (``--group-by gpu --html FILE``, its size)."""
    import tempfile

    import shutil

    work = Path(tempfile.mkdtemp(prefix="kit-bench-doctor."))
    # the commands run a copy of the kit compiled once, as `pip install` leaves it (with
    # PYTHONDONTWRITEBYTECODE set, as on the CI machines, a source checkout is compiled by every command)
    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "kit", work / "src" / "kit", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(work / "src" / "kit")], check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ, COLUMNS="160", PYTHONPATH=str(work / "src"))
    kit = [sys.executable, "-m", "kit"]
    try:
        t0 = time.perf_counter()
        paths = write_doctor_fleet(work / "bundles", n)
        written = time.perf_counter() - t0
        index = work / "index.sqlite"
        added = _timed(kit + ["index", "add", "--index", str(index), str(work / "bundles")], work / "add.txt", env)
        views = {"summary view (--group-by gpu, terminal)": ["--group-by", "gpu"],
                 "--group-by gpu --json - (findings and summary)": ["--group-by", "gpu", "--json", "-"],
                 "--group-by gpu --html FILE (the fleet page)": ["--group-by", "gpu", "--html", str(work / "fleet.html")]}
        results = {}
        for name, args in views.items():
            runs = [_timed(kit + ["compare", "--index", str(index), *args], work / "view.txt", env) for _ in range(rounds)]
            entry = {"runs": runs, "best_wall_s": min(r["wall_s"] for r in runs), "best_cpu_s": min(r["cpu_s"] for r in runs),
                     "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
                     "output_lines": len((work / "view.txt").read_text().splitlines())}
            if "--html" in args:
                entry["html_bytes"] = (work / "fleet.html").stat().st_size
            results[name] = entry
            print(json.dumps({name: {k: v for k, v in entry.items() if k != "runs"}}), flush=True)
        if keep:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / "summary-view.txt").write_bytes(subprocess.run(
                kit + ["compare", "--index", str(index), "--group-by", "gpu"], env=env, capture_output=True).stdout)
            (keep / "fleet.html").write_bytes((work / "fleet.html").read_bytes())
        return {"what": f"kit compare --index of {n} synthetic bundles of the full suite ({SYNTHETIC_NOTE})",
                "fleet": "scripts/bench_fleet_compare.py doctor_fleet: 3/5 NVIDIA H200, 2/5 NVIDIA H100; node011 20% "
                         "slower everywhere, node022 20% slower in amp-fp16, node033 noisy, node044 power-capped",
                "bundles": len(paths), "bundles_written_s": round(written, 1), "index_add": added,
                "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
                "method": f"{rounds} rounds, each command in a fresh process (wall time from its start, and its CPU "
                          "time), running a compiled copy of the kit; the best kept",
                "load_average_at_end": os.getloadavg(),
                "results": results}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _one_run(paths: list[str], html: str | None) -> dict:
    """In this process: compare the bundles as `kit compare` does; seconds and peak RSS."""
    import resource

    from rich.console import Console

    from kit.compare import render
    from kit.compare.engine import compare_paths

    t0 = time.perf_counter()
    cmp = compare_paths(paths)
    t_build = time.perf_counter() - t0
    with open(os.devnull, "w") as null:
        render.print_rich(cmp, Console(file=null, width=120), False)
    t_total = time.perf_counter() - t0
    out = {"n": len(paths), "build_s": t_build, "total_s": t_total,
           "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    if html:
        from kit.report.html.compare import render_compare_page

        page = render_compare_page(cmp)
        out["html_bytes"] = len(page.encode("utf-8"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="JSON file for the results")
    ap.add_argument("--sizes", default="10,100,500")
    ap.add_argument("--runs", type=int, default=3, help="runs per size (the minimum is reported)")
    ap.add_argument("--html-n", type=int, default=200, help="machines on the page whose size is measured")
    ap.add_argument("--write-fleet", type=Path, help="only write --n synthetic bundles into this folder")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--profile", choices=("spread", "groups", "doctor"), default="spread",
                    help="with --write-fleet: speeds spread 0.6-1.2x; H200s and H100s with one slow and one noisy node; "
                         "or the full suite on H200s and H100s with four faulty machines (doctor_fleet)")
    ap.add_argument("--doctor", action="store_true",
                    help="time the fleet views (summary, findings, page) of --n machines of the full suite from an index")
    ap.add_argument("--keep", type=Path, help="with --doctor: keep the summary view's text and the page in this folder")
    ap.add_argument("--one-run", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--html", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_run is not None:
        print(json.dumps(_one_run(args.one_run, "yes" if args.html else None)))
        return
    if args.doctor:
        report = doctor_bench(args.n, args.runs, args.keep)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(report, indent=2) + "\n")
        return
    if args.write_fleet:
        writer = write_doctor_fleet if args.profile == "doctor" else lambda f, n: write_fleet(f, n, profile=args.profile)
        for p in writer(args.write_fleet, args.n):
            print(p)
        return
    import tempfile

    sizes = [int(x) for x in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="kit-bench-fleet.") as tmp:
        t0 = time.perf_counter()
        paths = [str(p) for p in write_fleet(Path(tmp), max(sizes + [args.html_n]))]
        made_s = time.perf_counter() - t0
        results = []
        for n in sizes + ([args.html_n] if args.html_n else []):
            html = n == args.html_n and n not in sizes[:-1] and len(results) >= len(sizes)
            runs = []
            for _ in range(args.runs if not html else 1):
                cmd = [sys.executable, __file__, "--one-run", *paths[:n]] + (["--html"] if html else [])
                runs.append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout))
            best = min(runs, key=lambda r: r["total_s"])
            entry = {"n": n, "runs": runs, "min_total_s": best["total_s"], "min_build_s": min(r["build_s"] for r in runs),
                     "s_per_bundle": best["total_s"] / n, "peak_rss_mib": max(r["peak_rss_mib"] for r in runs)}
            if html:
                entry = {"n": n, "what": "HTML page for the fleet", "html_bytes": runs[0]["html_bytes"],
                         "total_s": runs[0]["total_s"]}
            results.append(entry)
            print(json.dumps(entry if not html else {k: v for k, v in entry.items()}), flush=True)
    report = {
        "what": "kit compare from tarballs on a synthetic fleet (" + SYNTHETIC_NOTE + ")",
        "cells_per_bundle": len(CELLS), "repeats_per_cell": 3, "bundles_written_s": made_s,
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "method": f"each size: {args.runs} runs, each in a fresh process; the minimum total is kept (a shared machine)",
        "results": results,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
