"""``kit run --suite lstm``: one cell = one preset x one precision mode, N repeats.

    run_cell(spec, ctx)
      config.resolve(spec.params)          preset + overrides, validated
      unavailable_reason(...), probe_lstm  -> CellResult.skipped(reason) when the mode cannot run
      load the corpus (real or synthetic)  vocabulary padded as the preset says
      batchify the three splits on the device
      for each repeat: train.run_repeat    fresh model, seed = preset seed + --seed + repeat
      -> CellResult(status="ok", throughput_unit="tokens", repeats, summary, data, notes)

Seeds: repeat r uses ``preset seed (1111) + ctx.seed + r``. With the default
``--seed 0`` the first repeat starts exactly where the Apex example did
(``--seed 1111``); a user's ``--seed`` shifts every repeat by the same amount.
"""

from __future__ import annotations

from typing import Any

import torch

from kit.bench import methods, profile_window
from kit.bench.lstm import config as lstm_config
from kit.bench.lstm import graphed as lstm_graphed
from kit.bench.lstm.batching import batchify, chunk_starts
from kit.bench.lstm.model import pad_vocab
from kit.bench.lstm.train import Hooks, SplitData, run_repeat, sgd_update_kwargs
from kit.bench.precision import unavailable_reason
from kit.results import precisions as precision_modes
from kit.results import step_profile
from kit.data.wikitext import corpus_provenance
from kit.results.schema import CellResult, CellSpec
from kit.results.stats import repeat_notes, summarise_repeats
from kit.bench.context import CellContext
from kit.bench.lstm import SUITE


_corpus_cache: dict[tuple, Any] = {}
_probe_cache: dict[tuple[str, str], tuple[str | None, str | None]] = {}



def _dtype_name(dtype) -> str:
    """"torch.float16" -> "float16"."""
    return str(dtype).split(".")[-1]

def load_corpus(ctx: CellContext, pad_vocab_to: int, splits: tuple | None = None):
    """The corpus for this run, loaded once per (folder, source, seed, padding, splits).

    Every cell of a run reads the same corpus; re-reading WikiText-2 (or
    re-generating the synthetic one) per cell would only add start-up time.
    ``splits``: the splits a cell reads where fewer than all (``--train-split valid``:
    valid and test, for a machine that has only those)."""
    from kit.data.wikitext import load_wikitext2

    key = (str(ctx.data_dir), ctx.data_source, ctx.seed, pad_vocab_to, splits)
    if key not in _corpus_cache:
        _corpus_cache.clear()  # keep one corpus in memory, not one per preset
        kwargs = {"splits": splits} if splits and ctx.data_source == "real" else {}
        _corpus_cache[key] = load_wikitext2(ctx.data_dir, source=ctx.data_source, seed=ctx.seed, pad_vocab_to=pad_vocab_to, **kwargs)
    return _corpus_cache[key]


#: The dtype autocast is asked for in each autocast mode (kit.results.precisions: autocast).
_AUTOCAST = {m.name: getattr(torch, m.autocast) for m in precision_modes.MODES if m.autocast}


def probe_lstm(mode: str, device: str) -> tuple[str | None, str | None]:
    """(why this mode cannot run an LSTM here, or None; the dtype the LSTM layer computes in).

    A tiny LSTM forward and backward pass under the mode's autocast tells us
    what the installed PyTorch really does, instead of a guess:

    * CPU autocast to bf16 goes through oneDNN's LSTM, which fails to build its
      kernel on CPUs without AVX-512/AMX bf16 support -> the cell is skipped.
    * CUDA autocast has its own rule for cuDNN RNNs (ATen's AutocastRNN.cpp
      casted them to fp16 whatever dtype autocast was given): the LSTM may run in
      fp16 inside an amp-bf16 run. The cell runs, and says so in its notes.

    On a GPU it also runs for the other modes, in fp32, so that cuDNN's and
    cuBLAS's one-time set-up is paid here and not in the first cell's time to
    first step.
    """
    key = (mode, device)
    if key in _probe_cache:
        return _probe_cache[key]
    dtype = _AUTOCAST.get(mode)
    on_cuda = device.startswith("cuda")
    if dtype is None and not on_cuda:
        _probe_cache[key] = (None, None)
        return _probe_cache[key]
    rnn = torch.nn.LSTM(8, 8, 2).to(device)
    x = torch.randn(3, 2, 8, device=device)
    try:
        with torch.autocast("cuda" if on_cuda else "cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
            out, _ = rnn(x)
        out.float().sum().backward()
        if on_cuda:
            (x[0] @ x[0].T).sum().item()  # cuBLAS set-up, for the same reason as cuDNN's
    except RuntimeError as exc:
        if dtype is None:
            raise
        first = (str(exc).split(".")[0] or exc.__class__.__name__).strip()
        if on_cuda:
            why = f"PyTorch cannot run a cuDNN LSTM under {mode} autocast on this GPU and software stack: {first}"
        else:
            why = f"PyTorch cannot run an LSTM in {mode[4:]} on this CPU (oneDNN's bf16 LSTM needs AVX-512/AMX bf16 support): {first}"
        _probe_cache[key] = (why, None)
        return _probe_cache[key]
    _probe_cache[key] = (None, _dtype_name(out.dtype))
    return _probe_cache[key]


def lstm_dtype_note(mode: str, lstm_dtype: str | None) -> str | None:
    """A note when autocast ran the LSTM layers in another dtype than the mode's name says."""
    wanted = _AUTOCAST.get(mode)
    if wanted is None or lstm_dtype is None or lstm_dtype == _dtype_name(wanted):
        return None
    return (f"{mode}: this PyTorch's autocast runs the LSTM layers in {lstm_dtype}, not "
            f"{_dtype_name(wanted)}; embedding and decoder follow the mode")


def precision_kwargs(mode: str, cfg: lstm_config.LSTMConfig) -> tuple[dict, list[str]]:
    """Loss-scale settings for ``Precision`` and the notes that explain them.

    The preset's static scale is the example's ``--fp16 --static-loss-scale``
    setting and belongs to fp16-master. Apex amp keeps its own default (dynamic)
    unless the user gave a scale; amp-fp16 always uses torch's dynamic GradScaler."""
    notes: list[str] = []
    how = precision_modes.scheme(mode)  # kit.results.precisions
    if how == precision_modes.TWO_COPIES:
        if cfg.dynamic_loss_scale:
            notes.append("fp16-master: half model, fp32 master weights, dynamic loss scale by DynamicLossScaler's rules (start 2^32; the example's main_fp16_optimizer.py --dynamic-loss-scale)")
        else:
            notes.append(f"fp16-master: half model, fp32 master weights, static loss scale {cfg.static_loss_scale:g} with no overflow check, as Apex's static LossScaler (the example's --fp16 --static-loss-scale)")
        return {"static_loss_scale": cfg.static_loss_scale, "dynamic_loss_scale": cfg.dynamic_loss_scale}, notes
    if how == precision_modes.APEX:
        if cfg.user_loss_scale:
            return {"static_loss_scale": cfg.static_loss_scale, "dynamic_loss_scale": cfg.dynamic_loss_scale}, notes
        notes.append(f"{mode}: Apex amp's default dynamic loss scale (the preset's static scale applies to fp16-master)")
        return {"static_loss_scale": None, "dynamic_loss_scale": True}, notes
    if how == precision_modes.SCALED_AUTOCAST and cfg.user_loss_scale:
        notes.append("amp-fp16 always uses torch.amp.GradScaler's dynamic scale; --static-loss-scale/--dynamic-loss-scale apply to fp16-master and apex modes")
    return {}, notes


def skipped_cell(spec: CellSpec, device: str) -> CellResult | None:
    """The skipped result for a mode that cannot run on ``device``, decided without training
    (the probe of the LSTM kernels in run_cell can still skip a cell later)."""
    reason = (lstm_graphed.unsupported_reason(spec.precision, spec.params) if spec.engine == lstm_graphed.ENGINE
              else None) or unavailable_reason(spec.precision, device)
    return CellResult.skipped(spec, reason, throughput_unit="tokens") if reason else None


def _split_data(ctx: CellContext, cfg: lstm_config.LSTMConfig) -> tuple[Any, int, SplitData]:
    """(the corpus the cell reads, its vocabulary size padded as the preset asks, its splits batched
    on the device)."""
    corpus = load_corpus(ctx, cfg.pad_vocab_to, lstm_config.splits_read(cfg.train_split))
    # idempotent when the loader already padded; a guard when it did not
    ntokens = pad_vocab(int(corpus.vocab_size), cfg.pad_vocab_to)
    train_ids, valid_ids = lstm_config.split_roles(corpus, cfg.train_split)
    data = SplitData(
        train=batchify(train_ids, cfg.batch_size, ctx.device),
        valid=batchify(valid_ids, cfg.eval_batch_size, ctx.device),
        test=batchify(corpus.test, cfg.eval_batch_size, ctx.device),
        ntokens=ntokens,
    )
    return corpus, ntokens, data


def run_cell(spec: CellSpec, ctx: CellContext) -> CellResult:
    cfg = lstm_config.resolve(spec.params, ctx.mode)
    graphed = spec.engine == lstm_graphed.ENGINE
    skipped = skipped_cell(spec, ctx.device)
    if skipped is not None:
        return skipped
    reason, lstm_dtype = probe_lstm(spec.precision, ctx.device)
    if reason:
        return CellResult.skipped(spec, reason, throughput_unit="tokens")

    corpus, ntokens, data = _split_data(ctx, cfg)
    kwargs, notes = precision_kwargs(spec.precision, cfg)
    dtype_note = lstm_dtype_note(spec.precision, lstm_dtype)
    if dtype_note:
        notes.append(dtype_note)

    # The first optimizer built in a process imports torch._dynamo (seconds on a
    # small CPU); pay that once here so it does not land in the first repeat's
    # time to first step as if it were a cost of this model or mode.
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)

    batches_per_epoch = len(chunk_starts(data.train, cfg.bptt, cfg.max_batches))
    total = ctx.repeats * cfg.epochs * batches_per_epoch
    done = 0
    repeats: list[dict] = []
    profile: dict = {}  # the profiled window's, after the last repeat's record (where ctx asks for one)
    for r in range(ctx.repeats):
        seed = cfg.seed + ctx.seed + r

        def on_batches(n: int, _r: int = r) -> None:
            nonlocal done
            done += n
            ctx.progress(done, total, f"repeat {_r + 1}/{ctx.repeats}")

        hooks = Hooks(
            on_batches=on_batches,
            on_epoch=lambda rec, _r=r: ctx.event("epoch", repeat=_r, **rec),
            should_stop=ctx.should_stop,
        )
        repeat = lstm_graphed.run_repeat if graphed else run_repeat
        after = profile_window.into(profile, ctx.device, ctx.profile_steps,
                                    "no training chunk a whole bptt long to profile") \
            if r == ctx.repeats - 1 and ctx.profile_steps else None
        record = repeat(cfg, data, spec.precision, ctx.device, seed, kwargs, hooks, after=after)
        record["repeat"] = r
        repeats.append(record)
        ctx.event("note", message=f"repeat {r + 1}/{ctx.repeats} done", repeat=r,
                  tokens_per_s=record["throughput_items_per_s"], test_perplexity=record["final_metric"])

    notes += _notes(cfg, ctx, repeats, batches_per_epoch, data)
    if graphed:
        notes.append(_graphed_note(ctx.device, repeats))
    return CellResult(
        spec.workload, spec.model, spec.precision, spec.engine, "ok",
        params=spec.params,
        throughput_unit="tokens",
        repeats=repeats,
        summary=summarise_repeats(repeats),
        metrics={
            "settings": cfg.to_dict(),
            "precision": repeats[0].get("precision") if repeats else None,
            "lstm_autocast_dtype": lstm_dtype,
            "final_metric_name": "test_perplexity",
            "lower_is_better": True,
            "parity_tolerance_rel": spec.params.get("tolerance") or SUITE.parity.tolerance,
            "seeds": [rec["seed"] for rec in repeats],
            "engine": spec.engine,
            "train_split": cfg.train_split,
        },
        data=_provenance(corpus, ntokens, cfg, data, batches_per_epoch),
        notes=notes,
        method=method(spec, cfg, ctx.device, repeats, kwargs, batches_per_epoch),
        profile=step_profile.with_timed_step(profile, repeats),
    )


def method(spec: CellSpec, cfg: lstm_config.LSTMConfig, device: str, repeats: list[dict], kwargs: dict,
           batches_per_epoch: int) -> dict:
    """How the cell was measured, as it ran (kit.results.method): the engine's revision, the step,
    the optimizer's implementation, loss scaling, warm-up and what was timed."""
    graphed = spec.engine == lstm_graphed.ENGINE
    optimizer = str(((repeats[0].get("precision") or {}) if repeats else {}).get("optimizer", ""))
    if graphed:
        step = "one CUDA graph per bptt window" if device.startswith("cuda") else "eager (no CUDA graphs on the CPU)"
        update = "fused" if "fused" in optimizer else "foreach"
    else:
        step = "eager, one step per bptt window (Apex's example loop)"
        update = "per-parameter" if "foreach" in sgd_update_kwargs(spec.precision) else "torch.optim.SGD"
    how = precision_modes.scheme(spec.precision)
    if how == precision_modes.TWO_COPIES or (how == precision_modes.APEX and kwargs.get("static_loss_scale")):
        scale = ("dynamic" if kwargs.get("dynamic_loss_scale") else f"static {kwargs.get('static_loss_scale'):g}")
    else:
        scale = methods.loss_scale(spec.precision, on_device=graphed and device.startswith("cuda"))
    return methods.record(f"lstm/{spec.engine}", {
        "preset": spec.model,
        "step": step,
        "optimizer": update,
        "loss_scale": scale,
        "data": "device-resident token batches",
        "excluded_batches": methods.warmup_excluded(repeats, "warmup_batches"),
        "timed_batches": batches_per_epoch * cfg.epochs,
        "batch_size": cfg.batch_size,
        "bptt": cfg.bptt,
    })


def _provenance(corpus, ntokens: int, cfg: lstm_config.LSTMConfig, data: SplitData, batches_per_epoch: int) -> dict:
    info = corpus_provenance(corpus, ntokens, cfg.pad_vocab_to)
    info.update({
        "test_tokens": int(len(corpus.test)),
        "train_batches_per_epoch": batches_per_epoch,
        "full_epoch_batches": len(chunk_starts(data.train, cfg.bptt)),
        # what the cell trained and validated on (--train-split valid: parts of the valid split)
        "train_split": cfg.train_split,
        "trained_on": lstm_config.train_split_note(cfg.train_split),
        "training_tokens": int(data.train.numel()),
    })
    return info


def _graphed_note(device: str, repeats: list[dict]) -> str:
    if not device.startswith("cuda"):
        return "graphed engine on the CPU: no CUDA graphs here, so its step ran eagerly (the same update the GPU replays)"
    busy = [r.get("gpu_busy_fraction") for r in repeats if r.get("gpu_busy_fraction") is not None]
    text = "graphed engine: the whole step of each bptt window replayed as one CUDA graph"
    if busy:
        text += f"; GPU busy {min(busy):.0%}-{max(busy):.0%} of the timed steps (CUDA-event time of the steps / wall time)"
    return text


def _notes(cfg, ctx: CellContext, repeats: list[dict], batches_per_epoch: int, data: SplitData) -> list[str]:
    notes = []
    if ctx.data_source == "synthetic":
        notes.append("synthetic data with WikiText-2's shapes: throughput is meaningful, perplexities are not")
    if cfg.train_split != "train":
        notes.append(lstm_config.train_split_note(cfg.train_split))
    full = len(chunk_starts(data.train, cfg.bptt))
    if cfg.max_batches and batches_per_epoch < full:
        notes.append(
            f"epochs truncated to {batches_per_epoch} of {full} training batches (and evaluation to {cfg.max_batches} batches) by --max-batches"
            + ("; perplexities are not comparable with full-epoch runs" if ctx.mode == "convergence" else "")
        )
    if any(rec["throughput_items_per_s"] is None for rec in repeats):
        notes.append("too few training batches for a steady state after warm-up: no tokens/s recorded")
    return notes + repeat_notes(repeats)
