"""The precision modes' one table (kit.results.precisions): what it says, that every part of the kit
reads it, and that no other list of precisions grows back in kit/."""

from __future__ import annotations

import ast
from pathlib import Path

from fixtures.kit_copy import copy_kit, two_runs_compared
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
    from kit.runner.options import RunOptions
    from dataclasses import fields

    assert GRAPH_MODES == precisions.where(capturable=True)
    assert FP8_RECIPES == {"fp8-tensorwise": "tensorwise", "fp8-rowwise": "rowwise"}
    assert FP8_MIN_CAPABILITY == (8, 9)
    assert VS_BF16_PRECISIONS == ("amp-fp16", "fp8-tensorwise", "fp8-rowwise")
    help_text = next(f for f in fields(RunOptions) if f.name == "precisions").metadata
    assert precisions.help_text() in str(help_text)
    cell = CellResult("cifar", "resnet18", "fp16-master", "torch", "ok",
                      repeats=[{"achieved_tflops": 10.0}], summary={"achieved_tflops": {"median": 10.0}})
    (row,) = efficiency([cell], {"peak_tflops_measured": {"available": True, "fp16": 100.0}})
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


def test_the_bench_reads_each_modes_training_from_its_row():
    import torch

    from kit.bench.precision import Precision

    seen = {}
    for name in PRECISIONS:
        p = Precision(name, "cpu", check_available=False)
        seen[name] = (p.autocast_dtype, p.grad_scaler, p.two_copies, p.apex_level, p.backends.get("matmul_allow_tf32"))
    assert seen == {
        "fp32": (None, False, False, None, False),
        "tf32": (None, False, False, None, True),
        "amp-fp16": (torch.float16, True, False, None, False),
        "amp-bf16": (torch.bfloat16, False, False, None, False),
        "fp16-master": (None, False, True, None, False),
        "apex-o1": (None, False, False, "O1", False),
        "apex-o2": (None, False, False, "O2", False),
        "fp8-tensorwise": (torch.bfloat16, False, False, None, False),
        "fp8-rowwise": (torch.bfloat16, False, False, None, False),
    }
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # as the tf32 row left them


def test_why_a_mode_cannot_run_is_read_from_its_row(monkeypatch):
    import torch

    from kit.bench import precision as P

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    monkeypatch.setattr(P, "apex_amp_status", lambda: (False, "NVIDIA Apex is not installed in this environment"))
    monkeypatch.setattr(P, "torchao_float8_status", lambda: (True, ""))
    got = {}
    for cap in (None, (6, 1), (8, 0), (9, 0)):
        monkeypatch.setattr(P, "_cuda_capability", lambda device, cap=cap: cap)
        for name in PRECISIONS:
            got[(name, cap)] = P.unavailable_reason(name, "cpu" if cap is None else "cuda:0")
    runs = {k for k, v in got.items() if v is None}
    assert runs == {("fp32", None), ("amp-bf16", None)} | {
        (n, c) for c in ((6, 1), (8, 0), (9, 0)) for n in ("fp32", "amp-fp16", "fp16-master")} | {
        (n, c) for c in ((8, 0), (9, 0)) for n in ("tf32", "amp-bf16")} | {
        ("fp8-tensorwise", (9, 0)), ("fp8-rowwise", (9, 0))}
    assert got[("tf32", (6, 1))] == "TF32 needs an Ampere or newer GPU (compute capability 8.0+); this GPU is 6.1"
    assert got[("amp-fp16", None)] == ("fp16 training on the CPU has no fast kernels and measures nothing useful; "
                                      "run it on a GPU")
    assert got[("fp8-rowwise", (8, 0))] == ("fp8 training needs compute capability 8.9+ (Ada, Hopper, Blackwell); "
                                           "this GPU is 8.0")
    assert got[("apex-o1", None)] == "Apex amp needs a CUDA GPU"
    assert got[("apex-o2", (9, 0))] == "NVIDIA Apex is not installed in this environment"
    assert P.unavailable_reason("fp64", "cpu") == "unknown precision mode 'fp64'"


def test_each_row_reads_as_one_way_of_training():
    from kit.results.precisions import APEX, AUTOCAST, PLAIN, SCALED_AUTOCAST, TWO_COPIES, scheme

    assert {n: scheme(n) for n in PRECISIONS} == {
        "fp32": PLAIN, "tf32": PLAIN, "amp-fp16": SCALED_AUTOCAST, "amp-bf16": AUTOCAST, "fp16-master": TWO_COPIES,
        "apex-o1": APEX, "apex-o2": APEX, "fp8-tensorwise": AUTOCAST, "fp8-rowwise": AUTOCAST}
    # fastai's to_bf16() is what an autocast-only row gets: every such row autocasts to bf16
    assert {precisions.mode(n).autocast for n in PRECISIONS if scheme(n) == AUTOCAST} == {"bfloat16"}
    from kit.bench.lstm.graphed import GRAPH_MODES as LSTM_GRAPH_MODES
    from kit.runner.isolate import APEX_PRECISIONS

    assert LSTM_GRAPH_MODES == ("fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-master")
    assert APEX_PRECISIONS == ("apex-o1", "apex-o2")


TOY_ROW = '''    PrecisionMode("fp32-toy", "a toy mode for the kit's own test: fp32's arithmetic under another name", None,
                  "fp32", capturable=True, on_cpu=True, suites=()),
'''


def test_a_new_mode_is_one_row_of_one_module(tmp_path):
    """A copy of the kit with one row added to kit/results/precisions.py, and nothing else changed,
    runs the new mode through kit run on the CPU into a bundle that kit bundle show, kit compare and the
    report show."""
    kit = copy_kit(tmp_path)
    home = tmp_path / "kit" / "results" / "precisions.py"
    text = home.read_text(encoding="utf-8")
    anchor = "MODES: Tuple[PrecisionMode, ...] = (\n"
    assert anchor in text
    home.write_text(text.replace(anchor, anchor + TOY_ROW), encoding="utf-8")
    assert "fp32-toy" in kit("run", "--help")
    bundles, show, rows = two_runs_compared(kit, tmp_path, "--suite", "cifar", "--smoke", "-p", "fp32,fp32-toy",
                                            "--device", "cpu")
    assert "cifar/resnet18/fp32-toy/torch" in show and "cifar/resnet18/fp32-toy/fastai" in show
    toy = rows["cifar/resnet18/fp32-toy/torch"]
    assert toy["machines"]["A"]["speedup_vs_fp32"]["ratio"] > 0 and toy["machines"]["B"]["throughput_vs_baseline"]
    import tarfile

    with tarfile.open(bundles[0]) as tar:
        report = next(m for m in tar.getmembers() if m.name.endswith("report.html"))
        assert "fp32-toy" in tar.extractfile(report).read().decode("utf-8")
