"""The GPT suite's own options of `kit run` (its descriptor's ``options``): the presets, their
overrides (kit.bench.gpt.config.OVERRIDABLE) and the WikiText-2 split. `kit run`, the cuda10 front
end, `kit launch`, `kit fleet`, the run's config (RunConfig.options_of("gpt")), the plan
(kit.bench.gpt.plan) and the resume check read them from here.

Torch-free and Python 3.7 syntax (the cuda10 image reads it).
"""

from dataclasses import dataclass
from typing import List, Optional

from kit.results.option_fields import option, specs_of

#: where kits before suites owned their options kept the preset's overrides in a run's config
OVERRIDES = "gpt"


@dataclass
class GptOptions:
    """`kit run`'s options that only the GPT cells read (the overrides are checked with the preset
    they change, kit.bench.gpt.config.resolve, as the plan is built)."""

    gpt_presets: Optional[List[str]] = option(None, "GPT presets: gpt2-small, gpt-1b, gpt-2b, tiny. Default: the first three.")
    seq_len: Optional[int] = option(None, "GPT: tokens per sequence (the preset's: 1024).", recorded_in=OVERRIDES)
    d_model: Optional[int] = option(None, "GPT: model width (overrides the preset).", recorded_in=OVERRIDES)
    n_layers: Optional[int] = option(None, "GPT: transformer blocks.", recorded_in=OVERRIDES)
    n_heads: Optional[int] = option(None, "GPT: attention heads (must divide --d-model).", recorded_in=OVERRIDES)
    train_split: Optional[str] = option(None, "GPT: the WikiText-2 split to train on: train (default; held-out loss on valid) or valid (held-out loss on test), for a machine with only the real valid and test splits.", recorded_in=OVERRIDES)

    def overrides(self) -> dict:
        """The preset's overrides that were set (kit.bench.gpt.config.resolve)."""
        return {spec.name: getattr(self, spec.name) for spec in specs_of(type(self))
                if spec.recorded_in == OVERRIDES and getattr(self, spec.name) is not None}
