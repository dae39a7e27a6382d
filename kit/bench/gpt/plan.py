"""The GPT suite's cells and their cost, torch-free (the runner plans on the host)."""

from __future__ import annotations

from kit.bench.gpt.config import resolve, splits_read
from kit.bench.gpt.options import GptOptions
from kit.facts import models as model_facts
from kit.results import precisions as precision_modes
from kit.results.schema import CellSpec, RunConfig


def own(config: RunConfig) -> GptOptions:
    """The run's GPT options (kit.bench.gpt.options)."""
    return config.options_of("gpt")


def params(config: RunConfig, preset: str) -> dict:
    """A cell's knobs: the preset, what the user overrode (--steps, --batch-size, --seq-len,
    --d-model, --n-layers, --n-heads), --compile and the parity tolerance."""
    out = {"preset": preset, "steps": config.steps, "batch_size": config.per_rank_batch(),
           "compile": config.compile, "tolerance": config.tolerance}
    out.update(own(config).overrides())
    out.update(config.data_parallel_params())
    return out


def cells(config: RunConfig) -> list:
    precisions = config.precisions or precision_modes.defaults("gpt")
    return [CellSpec("gpt", preset, precision, "kit", params(config, preset))
            for preset in own(config).gpt_presets or list(model_facts.GPT_DEFAULT_PRESETS) for precision in precisions]


def work(spec: CellSpec, mode: str) -> float:
    """One repeat's training FLOPs (kit.facts.models), warm-up steps included outside convergence mode."""
    g = resolve(spec.params, mode)
    per_token = model_facts.gpt_train_flops_per_token(g.d_model, g.n_layers, g.seq_len, model_facts.WIKITEXT2_VOCAB)
    return per_token * g.batch_size * g.seq_len * (g.steps + (0 if mode == "convergence" else g.warmup_steps))


def splits(config: RunConfig, dataset: str):
    """WikiText-2's splits the run reads (``--train-split valid``: valid and test only)."""
    return splits_read(own(config).train_split)
