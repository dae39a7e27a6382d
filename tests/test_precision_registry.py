"""The precision modes' one table (kit.results.precisions): what it says, that every part of the kit
reads it, and that no other list of precisions grows back in kit/."""

from __future__ import annotations

import ast
from pathlib import Path

from kit.results import precisions
from kit.results.precisions import MODES, PRECISIONS

ROOT = Path(__file__).resolve().parents[1]


def test_one_row_per_mode_and_the_suites_defaults_are_the_runs_of_today():
    assert len(set(PRECISIONS)) == len(MODES) == 9
    legacy = ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-master", "apex-o1", "apex-o2"]
    assert precisions.defaults("cifar") == precisions.defaults("lstm") == legacy
    assert precisions.defaults("gpt") == ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp8-tensorwise", "fp8-rowwise"]
    assert precisions.where(capturable=True) == ("fp32", "tf32", "amp-fp16", "amp-bf16")
    assert precisions.where(on_cpu=True) == ("fp32", "amp-bf16")
    assert precisions.where(needs="apex") == ("apex-o1", "apex-o2")
    # fp16 runs on any CUDA GPU (the article's GTX 1080 Ti is 6.1); bf16 and TF32 need Ampere, fp8 Ada/Hopper
    assert precisions.mode("amp-fp16").min_capability is None
    assert precisions.mode("amp-bf16").min_capability == precisions.mode("tf32").min_capability == (8, 0)
    assert precisions.mode("fp8-rowwise").min_capability == (8, 9)


def test_the_kits_parts_read_the_table():
    from kit.bench.cifar.graphed import GRAPH_MODES
    from kit.bench.precision import FP8_MIN_CAPABILITY, FP8_RECIPES
    from kit.report.charts import VS_BF16_PRECISIONS
    from kit.results.derive import efficiency
    from kit.results.schema import CellResult
    from kit.runner.option_fields import RunOptions
    from dataclasses import fields

    assert GRAPH_MODES == precisions.where(capturable=True)
    assert FP8_RECIPES == {"fp8-tensorwise": "tensorwise", "fp8-rowwise": "rowwise"}
    assert FP8_MIN_CAPABILITY == (8, 9)
    assert VS_BF16_PRECISIONS == ("amp-fp16", "fp8-tensorwise", "fp8-rowwise")
    help_text = next(f for f in fields(RunOptions) if f.name == "precisions").metadata
    assert precisions.help_text() in str(help_text)
    cell = CellResult("cifar", "resnet18", "fp16-master", "torch", "ok",
                      repeats=[{"achieved_tflops": 10.0}], summary={"achieved_tflops": {"median": 10.0}})
    (row,) = efficiency([cell], {"available": True, "fp16": 100.0})
    assert row["peak_dtype"] == "fp16" and row["fraction_of_peak"] == 0.1


def _precision_lists(path: Path) -> list[str]:
    """Literal tuples, lists and sets of three or more precision names in a module."""
    names = set(PRECISIONS)
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            found = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
            if len(set(found)) >= 3:
                out.append(f"{path.name}:{node.lineno}: {found}")
    return out


def test_no_other_list_of_precisions_in_the_kit(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('MODES = ("fp32", "amp-fp16", "amp-bf16")\n', encoding="utf-8")
    assert _precision_lists(planted) == ["planted.py:1: ['fp32', 'amp-fp16', 'amp-bf16']"]  # the check sees one
    home = ROOT / "kit" / "results" / "precisions.py"
    found = [hit for p in sorted((ROOT / "kit").rglob("*.py")) if p != home for hit in _precision_lists(p)]
    assert not found, f"lists of precisions outside kit/results/precisions.py: {found}"
