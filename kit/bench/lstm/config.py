"""One LSTM cell's settings: a historical preset plus the user's overrides.

The presets and their sources live in :mod:`kit.facts.models` (``LSTM_PRESETS``);
this module only merges and validates them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kit.errors import UsageError
from kit.facts.models import LSTM_PRESETS

#: Keys a user may override from the command line (kit.bench.lstm.options.LstmOptions; batch_size: --batch-size).
OVERRIDABLE = ("emsize", "nhid", "nlayers", "lr", "clip", "bptt", "dropout", "tied",
               "static_loss_scale", "dynamic_loss_scale", "batch_size", "train_split")

#: ``--train-split``: the WikiText-2 split the LSTM trains on. "train" is the benchmark's (validation
#: on valid, test on test). "valid" is for a machine that has only the real valid and test splits
#: (a GPU machine without network, given the valid and test splits by hand): the
#: first VALID_TRAIN_FRACTION of the valid split trains, its last part stands in for the validation
#: split (the example's learning-rate annealing and best checkpoint), and the test split stays held
#: out for the test perplexity, as the GPT suite's --train-split valid keeps it.
TRAIN_SPLITS = ("train", "valid")
VALID_TRAIN_FRACTION = 0.9


@dataclass
class LSTMConfig:
    preset: str
    emsize: int
    """embedding size"""
    nhid: int
    """hidden units per LSTM layer"""
    nlayers: int
    lr: float
    """initial SGD learning rate (divided by 4 whenever validation loss does not improve)"""
    clip: float
    """gradient-norm clipping threshold"""
    epochs: int
    batch_size: int
    eval_batch_size: int
    bptt: int
    """truncated back-propagation length (tokens per chunk)"""
    dropout: float
    tied: bool
    seed: int
    """the preset's seed; repeat r of a run with --seed S uses seed + S + r"""
    pad_vocab_to: int
    """round the vocabulary up to a multiple of this (8 feeds Tensor Cores)"""
    static_loss_scale: float
    dynamic_loss_scale: bool
    max_batches: int | None = None
    """cap on training batches per epoch AND on evaluation batches (None: full epochs)"""
    #: which loss-scale keys the user gave explicitly (they then apply to every fp16 mode)
    user_loss_scale: bool = False
    train_split: str = "train"
    """the WikiText-2 split trained on (TRAIN_SPLITS)"""

    def __post_init__(self) -> None:
        for name in ("emsize", "nhid", "nlayers", "epochs", "batch_size", "eval_batch_size", "bptt", "pad_vocab_to"):
            if int(getattr(self, name)) < 1:
                raise UsageError(f"LSTM setting {name}={getattr(self, name)} must be at least 1")
        if self.max_batches is not None and self.max_batches < 1:
            raise UsageError("--max-batches must be at least 1")
        if not 0.0 <= self.dropout < 1.0:
            raise UsageError(f"--dropout {self.dropout} must be in [0, 1)")
        if self.lr <= 0 or self.clip <= 0:
            raise UsageError("--lr and --clip must be positive")
        if self.static_loss_scale <= 0:
            raise UsageError("--static-loss-scale must be positive")
        if self.train_split not in TRAIN_SPLITS:
            raise UsageError(f"--train-split {self.train_split}: choose {' or '.join(TRAIN_SPLITS)} "
                             "(valid: for a machine with only WikiText-2's valid and test splits)")
        if self.tied and self.emsize != self.nhid:
            raise UsageError(
                f"--tied needs emsize == nhid (the decoder reuses the embedding matrix); got emsize={self.emsize}, nhid={self.nhid}",
                remedy="Pass --nhid equal to --emsize, or drop --tied.",
            )

    def to_dict(self) -> dict:
        return asdict(self)


def resolve(params: dict, mode: str = "throughput") -> LSTMConfig:
    """Merge ``spec.params`` (from kit.bench.lstm.plan.params) over the preset.

    epochs: what the user gave, else 1 in throughput mode and the preset's (30,
    as the seed article ran) in convergence mode.
    """
    name = params.get("preset", "apex-2018")
    if name not in LSTM_PRESETS:
        raise UsageError(f"unknown LSTM preset {name!r}; choose from {', '.join(LSTM_PRESETS)}")
    values = dict(LSTM_PRESETS[name])
    for key in OVERRIDABLE:
        if params.get(key) is not None:
            values[key] = params[key]
    epochs = params.get("epochs") or (values["epochs"] if mode == "convergence" else 1)
    values["epochs"] = int(epochs)
    user_loss_scale = params.get("static_loss_scale") is not None or params.get("dynamic_loss_scale") is not None
    if params.get("static_loss_scale") is not None and params.get("dynamic_loss_scale") is None:
        values["dynamic_loss_scale"] = False  # a scale given on its own means a static scale
    return LSTMConfig(
        preset=name,
        emsize=int(values["emsize"]),
        nhid=int(values["nhid"]),
        nlayers=int(values["nlayers"]),
        lr=float(values["lr"]),
        clip=float(values["clip"]),
        epochs=values["epochs"],
        batch_size=int(values["batch_size"]),
        eval_batch_size=int(values["eval_batch_size"]),
        bptt=int(values["bptt"]),
        dropout=float(values["dropout"]),
        tied=bool(values["tied"]),
        seed=int(values["seed"]),
        pad_vocab_to=int(values["pad_vocab_to"]),
        static_loss_scale=float(values["static_loss_scale"]),
        dynamic_loss_scale=bool(values["dynamic_loss_scale"]),
        max_batches=params.get("max_batches"),
        user_loss_scale=user_loss_scale,
        train_split=str(params.get("train_split") or "train"),
    )


def splits_read(train_split: str | None) -> tuple | None:
    """The WikiText-2 splits a cell reads where fewer than all three (None: all): valid and test
    for ``--train-split valid``."""
    return None if train_split in (None, "train") else ("valid", "test")


def split_roles(corpus, train_split: str):
    """(training ids, validation ids) of ``corpus`` for ``train_split``: the train and valid splits,
    or, for "valid", the first VALID_TRAIN_FRACTION of the valid split and the rest of it."""
    if train_split == "train":
        return corpus.train, corpus.valid
    cut = int(len(corpus.valid) * VALID_TRAIN_FRACTION)
    return corpus.valid[:cut], corpus.valid[cut:]


def train_split_note(train_split: str) -> str:
    """What a cell trained on, in words (its notes; what `kit run` prints before it starts)."""
    if train_split == "train":
        return "trained on WikiText-2's train split, validated on valid, tested on test"
    pct = round(VALID_TRAIN_FRACTION * 100)
    return (f"trained on the first {pct}% of WikiText-2's valid split (--train-split valid; its last {100 - pct}% "
            "stands in for the validation split: learning-rate annealing and the best checkpoint), tested on the "
            "test split: not the benchmark's train split, and the vocabulary is the valid and test splits' words")
