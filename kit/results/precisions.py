"""The precision modes: one row each, the only list of them.

A row says what the mode is (its autocast dtype, whether it keeps fp32 master weights, how it scales
the loss), where it can run (a CUDA graph, the CPU, the oldest GPU, the software it needs), which
suites run it by default, which of this GPU's measured matmul peaks bounds it, and its help text.
Every other part of the kit reads these rows: the names a results file may use
(kit.results.schema_names), the plan's defaults and CPU estimate (kit.runner.plan), ``--precisions``'
help, the calibrated peak a cell's efficiency is held against (kit.results.derive), the captured
steps (kit.bench.cifar.graphed, kit.bench.lstm.graphed), the order of tables and charts
(kit.compare.measures, kit.report.charts). How a mode trains is kit.bench.precision's (torch), which
reads its row for the rest.

A new mode is one row here and its training in kit.bench.precision (tests/test_precision_registry.py
adds a toy mode that way and runs it through ``kit run`` into a bundle, a comparison and a report).

Torch-free and Python 3.7 syntax: the cuda10 image's runner reads it.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple


class PrecisionMode(NamedTuple):
    name: str
    #: one line for ``--precisions``' help and the docs
    help: str
    #: the dtype autocast computes in ("float16", "bfloat16"), or None (none, or the mode's own scheme)
    autocast: Optional[str]
    #: the calibrated matmul peak (kit.bench.calibrate's dtype names) that bounds the mode
    peak_dtype: str
    #: half-precision weights with an fp32 master copy (the 2018 scheme; Apex O2)
    master_weights: bool = False
    #: the loss scale: "dynamic", "static or dynamic" (the 2018 scheme's choice), or None
    loss_scale: Optional[str] = None
    #: the whole training step can be captured as one CUDA graph (every decision made on the device)
    capturable: bool = False
    #: trains on a CPU (amp-bf16 only where the CPU has bf16 instructions)
    on_cpu: bool = False
    #: the oldest NVIDIA GPU (compute capability) that can run the mode at all (its number format), or None:
    #: fp16 runs on any CUDA GPU, with tensor cores from 7.0 (the article's GTX 1080 Ti, 6.1, ran it without)
    min_capability: Optional[Tuple[int, int]] = None
    #: a package beyond torch the mode needs ("apex", "torchao"), or None
    needs: Optional[str] = None
    #: the suites that measure it (empty: every suite); the others refuse it, and these run it when
    #: --precisions is not given
    suites: Tuple[str, ...] = ()
    #: in ``--smoke``'s one-minute run (where the suite has it): one mode of each kind that trains on
    #: a CPU or is skipped there in no time
    smoke: bool = False


MODES: Tuple[PrecisionMode, ...] = (
    PrecisionMode("fp32", "strict fp32 (TF32 off)", None, "fp32", capturable=True, on_cpu=True, smoke=True),
    PrecisionMode("tf32", "fp32 weights, TF32 tensor-core matmuls and convolutions", None, "tf32",
                  capturable=True, min_capability=(8, 0)),
    PrecisionMode("amp-fp16", "torch autocast fp16 with a dynamic loss scale (GradScaler)", "float16", "fp16",
                  loss_scale="dynamic", capturable=True),
    PrecisionMode("amp-bf16", "torch autocast bf16 (no loss scale: bf16 has fp32's range)", "bfloat16", "bf16",
                  capturable=True, on_cpu=True, min_capability=(8, 0), smoke=True),
    PrecisionMode("fp16-master", "the 2018 scheme: fp16 model, fp32 master weights, static or dynamic loss scale "
                  "(fastai v1 to_fp16, Apex FP16_Optimizer)", None, "fp16", master_weights=True,
                  loss_scale="static or dynamic", suites=("cifar", "lstm"), smoke=True),
    PrecisionMode("apex-o1", "NVIDIA Apex amp O1 (where apex.amp exists)", None, "fp16", loss_scale="dynamic",
                  needs="apex", suites=("cifar", "lstm")),
    PrecisionMode("apex-o2", "NVIDIA Apex amp O2: fp16 model, fp32 master weights", None, "fp16",
                  master_weights=True, loss_scale="dynamic", needs="apex",
                  suites=("cifar", "lstm")),
    PrecisionMode("fp8-tensorwise", "bf16 autocast with the Linear layers' GEMMs in fp8 (torchao, one scale per "
                  "tensor)", "bfloat16", "fp8", min_capability=(8, 9), needs="torchao", suites=("gpt",)),
    PrecisionMode("fp8-rowwise", "bf16 autocast with the Linear layers' GEMMs in fp8 (torchao, one scale per row)",
                  "bfloat16", "fp8", min_capability=(8, 9), needs="torchao", suites=("gpt",)),
)

#: every mode's name, in the order tables and charts show them
PRECISIONS: Tuple[str, ...] = tuple(m.name for m in MODES)
BY_NAME = {m.name: m for m in MODES}


def mode(name: str) -> PrecisionMode:
    """The row of ``name`` (KeyError for a name that is not a mode)."""
    return BY_NAME[name]


def defaults(suite: str) -> list:
    """The precisions a suite runs when --precisions is not given, in the table's order."""
    return [m.name for m in MODES if not m.suites or suite in m.suites]


def smoke(suites) -> list:
    """``--smoke``'s precisions for a run of ``suites`` (names): the smoke modes any of them runs."""
    return [m.name for m in MODES if m.smoke and any(m.name in defaults(s) for s in suites)]


#: how a mode trains, read from its row (:func:`scheme`): Apex amp; the 2018 scheme's two copies (a half
#: model, fp32 master weights, the kit's loss scaler); autocast with torch's GradScaler; autocast alone;
#: plain fp32 arithmetic (TF32 or not)
APEX, TWO_COPIES, SCALED_AUTOCAST, AUTOCAST, PLAIN = "apex", "two copies", "scaled autocast", "autocast", "plain"


def scheme(name: str) -> str:
    """The kit's one reading of a row's fields as a way of training (every engine asks it)."""
    m = BY_NAME[name]
    if m.needs == "apex":
        return APEX
    if m.master_weights:
        return TWO_COPIES
    if m.autocast:
        return SCALED_AUTOCAST if m.loss_scale == "dynamic" else AUTOCAST
    return PLAIN


def where(**attrs) -> Tuple[str, ...]:
    """The names of the modes whose fields equal ``attrs`` (``where(capturable=True)``)."""
    return tuple(m.name for m in MODES if all(getattr(m, k) == v for k, v in attrs.items()))


def help_text() -> str:
    """``--precisions``' list of the modes."""
    return ", ".join(m.name for m in MODES)
