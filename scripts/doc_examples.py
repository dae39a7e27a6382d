"""Print a docs example that needs inputs no reference holds, made here: SYNTHETIC runs (invented numbers).

    python scripts/doc_examples.py index-history     # docs/results-index.md: `kit index history` of one machine

Each example builds its runs in a temporary folder with the kit's own writers (results in the real
schema, bundles by kit.bundle.export.build_bundle, an index by kit.index.ingest), runs the kit command
on them in this process and prints what it prints at the width of the terminal (COLUMNS). The docs
mark each such block for scripts/doc_outputs.py, which checks (and with --write rewrites) it against
what this prints today. Every host is ``synthetic-*`` and every environment says it is synthetic.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SYNTHETIC = "synthetic: invented numbers for a docs example, not a measurement"
START = 1793491200.0  # 2026-11-01 00:00 UTC
DAY = 86400.0


def _run(root: Path, n: int, speed: float, driver: str) -> Path:
    """Run ``n`` of the machine synthetic-node001: ResNet-18 and -50 in fp32, amp-fp16 and amp-bf16,
    3 repeats each, its throughput ``speed`` times a base."""
    from kit.bundle.export import RunFolder, build_bundle
    from kit.results.schema import CellResult, RunConfig, RunResults
    from kit.results.stats import summarise_repeats

    cells = []
    for k, (model, precision) in enumerate((m, p) for m in ("resnet18", "resnet50") for p in ("fp32", "amp-fp16", "amp-bf16")):
        reps = []
        for j, jitter in enumerate((1.0, 1.004, 0.996)):
            tp = 20_000.0 / (1 + k) * speed * jitter
            reps.append({"epoch_seconds": [25_600.0 / tp], "epoch_seconds_median": 25_600.0 / tp,
                         "throughput_items_per_s": tp, "metrics": {}})
        cells.append(CellResult("cifar", model, precision, "torch", "ok", throughput_unit="images",
                                params={"batch_size": 256, "image_size": 32, "epochs": 1, "steps": 100},
                                repeats=reps, summary=summarise_repeats(reps), data={"source": "synthetic"},
                                notes=[SYNTHETIC],
                                method={"engine": "cifar/torch", "revision": 7, "settings": {"batch_size": 256}}))
    env = {"_synthetic": SYNTHETIC, "host": {"name": "synthetic-node001", "host_id": "h-5e1f00d5e1f00d51"},
           "nvml": {"available": True, "driver_version": driver, "gpus": [{"name": "NVIDIA H100", "uuid": "GPU-1"}]},
           "stack": "cuda12", "torch": "2.11.0", "data_source": "synthetic", "kit_version": "0.3.0"}
    res = RunResults(run_id=f"SYNTHETIC-{n}", config=RunConfig(suite="cifar", data="synthetic", repeats=3),
                     environment=env, status="complete", started_at=START + n * DAY,
                     finished_at=START + n * DAY + 600, cells=cells)
    path = root / f"synthetic-node001_{n}.tar.gz"
    path.write_bytes(build_bundle(RunFolder(root, res, env), path.name[:-7], lambda folder, name: {},
                                  created_at=res.started_at))
    return path


def index_history() -> int:
    """Four runs of one machine, the third after a driver update and 20% slower, in an index; its history."""
    from kit.cli.main import main
    from kit.index.db import open_index
    from kit.index.ingest import add_bundles

    with tempfile.TemporaryDirectory(prefix="doc-example-") as tmp:
        root = Path(tmp)
        bundles = [_run(root, n, speed, driver) for n, speed, driver in
                   ((0, 1.0, "580.159.04"), (1, 1.0, "580.159.04"), (2, 0.8, "590.10"), (3, 0.81, "590.10"))]
        con = open_index(root / "index.sqlite", create=True)
        add_bundles(con, bundles)
        con.close()
        try:
            main(["index", "history", "--index", str(root / "index.sqlite"), "--host", "synthetic-node001"])
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0


EXAMPLES = {"index-history": index_history}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("example", choices=sorted(EXAMPLES))
    return EXAMPLES[ap.parse_args().example]()


if __name__ == "__main__":
    sys.exit(main())
