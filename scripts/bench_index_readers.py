"""How a read of the results index fares beside a writer, for each way a read could open it.

    python scripts/bench_index_readers.py [OUT_DIR] [--bundles 150] [--rounds 2] [--shape h200|small]

A writer (`kit index add --jobs 1`, a process of its own) adds SYNTHETIC bundles (scripts/bench_index.py's
shapes, by default the H200 reference's: invented numbers, host names ``synthetic-nodeNNN``) to a new
index in batches (up to 50 bundles, or what one second verified: a batch of full-suite runs is larger
than SQLite's page cache, which then writes pages into the file before the batch commits),
while this process reads the same index over and over, taking turns between three ways of opening it:

- ``mode=ro``: kit.index.reader.open_reader, the kit's way (SQLite opens the file read-only and keeps
  its locks: a read waits while a batch is committed);
- ``immutable``: ``file:PATH?mode=ro&immutable=1`` (SQLite takes no lock and ignores any journal);
- ``private copy``: the file copied to a temporary file (as ``cp`` would, without SQLite's lock), then
  read there.

Each read checks what it sees: SQLite reports no damage (``PRAGMA quick_check``) and every run has all
its cells (``n_cells`` = its rows in ``cells``), as every committed batch leaves the index. A read that
sees anything else saw a batch half written. Prints, per way and round, the reads, how many saw a
half-written batch or failed, and the read time (median and longest); writes index-readers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

from bench_index import make_bundles  # noqa: E402
from kit.index.reader import open_reader  # noqa: E402

CHECK = ("SELECT count(*) FROM bundles b WHERE n_cells != (SELECT count(*) FROM cells c WHERE c.bundle_id = b.id)")


def _immutable(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{urllib.parse.quote(str(path))}?mode=ro&immutable=1", uri=True)


def read_once(way: str, index: Path, scratch: Path) -> tuple[str, float]:
    """One read the given way: ("ok" | "half-written" | "error: ...", seconds)."""
    t0 = time.perf_counter()
    con = None
    try:
        if way == "mode=ro":
            con = open_reader(index)
        elif way == "immutable":
            con = _immutable(index)
        else:
            copy = scratch / "copy.sqlite"
            shutil.copyfile(index, copy)
            con = _immutable(copy)
        damaged = con.execute("PRAGMA quick_check").fetchone()[0] != "ok"
        partial = con.execute(CHECK).fetchone()[0]
        said = "half-written" if damaged or partial else "ok"
    except Exception as exc:  # what each way meets is the measurement
        said = f"error: {type(exc).__name__}: {str(exc)[:80]}"
    finally:
        if con is not None:
            con.close()
    return said, time.perf_counter() - t0


def one_round(bundles: Path, work: Path) -> dict:
    index = work / "index.sqlite"
    for p in work.glob("index.sqlite*"):
        p.unlink()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    writer = subprocess.Popen([sys.executable, "-m", "kit", "index", "add", "--jobs", "1", "--index", str(index),
                               str(bundles)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ways = ("mode=ro", "immutable", "private copy")
    seen = {w: [] for w in ways}
    with tempfile.TemporaryDirectory() as scratch:
        while writer.poll() is None:
            if not index.exists():
                time.sleep(0.01)
                continue
            for way in ways:
                seen[way].append(read_once(way, index, Path(scratch)))
    if writer.returncode != 0:
        raise SystemExit(f"the writer failed: {writer.stderr.read().decode(errors='replace')[-2000:]}")
    out = {}
    for way, reads in seen.items():
        times = [t for _, t in reads]
        out[way] = {"reads": len(reads), "half_written": sum(s == "half-written" for s, _ in reads),
                    "errors": sorted({s for s, _ in reads if s.startswith("error")}),
                    "error_reads": sum(s.startswith("error") for s, _ in reads),
                    "median_s": statistics.median(times) if times else None, "max_s": max(times) if times else None}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", type=Path, default=None)
    ap.add_argument("--bundles", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--shape", choices=("small", "h200"), default="h200",
                    help="the bundles' shape (scripts/bench_index.py): h200's batches outgrow SQLite's page cache")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="index-readers-") as tmp:
        work = Path(tmp)
        make_bundles(args.shape, args.bundles, 20, work / "bundles")
        rounds = [one_round(work / "bundles", work) for _ in range(args.rounds)]
    print(f"{'round':>5}  {'way':<13} {'reads':>6} {'half-written':>13} {'errors':>7} {'median s':>9} {'max s':>7}")
    for i, r in enumerate(rounds, 1):
        for way, m in r.items():
            med = f"{m['median_s']:.3f}" if m["median_s"] is not None else "-"
            mx = f"{m['max_s']:.3f}" if m["max_s"] is not None else "-"
            print(f"{i:>5}  {way:<13} {m['reads']:>6} {m['half_written']:>13} {m['error_reads']:>7} {med:>9} {mx:>7}")
            for e in m["errors"]:
                print(f"{'':>21}{e}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "index-readers.json").write_text(json.dumps({"bundles": args.bundles, "rounds": rounds}, indent=2) + "\n")


if __name__ == "__main__":
    main()
