"""One LSTM cell's settings: a historical preset plus the user's overrides.

The presets and their sources live in :mod:`kit.facts.models` (``LSTM_PRESETS``);
this module only merges and validates them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kit.errors import UsageError
from kit.facts.models import LSTM_PRESETS

#: Keys a user may override from the command line (kit.runner.options.LSTM_OVERRIDES).
OVERRIDABLE = ("emsize", "nhid", "nlayers", "lr", "clip", "bptt", "dropout", "tied",
               "static_loss_scale", "dynamic_loss_scale", "batch_size")


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
        if self.tied and self.emsize != self.nhid:
            raise UsageError(
                f"--tied needs emsize == nhid (the decoder reuses the embedding matrix); got emsize={self.emsize}, nhid={self.nhid}",
                remedy="Pass --nhid equal to --emsize, or drop --tied.",
            )

    def to_dict(self) -> dict:
        return asdict(self)


def resolve(params: dict, mode: str = "throughput") -> LSTMConfig:
    """Merge ``spec.params`` (from kit.runner.plan.lstm_params) over the preset.

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
    )
