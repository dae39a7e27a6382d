"""Each engine's revision, with what each revision changed, and the method record a cell carries.

An engine's revision is bumped whenever what it measures, or how, changes: a ratio between two of
its cells is a comparison of machines only when both were measured by the same revision with the
same settings (:mod:`kit.results.method` holds the rule and the record's form). A bump also bumps
the kit's version (``kit/__init__.py``) and gets a CHANGELOG.md entry; ``tests/test_methods.py``
checks both, and that the shipped reference (``references/h200/``) was measured by today's
revisions.

Torch-free: the tests, the docs and the record builders read it without the benchmark stack.
"""

from __future__ import annotations

from typing import Any

from kit.results import precisions as precision_modes

#: engine -> (its revision today, the changelog: (revision, what it changed), oldest first)
REVISIONS: dict[str, tuple[int, tuple[tuple[int, str], ...]]] = {
    "cifar/torch": (6, (
        (1, "eager steps or torch.compile; torch.optim.SGD"),
        (2, "the whole step (forward, loss, backward, SGD, fp16 loss scale on the device) captured as one CUDA graph"),
        (3, "an untimed warm-up before each cell's first repeat (cuDNN autotuning and compilation no longer in repeat 0)"),
        (4, "the model compiled by Inductor inside the captured step, the default on CUDA (cuda-graph-inductor)"),
        (5, "the captured step updates with torch's fused SGD kernel"),
        (6, "the input's conversion (float, normalise, upsample, layout) inside the captured step; "
            "11 warm-up steps excluded in every step mode (past a fresh DDP's 10 statistics iterations)"),
    )),
    "cifar/fastai": (1, (
        (1, "fastai 2 Learner.fit_one_cycle, to_fp16()/to_bf16(), fastai's CPU data loader"),
    )),
    "cifar/fastai-v1": (1, (
        (1, "fastai 1 Learner.fit_one_cycle, to_fp16(), fastai 1's DataBunch (the cuda10 image)"),
    )),
    "lstm/kit": (1, (
        (1, "Apex's word_language_model loop: one eager step per bptt window, per-parameter fp32 SGD"),
    )),
    "lstm/graphed": (1, (
        (1, "one CUDA graph per bptt window (forward, loss, backward, clipping, SGD), the data on the device"),
    )),
    "gpt/kit": (1, (
        (1, "per-block torch.compile, fused AdamW, autocast or torchao float8 linears"),
    )),
}


#: the faithful engines, whose loop runs on the host step by step as the original tools' did: on a fast
#: GPU the host sets their pace (the H200 reference: GPU busy 7-46% of the time), so their figures
#: measure the host's CPU as much as the GPU; kit compare labels their cells "host-paced"
HOST_PACED = ("cifar/fastai", "cifar/fastai-v1", "lstm/kit")


def revision(engine: str) -> int:
    """Today's revision of ``engine`` ("cifar/torch")."""
    return REVISIONS[engine][0]


def record(engine: str, settings: dict[str, Any], details: dict[str, Any] | None = None) -> dict:
    """The method record of a cell (kit.results.method's form): ``settings`` as the cell actually
    ran; ``details`` shown but not compared."""
    out: dict[str, Any] = {"engine": engine, "revision": revision(engine), "settings": dict(settings)}
    if engine in HOST_PACED:
        out["paced_by"] = "host"
    if details:
        out["details"] = dict(details)
    return out


def loss_scale(precision: str, on_device: bool = False) -> str:
    """The loss-scale scheme of a precision mode, in the words the records use."""
    scheme = precision_modes.mode(precision).loss_scale  # kit.results.precisions
    if scheme == "dynamic":
        return "dynamic, on the device" if on_device else "dynamic"
    if scheme == "static or dynamic":  # the caller words the 2018 scheme's own choice where it knows it
        return "dynamic, decided on the host (the 2018 scheme)"
    return "none"


def warmup_excluded(repeats: list[dict], key: str = "warmup_steps") -> int | None:
    """The steps (or batches) each repeat left out of its steady state (the most, where repeats differ)."""
    values = [r.get(key) for r in repeats if isinstance(r.get(key), int)]
    return max(values) if values else None
