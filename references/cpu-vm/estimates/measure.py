"""Time the README's CPU commands natively and record each cell's wall time.

Usage (from the repository root, with the kit and its benchmark stack installed):

    python references/cpu-vm/estimates/measure.py [--rounds 3] [--out references/cpu-vm/estimates/measurements.json]

Each command runs ``--rounds`` times into a temporary results folder; the record keeps, per
command and round, the whole command's wall seconds, every cell's ``finished_at - started_at``
and status from results.json, the host's load average before and after, and the plan's
estimate (``--dry-run``). The machine kind's rates in kit/facts/estimates.py are calibrated
from the minimum over the rounds (other jobs share a small VM's cores).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The README's CPU commands (Quick start: `make run` with no GPU runs the cpu stack's smoke
#: suite, natively `kit run --smoke --suite all`; "a one-minute CPU check").
COMMANDS = {
    "smoke-all": ["run", "--smoke", "--suite", "all", "--device", "cpu", "--data", "synthetic"],
    "cpu-check": ["run", "--suite", "cifar", "--data", "synthetic", "--device", "cpu", "--models", "resnet18",
                  "--epochs", "1", "--steps", "4"],
}


def _estimate(args: list[str]) -> str:
    out = subprocess.run([sys.executable, "-m", "kit", *args, "--dry-run"], capture_output=True, text=True)
    m = re.search(r"rough estimate ([^(]+)\(", " ".join((out.stdout + out.stderr).split()))
    return m.group(1).strip() if m else "?"


def measure(name: str, args: list[str], root: Path) -> dict:
    results_dir = root / name
    load_before = os.getloadavg()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kit", *args, "--results-dir", str(results_dir)],
                          capture_output=True, text=True)
    wall = time.monotonic() - t0
    load_after = os.getloadavg()
    cells = []
    for res in results_dir.glob("*/results.json"):
        for c in json.loads(res.read_text())["cells"]:
            took = (c.get("finished_at") or 0) - (c.get("started_at") or 0)
            cells.append({"cell_id": c["cell_id"], "status": c["status"], "seconds": round(took, 2)})
    return {"command": "kit " + " ".join(args), "exit_code": proc.returncode, "wall_s": round(wall, 2),
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
            "cells": cells}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).with_name("measurements.json")))
    ns = ap.parse_args()
    record = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": platform.machine(),
              "cpus": os.cpu_count(), "python": platform.python_version(),
              "estimates_before": {n: _estimate(a) for n, a in COMMANDS.items()}, "rounds": []}
    with tempfile.TemporaryDirectory(prefix="kit-estimates-") as tmp:
        for i in range(ns.rounds):
            record["rounds"].append({n: measure(n, a, Path(tmp) / f"round{i}") for n, a in COMMANDS.items()})
            print(json.dumps(record["rounds"][-1]), file=sys.stderr)
    Path(ns.out).write_text(json.dumps(record, indent=2) + "\n")
    print(ns.out)


if __name__ == "__main__":
    main()
