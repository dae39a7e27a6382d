"""One GPT cell's settings: a preset (kit.facts.models.GPT_PRESETS) plus the user's
overrides, merged and validated here. Torch-free: the runner checks every cell's
settings with it before anything is written (the suite descriptor's check, as the run's plan is built).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kit.errors import UsageError
from kit.facts.datasets import WIKITEXT2
from kit.facts.models import GPT_PAD_VOCAB_TO, GPT_PRESETS
from kit.results.schema_names import COMPILE_CHOICES

#: Keys a user may override from the command line (kit.bench.gpt.options.GptOptions; lr: none).
OVERRIDABLE = ("d_model", "n_layers", "n_heads", "seq_len", "lr", "train_split")

#: The WikiText-2 split a cell trains on -> the split its held-out loss (convergence mode) is
#: measured on. "train" is the benchmark's; "valid" is for a machine that has only the real
#: valid and test splits (a GPU machine without network, given those two by hand),
#: so that a convergence run there still reads real text, and says which splits it read.
HELDOUT_SPLIT = {"train": "valid", "valid": "test"}

#: Why convergence mode trains the presets' ``convergence_steps`` (400) steps by default.
CONVERGENCE_STEPS_REASON = (
    "400 steps of 16 x 1024 tokens = 6.6M tokens, about 3 passes over WikiText-2's 2.09M "
    "training tokens: past the first fast drop of the loss (where every precision looks the "
    "same), into the slow part where a precision defect (underflowing gradients, a bad fp8 "
    "scale) leaves a lasting gap; and short enough that the small preset's reduced-precision "
    "cells take well under a minute each on an H200. The learning rate warms up over the "
    "first 10% of the steps and decays (cosine) to 10% at the last, so the loss after N "
    "steps is the end of a complete schedule, not a point on a falling curve."
)

#: AdamW settings (nanoGPT's GPT-2 recipe: lr 6e-4, betas (0.9, 0.95), weight decay 0.1,
#: gradient clipping at 1.0; karpathy/nanoGPT train.py).
DEFAULT_LR = 6e-4
BETAS = (0.9, 0.95)
WEIGHT_DECAY = 0.1
GRAD_CLIP = 1.0
#: Held-out windows (of the valid split) the convergence loss is measured on.
EVAL_BATCHES = 8


@dataclass
class GPTConfig:
    preset: str
    d_model: int
    """width of the residual stream"""
    n_layers: int
    n_heads: int
    seq_len: int
    """tokens per sequence (the context length; learned position embeddings of this size)"""
    batch_size: int
    """sequences per step"""
    steps: int
    """optimizer steps per repeat: timed steps in throughput mode, all steps in convergence mode"""
    warmup_steps: int
    """untimed steps before the timed ones (compilation, autotuning), throughput mode"""
    lr: float
    seed: int = 1337
    """the cells' seed (nanoGPT's); repeat r of a run with --seed S uses seed + S + r"""
    pad_vocab_to: int = GPT_PAD_VOCAB_TO
    compile: str = "auto"
    """auto (on for CUDA), on, off"""
    mode: str = "throughput"
    train_split: str = "train"
    """the WikiText-2 split the windows are drawn from (HELDOUT_SPLIT: the held-out loss's split)"""

    def __post_init__(self) -> None:
        for name in ("d_model", "n_layers", "n_heads", "seq_len", "batch_size", "steps", "pad_vocab_to"):
            if int(getattr(self, name)) < 1:
                raise UsageError(f"GPT setting {name.replace('_', '-')}={getattr(self, name)} must be at least 1")
        if self.warmup_steps < 0:
            raise UsageError("GPT warm-up steps must be 0 or more")
        if self.d_model % self.n_heads:
            raise UsageError(
                f"--d-model {self.d_model} is not divisible by --n-heads {self.n_heads}: each attention head gets d_model / n_heads dimensions",
                remedy=f"Pick a head count that divides {self.d_model} (e.g. {_divisor_near(self.d_model, self.n_heads)}), or another --d-model.",
            )
        if self.lr <= 0:
            raise UsageError(f"--lr {self.lr}: the learning rate must be positive")
        if self.compile not in COMPILE_CHOICES:
            raise UsageError(f"--compile must be {', '.join(COMPILE_CHOICES[:-1])} or {COMPILE_CHOICES[-1]}")
        if self.train_split not in HELDOUT_SPLIT:
            raise UsageError(f"--train-split {self.train_split}: choose {' or '.join(HELDOUT_SPLIT)} "
                             "(train: the held-out loss on valid; valid: the held-out loss on test)")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def heldout_split(self) -> str:
        return HELDOUT_SPLIT[self.train_split]

    def to_dict(self) -> dict:
        return asdict(self)


def _divisor_near(n: int, k: int) -> int:
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    return min(divisors, key=lambda d: (abs(d - k), d))


def splits_read(train_split: str | None) -> tuple | None:
    """The WikiText-2 splits a cell that trains on ``train_split`` reads, where fewer than all three
    (None: all of them, the reader's default)."""
    if train_split in (None, "train"):
        return None
    return tuple(s for s in ("train", "valid", "test") if s in (train_split, HELDOUT_SPLIT.get(train_split)))


def check_seq_len(seq_len: int, split_tokens: dict, mode: str, train_split: str = "train") -> None:
    """UsageError (exit 2) when a window of ``seq_len`` + 1 tokens does not fit the splits the
    run reads: training windows come from ``train_split``; convergence mode's held-out loss
    from the split after it (HELDOUT_SPLIT)."""
    needed = {train_split: split_tokens.get(train_split)}
    if mode == "convergence":
        heldout = HELDOUT_SPLIT.get(train_split, "valid")
        needed[heldout] = split_tokens.get(heldout)
    for split, n in needed.items():
        if n is not None and seq_len + 1 > n:
            raise UsageError(
                f"--seq-len {seq_len} is longer than WikiText-2's {split} split allows ({n:,} tokens; a sequence needs seq_len + 1).",
                remedy=f"Use a --seq-len of at most {n - 1:,} (the presets use 1024).",
            )


def resolve(params: dict, mode: str = "throughput") -> GPTConfig:
    """Merge ``spec.params`` (from kit.bench.gpt.plan.params) over the preset and validate.

    steps: what the user gave (``--steps``), else the preset's ``steps`` in throughput mode
    and its ``convergence_steps`` in convergence mode (see CONVERGENCE_STEPS_REASON)."""
    name = params.get("preset", "gpt2-small")
    if name not in GPT_PRESETS:
        raise UsageError(f"unknown GPT preset {name!r}; choose from {', '.join(GPT_PRESETS)}")
    values = dict(GPT_PRESETS[name])
    for key in OVERRIDABLE:
        if params.get(key) is not None:
            values[key] = params[key]
    if params.get("batch_size") is not None:
        values["batch_size"] = params["batch_size"]
    steps = params.get("steps") or (values["convergence_steps"] if mode == "convergence" else values["steps"])
    cfg = GPTConfig(
        preset=name,
        d_model=int(values["d_model"]),
        n_layers=int(values["n_layers"]),
        n_heads=int(values["n_heads"]),
        seq_len=int(values["seq_len"]),
        batch_size=int(values["batch_size"]),
        steps=int(steps),
        warmup_steps=int(values["warmup_steps"]),
        lr=float(values.get("lr") or DEFAULT_LR),
        compile=str(params.get("compile") or "auto"),
        mode=mode,
        train_split=str(values.get("train_split") or "train"),
    )
    # WikiText-2's published split sizes; its synthetic stand-in has the same (kit.data.synthetic)
    check_seq_len(cfg.seq_len, dict(WIKITEXT2.sizes or {}), mode, cfg.train_split)
    return cfg
