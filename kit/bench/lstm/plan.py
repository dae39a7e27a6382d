"""The LSTM suite's cells and their cost, torch-free (the runner plans on the host)."""

from __future__ import annotations

from pathlib import Path

from kit.bench.lstm.config import resolve, splits_read, train_split_note
from kit.bench.lstm.options import LstmOptions
from kit.errors import UsageError
from kit.facts import models as model_facts
from kit.facts.datasets import WIKITEXT2
from kit.results import precisions as precision_modes
from kit.results.schema import CellSpec, RunConfig

#: the presets (kit.facts.models.LSTM_PRESETS), in the views' order
PRESETS = ("apex-2018", "tensor-core")
#: ``kit``, faithful to Apex's example (every kernel launched from Python, as its users ran it);
#: ``graphed``, the whole step of a bptt window replayed as one CUDA graph (what the GPU can do)
ENGINES = ("kit", "graphed")


def engines(config: RunConfig) -> list:
    """The engines a run measures: those of ``--engines``; by default the faithful ``kit`` and, on a
    GPU, ``graphed`` (on the CPU it would run the same step eagerly: nothing of its own to measure)."""
    chosen = [e for e in config.engines if e in ENGINES]
    if chosen:
        return chosen
    from kit.env.record import device_kind  # when planning, not when the suites are listed (kit's start-up)

    return list(ENGINES) if device_kind(config.device) == "cuda" else ["kit"]


def own(config: RunConfig) -> LstmOptions:
    """The run's LSTM options (kit.bench.lstm.options)."""
    return config.options_of("lstm")


def params(config: RunConfig, preset: str) -> dict:
    opts = own(config)
    out = {"preset": preset, "epochs": opts.epochs, "max_batches": opts.max_batches}
    if config.per_rank_batch():
        out["batch_size"] = config.per_rank_batch()
    out.update(opts.overrides())
    out["tolerance"] = config.tolerance
    out.update(config.data_parallel_params())
    return out


def cells(config: RunConfig) -> list:
    precisions = config.precisions or precision_modes.defaults("lstm")
    return [CellSpec("lstm", preset, precision, engine, params(config, preset))
            for preset in own(config).presets or list(PRESETS) for engine in engines(config) for precision in precisions]


def work(spec: CellSpec, mode: str) -> float:
    """One repeat's training and evaluation FLOPs (kit.facts.models), at the settings the cell resolves to."""
    p = resolve(spec.params, mode).to_dict()
    return model_facts.lstm_train_flops(p) + model_facts.lstm_eval_flops(p)


def steps(spec: CellSpec, mode: str) -> int:
    """One repeat's steps, as the plan's estimate counts a host-paced engine's (kit.facts.estimates: step_s):
    its training batches (bptt windows of batch_size columns, every epoch) and its evaluation batches (the
    valid split after each epoch, the test split once, eval_batch_size columns), each cut to max_batches
    as the repeat cuts them. The evaluation's forward-only batches count as whole steps: rough, like the
    rest of the estimate."""
    p = resolve(spec.params, mode).to_dict()

    def batches(split: str, columns: int) -> int:
        n = -(-WIKITEXT2.sizes[split] // (columns * p["bptt"]))
        return min(n, p["max_batches"]) if p.get("max_batches") else n

    epochs = p.get("epochs") or 1
    return epochs * (batches("train", p["batch_size"]) + batches("valid", p["eval_batch_size"])) + \
        batches("test", p["eval_batch_size"])


def splits(config: RunConfig, dataset: str):
    """WikiText-2's splits the run reads (``--train-split valid``: valid and test only)."""
    return splits_read(own(config).train_split)


def data_note(config: RunConfig, dataset: str, described: dict):
    """An LSTM run on real WikiText-2 says what it trains on before anything runs; with only the
    valid and test splits in the data folder and the train split asked for, one line (exit 2)
    that names --train-split valid instead of a download this machine may not be able to make."""
    from kit.data.wikitext import SPLITS, split_members
    from kit.facts.datasets import WIKITEXT2

    train_split = own(config).train_split or "train"
    if train_split == "train" and not described.get("present"):
        token_dir = Path(config.data_dir) / WIKITEXT2.member_dir
        have = [s for s, m in zip(SPLITS, split_members(WIKITEXT2)) if (token_dir / m).is_file()]
        if have and "train" not in have:
            raise UsageError(
                f"WikiText-2's train split is not in {token_dir} (only {' and '.join(have)}): the LSTM suite trains on it by default.",
                remedy="Pass --train-split valid to train on the valid split and test on the test split, or `kit data fetch wikitext2` where the network allows.")
    if described.get("present"):
        return f"LSTM cells, what they train on: {train_split_note(train_split)} ({described.get('path')})"
    return None
