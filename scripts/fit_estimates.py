"""The plan's GPU estimate rates (kit/facts/estimates.py), fitted to measured runs.

    python scripts/fit_estimates.py --out references/gpu-estimates/cells.json RUN_FOLDER_OR_BUNDLE...
    python scripts/fit_estimates.py references/gpu-estimates/cells.json

The first form reads each measured cell of the runs and writes the records the fit uses. Each record
has the cell's wall time (``finished_at - started_at``), the part of it the batch search took, and
its repeats. The search time runs from the journal's "searching for the largest batch" note to the
cell's end (the profiled window, in the last repeat before the search, stays in). The second form
refits from such a file. The fit counts each cell's model FLOPs as the estimate does (the suite's
``work`` times the repeats).

Both print the fit. Per workload/engine, a least-squares line (statistics.linear_regression) of
``wall - search = cell_s + FLOPs / (tflops x 1e12)``. The search, in proportion to the model's training
GFLOPs per image (kit.runner.plan.search_gflop: a search's tries train the model at batches up to the
data set's size, so a larger model's take longer): the searches' total seconds over their cells' total
GFLOPs per image. Then, per run,
the measured cells' seconds against the plan's estimate for them with kit/facts/estimates.py's rates
as they are now. tests/test_estimates.py checks that those rates are this fit of the committed records.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

from kit.bundle.export import read_member
from kit.bundle.safe_open import open_bundle
from kit.facts import estimates
from kit.results import suites
from kit.results.schema import CellSpec
from kit.runner.plan import estimate_seconds, search_gflop

SEARCH_NOTE = "searching for the largest batch"


NAMES = ("results.json", "env.json", "journal.jsonl")


def run_files(run: Path) -> dict[str, bytes]:
    """A run's results, environment and journal, from its run folder or its bundle (read and checked
    as `kit bundle` reads them)."""
    if run.is_dir():
        return {name: read_member(run, name) or b"" for name in NAMES}
    return open_bundle(run).files


def records(run: Path) -> list[dict]:
    """One record per measured cell of a run (its folder or bundle)."""
    files = run_files(run)
    results, env = json.loads(files["results.json"]), json.loads(files["env.json"])
    events = [json.loads(line) for line in files["journal.jsonl"].decode().splitlines() if line.strip()]
    gpus = (env.get("nvml") or {}).get("gpus") or [{}]
    gpu = gpus[0].get("name", "")
    out = []
    for c in results["cells"]:
        if c["status"] != "ok":
            continue
        searches = [e["time"] for e in events if e.get("cell_id") == c["cell_id"] and e["event"] == "note"
                    and SEARCH_NOTE in e.get("message", "") and c["started_at"] <= e["time"] <= c["finished_at"]]
        repeats = len(c.get("repeats") or []) or 3
        out.append({
            "run": results["run_id"], "gpu": gpu, "cell_id": c["cell_id"], "params": c.get("params", {}),
            "repeats": repeats,
            "wall_s": round(c["finished_at"] - c["started_at"], 3),
            "search_s": round(c["finished_at"] - searches[-1], 3) if searches else 0.0,
        })
    return out


def spec_of(record: dict) -> CellSpec:
    workload, model, precision, engine = record["cell_id"].split("/")[:4]
    return CellSpec(workload, model, precision, engine, record["params"])


def key_of(record: dict) -> str:
    """The record's "workload/engine"."""
    spec = spec_of(record)
    return f"{spec.workload}/{spec.engine}"


def flops(record: dict) -> float:
    """The model FLOPs the estimate counts for the cell's repeats (the suite's ``work``)."""
    spec = spec_of(record)
    return record["repeats"] * suites.suite(spec.workload).work(spec, "throughput")


def points(recs: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """The fit's points per "workload/engine", sorted by it: (the cell's FLOPs, its wall time less its
    batch search) for each record."""
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in recs:
        out[key_of(r)].append((flops(r), r["wall_s"] - r["search_s"]))
    return dict(sorted(out.items()))


def steps(record: dict) -> int:
    """The steps one repeat of the cell takes, as the plan counts them for a host-paced engine (its suite's ``steps``)."""
    spec = spec_of(record)
    return suites.suite(spec.workload).steps(spec, "throughput")


def host_paced(key: str) -> bool:
    """Whether "workload/engine" is an engine whose host paces each step and whose suite counts its steps."""
    workload, engine = key.split("/")
    suite = suites.suite(workload)
    return engine in suite.host_paced and suite.steps is not None


def host_paced_rate(recs: list[dict], device_rate: estimates.EstimateRate) -> estimates.EstimateRate | None:
    """A host-paced engine's rate: the fixed cost and FLOPs rate of its workload's GPU-paced engine
    (``device_rate``: the same model on the same device, the fastest the device runs it), and the host's
    seconds per step (3 significant figures), a least-squares line through the origin of each cell's time
    past the fixed cost against its steps, over the cells whose time exceeds the device's share (the
    others the device paced). None where no cell was the host's."""
    xy = []
    for r in recs:
        past = r["wall_s"] - r["search_s"] - device_rate.cell_s
        if past > flops(r) / (device_rate.tflops * 1e12):
            xy.append((r["repeats"] * steps(r), past))
    if not xy:
        return None
    step_s = sum(x * y for x, y in xy) / sum(x * x for x, _ in xy)
    return estimates.EstimateRate(device_rate.cell_s, device_rate.tflops, step_s=float(f"{step_s:.3g}"))


def fit(recs: list[dict]) -> tuple[dict[str, estimates.EstimateRate], float]:
    """The rate per "workload/engine" (cell_s rounded to 0.1 s, tflops to 3 significant figures),
    and the search's seconds per GFLOP per image (kit.runner.plan.search_gflop; 3 significant figures).
    A workload/engine whose cells all count the same FLOPs (one model size), or whose time does not
    grow with their FLOPs (the `kit` LSTM engine's: its host sets the pace of each step, whatever the
    model's size), gets no FLOPs line; where its host paces its steps (the suite's ``host_paced`` and
    ``steps``) and another engine of its workload got a line, a host-paced rate (:func:`host_paced_rate`),
    else none (main() says which)."""
    rates, unfitted = {}, []
    for key, xy in points(recs).items():
        x, y = zip(*xy)
        line = statistics.linear_regression(x, y) if len(set(x)) > 1 else None
        if line is None or line.slope <= 0:  # one model size, or the time does not grow with the FLOPs
            unfitted.append(key)
            continue
        rates[key] = estimates.EstimateRate(cell_s=round(line.intercept, 1),
                                            tflops=float(f"{1 / (line.slope * 1e12):.3g}"))
    for key in unfitted:
        device = [rate for other, rate in rates.items() if other.split("/")[0] == key.split("/")[0]]
        if host_paced(key) and device:
            rate = host_paced_rate([r for r in recs if key_of(r) == key], device[0])
            if rate is not None:
                rates[key] = rate
    searched = [r for r in recs if r["search_s"]]
    if not searched:
        return rates, 0.0
    per_gflop = sum(r["search_s"] for r in searched) / sum(search_gflop(spec_of(r)) for r in searched)
    return rates, float(f"{per_gflop:.3g}")


def estimate_ratio(recs: list[dict]) -> dict[str, float]:
    """Per run: the plan's estimate of its measured cells (today's rates) over their measured seconds."""
    measured: dict[str, float] = defaultdict(float)
    estimated: dict[str, float] = defaultdict(float)
    for r in recs:
        measured[r["run"]] += r["wall_s"]
        estimated[r["run"]] += estimate_seconds(spec_of(r), r["repeats"], device="cuda")
    return {run: estimated[run] / measured[run] for run in measured}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", type=Path, help="run folders or bundles (with --out), or one records file")
    ap.add_argument("--out", type=Path, help="write the records of the runs' measured cells here")
    args = ap.parse_args()
    if args.out:
        recs = [r for run in args.inputs for r in records(run)]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"records": recs}, indent=1) + "\n")
    else:
        recs = json.loads(args.inputs[0].read_text())["records"]
    rates, per_gflop = fit(recs)
    print("fitted rates (wall - search = cell_s + FLOPs / (tflops x 1e12); host-paced: cell_s + the longer of "
          "that and steps x step_s):")
    for key, xy in points(recs).items():
        n = len(xy)
        if key in rates and rates[key].step_s:
            print(f"  {key}: {n} cells, host-paced: cell_s {rates[key].cell_s} and tflops {rates[key].tflops} as "
                  f"its workload's GPU-paced engine, step_s {rates[key].step_s}")
        elif key in rates:
            print(f"  {key}: {n} cells, cell_s {rates[key].cell_s}, tflops {rates[key].tflops}")
        elif len({x for x, _ in xy}) < 2:
            print(f"  {key}: {n} cells, all of one model size: no line to fit; measure another size "
                  f"(its rate stays as kit/facts/estimates.py has it)")
        else:
            print(f"  {key}: {n} cells whose time does not grow with their FLOPs: no rate of this form "
                  f"fits (its rate stays as kit/facts/estimates.py has it)")
    searches = [r["search_s"] for r in recs if r["search_s"]]
    if searches:
        print(f"batch search: {len(searches)} cells, {per_gflop:g} s per training GFLOP per image; "
              f"median {statistics.median(searches):.1f} s, {min(searches):.1f}-{max(searches):.1f} s")
    print("the plan's estimate of each run's measured cells (kit/facts/estimates.py as it is) over their seconds:")
    gpu = {r["run"]: r["gpu"] for r in recs}
    for run, ratio in estimate_ratio(recs).items():
        print(f"  {run} ({gpu[run]}): {ratio:.2f}x")


if __name__ == "__main__":
    main()
