"""Print the README's headline table from a shipped reference (a Markdown table).

    python scripts/headline_table.py h100          # the reference `kit compare --against h100` reads
    python scripts/headline_table.py BUNDLE.tar.gz

One row per workload: its fp32 and amp-fp16 cells' median throughput and the speedup over fp32, each
figure read from the bundle's results by kit.results.ratios (the function every view of the kit
uses), and the options of `kit run` that measure the same two cells. README.md marks the table for
scripts/doc_outputs.py, so it is always what this prints from the shipped bundle.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kit.bundle.merge import reference_bundles  # noqa: E402
from kit.bundle.safe_open import open_bundle  # noqa: E402
from kit.results import ratios  # noqa: E402

#: (what the row is, its cells' workload/model/engine, the options of `kit run` that measure them)
ROWS = (
    ("ResNet-50, `fastai`", ("cifar", "resnet50", "fastai"), "-m resnet50 -e fastai"),
    ("ResNet-50, `torch`", ("cifar", "resnet50", "torch"), "-m resnet50 -e torch"),
    ("ResNet-18, `torch`", ("cifar", "resnet18", "torch"), "-m resnet18 -e torch"),
    ("LSTM 1504, `kit`", ("lstm", "tensor-core", "kit"), "--suite lstm --preset tensor-core -e kit"),
    ("LSTM 1504, `graphed`", ("lstm", "tensor-core", "graphed"), "--suite lstm --preset tensor-core -e graphed"),
    ("LSTM 200, `kit`", ("lstm", "apex-2018", "kit"), "--suite lstm --preset apex-2018 -e kit"),
)


def table(bundle: Path) -> str:
    """The table of one reference bundle."""
    cells = {c.cell_id: c for c in open_bundle(bundle).results.cells if c.status == "ok"}
    lines = ["| model, engine | fp32 | amp-fp16 | speedup | `kit run --data synthetic -p fp32,amp-fp16` ... |",
             "| --- | ---: | ---: | ---: | --- |"]
    for label, (workload, model, engine), options in ROWS:
        base, half = (cells[f"{workload}/{model}/{p}/{engine}"] for p in ("fp32", "amp-fp16"))
        fp32, fp16 = (ratios.median_of(ratios.metric_values(c, ratios.THROUGHPUT)) for c in (base, half))
        lines.append(f"| {label} | {fp32:,.0f} | {fp16:,.0f} | **{ratios.fmt_speedup(ratios.speedup_over_fp32(half, base))}** "
                     f"| `{options}` |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reference", help="a shipped reference's name (h100) or a bundle (.tar.gz)")
    name = ap.parse_args().reference
    (bundle,) = [Path(name)] if name.endswith(".tar.gz") else reference_bundles(name)
    print(table(bundle))
    return 0


if __name__ == "__main__":
    sys.exit(main())
