"""The LSTM suite's own options of `kit run` (its descriptor's ``options``): the presets, the epoch
length, the WikiText-2 split, and the preset's overrides (kit.bench.lstm.config.OVERRIDABLE, each
under its key). `kit run`, the cuda10 front end, `kit launch`, `kit fleet`, the run's config
(RunConfig.options_of("lstm")), the plan (kit.bench.lstm.plan) and the resume check read them here.

Torch-free and Python 3.7 syntax (the cuda10 image reads it).
"""

from dataclasses import dataclass
from typing import List, Optional

from kit.results.option_fields import at_least, option, specs_of

#: where kits before suites owned their options kept the preset's overrides in a run's config
OVERRIDES = "lstm"


@dataclass
class LstmOptions:
    """`kit run`'s options that only the LSTM cells read (the overrides are checked with the preset
    they change, kit.bench.lstm.config.resolve, as the plan is built)."""

    presets: Optional[List[str]] = option(None, "LSTM presets: apex-2018, tensor-core. Default: both.", names=("--preset",))
    epochs: Optional[int] = option(None, "LSTM: epochs per repeat (default 1 in throughput mode, the preset's in convergence mode).", check=at_least(1))
    max_batches: Optional[int] = option(None, "LSTM: stop each epoch after this many batches.", check=at_least(1))
    train_split: Optional[str] = option(None, "LSTM: the WikiText-2 split to train on: train (default) or valid (its first 90% trains, the rest validates, test perplexity on test), for a machine with only the real valid and test splits.", recorded_in=OVERRIDES)
    emsize: Optional[int] = option(None, "LSTM: embedding size (overrides the preset).", recorded_in=OVERRIDES)
    nhid: Optional[int] = option(None, "LSTM: hidden units per layer.", recorded_in=OVERRIDES)
    nlayers: Optional[int] = option(None, "LSTM: layers.", recorded_in=OVERRIDES)
    lr: Optional[float] = option(None, "LSTM: initial learning rate.", recorded_in=OVERRIDES)
    clip: Optional[float] = option(None, "LSTM: gradient clipping norm.", recorded_in=OVERRIDES)
    bptt: Optional[int] = option(None, "LSTM: sequence length.", recorded_in=OVERRIDES)
    dropout: Optional[float] = option(None, "LSTM: dropout.", recorded_in=OVERRIDES)
    tied: Optional[bool] = option(None, "LSTM: tie encoder and decoder weights.", names=("--tied",), off="--untied", recorded_in=OVERRIDES)
    static_loss_scale: Optional[float] = option(None, "fp16-master: static loss scale (the example's --static-loss-scale).", recorded_in=OVERRIDES)
    dynamic_loss_scale: Optional[bool] = option(None, "fp16-master: dynamic loss scaling.", off="--no-dynamic-loss-scale", recorded_in=OVERRIDES)

    def overrides(self) -> dict:
        """The preset's overrides that were set, by the preset's keys (kit.bench.lstm.config.resolve)."""
        return {spec.name: getattr(self, spec.name) for spec in specs_of(type(self))
                if spec.recorded_in == OVERRIDES and getattr(self, spec.name) is not None}
