"""One repeat of the Apex word-language-model loop, through the shared Precision.

Per epoch (as the example): start from a zero hidden state, walk the training
columns in ``bptt``-token chunks, detach the hidden state between chunks
(truncated BPTT), take one SGD step per chunk with gradient-norm clipping,
then evaluate on the validation split; if the validation loss did not improve
on the best so far, divide the learning rate by 4. After the last epoch,
evaluate the best-validation model on the test split. Perplexity = exp(mean cross-entropy per token).

Every precision mode runs this same code: :class:`kit.bench.precision.Precision`
decides the autocast context, the half model with fp32 master weights, and the
loss scaling; the loop never branches on the mode.

Timing (see kit.bench.timing for why every boundary synchronises):
``epoch_seconds`` is training only (evaluation excluded); steady-state tokens/s
leaves out the first warm-up batches of the repeat (cuDNN set-up, allocator
growth) and all evaluation time; time to first step runs from the start of the
repeat (model construction included) to the end of the first optimizer step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from kit.bench import caps, timing
from kit.bench.context import StepTally
from kit.bench.timing import StepClock, warmup_steps_for
from kit.results import precisions as precision_modes
from kit.bench.lstm.batching import chunk_starts, get_batch, repackage_hidden
from kit.bench.lstm.config import LSTMConfig
from kit.bench.lstm.model import LSTMModel
from kit.bench.distributed import state as data_parallel
from kit.bench.precision import Precision

#: Batches at the start of a repeat that steady-state throughput leaves out (cuDNN set-up, allocator
#: growth; and a data-parallel cell's fresh DDP syncs at its first 10 iterations: the plain and the
#: data-parallel cell leave out the same batches, kit.bench.distributed.state.DDP_STATS_WARMUP).
WARMUP_BATCHES = data_parallel.DDP_STATS_WARMUP
#: How often (in batches) the loop reports progress and polls for a stop request.
PROGRESS_EVERY = 10


@dataclass
class SplitData:
    """The three splits, already batchified on the device."""

    train: torch.Tensor  # (rows, batch_size)
    valid: torch.Tensor  # (rows, eval_batch_size)
    test: torch.Tensor  # (rows, eval_batch_size)
    ntokens: int  # vocabulary size the model is built for (after padding)


@dataclass
class Hooks:
    """How a repeat talks to the runner without knowing it."""

    on_batches: Callable[[int], None] = lambda n: None  # n more training batches done
    on_epoch: Callable[[dict], None] = lambda rec: None
    should_stop: Callable[[], bool] = lambda: False


def anneal_lr(lr: float, val_loss: float, best_val_loss: float | None) -> tuple[float, float | None]:
    """The example's rule: keep lr while validation improves, else divide it by 4.

    Returns (lr for the next epoch, best validation loss so far). A NaN loss never
    counts as an improvement."""
    if best_val_loss is None or val_loss < best_val_loss:
        return lr, val_loss
    return lr / 4.0, best_val_loss


def perplexity(mean_loss: float) -> float:
    """exp(mean cross-entropy in nats); inf past what a float can hold."""
    if math.isnan(mean_loss):
        return math.nan
    return math.exp(mean_loss) if mean_loss < 709.0 else math.inf


def lm_loss(logits: torch.Tensor, target: torch.Tensor, reduction: str = "mean", in_fp32: bool = True) -> torch.Tensor:
    """Cross-entropy per token.

    ``in_fp32`` (every mode but fp16-master): the loss on an fp32 view of the logits,
    the choice autocast makes for cross_entropy. fp16-master computes it on the half
    model's half logits, as Apex's example does (``criterion(output.view(-1, ntokens),
    targets)``): no fp32 copy of a (bptt x batch x 33k) tensor per step. PyTorch's
    half log-softmax accumulates in fp32 on the GPU."""
    flat = logits.reshape(-1, logits.size(-1))
    return F.cross_entropy(flat.float() if in_fp32 else flat, target.reshape(-1), reduction=reduction)


def loss_in_fp32(prec: Precision) -> bool:
    """Whether this mode's loss is computed on fp32 logits (see lm_loss)."""
    return prec.mode != "fp16-master"


class BestCheckpoint:
    """The model of the best validation loss so far, kept on the device: the example
    saves it (``torch.save(model)``) whenever validation improves and reloads it for
    the test split. Copies happen between epochs, outside the timed training."""

    def __init__(self) -> None:
        self.state: dict | None = None
        self.epoch: int | None = None

    def offer(self, model: torch.nn.Module, epoch: int, val_loss: float, best_before: float | None) -> None:
        if best_before is None or val_loss < best_before:  # NaN never improves
            self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            self.epoch = epoch

    def restore(self, model: torch.nn.Module) -> None:
        if self.state is not None:
            model.load_state_dict(self.state)


def evaluate(model, core: LSTMModel, source: torch.Tensor, bptt: int, prec: Precision, max_batches: int | None = None) -> float:
    """Mean loss per token over ``source`` (at most ``max_batches`` chunks)."""
    model.eval()
    total = torch.zeros((), dtype=torch.float64, device=source.device)
    count = 0
    with torch.no_grad():
        hidden = core.init_hidden(source.size(1))
        for i in chunk_starts(source, bptt, max_batches):
            data, target = get_batch(source, i, bptt)
            with prec.autocast():
                logits, hidden = model(data, hidden)
                total += lm_loss(logits, target, reduction="sum", in_fp32=loss_in_fp32(prec)).double()
            count += target.numel()
    return float(total.item()) / max(count, 1)


def sgd_update_kwargs(precision_mode: str) -> dict:
    """How the SGD step updates the weights, as Apex's example does (docs/fidelity.md).

    The example's fp32 loop updates each parameter by itself (``p.data.add_(-lr, p.grad.data)``),
    one kernel per parameter; with ``--fp16`` it hands the fp32 master weights to
    ``torch.optim.SGD`` inside FP16_Optimizer, which on today's torch updates them all with foreach
    kernels. The kit does the same: fp16-master gets torch's default, every other mode the
    per-parameter update (so fp32, tf32 and the amp modes share one update and their ratios
    measure the precision, not the optimizer). On the host-bound 200-unit preset the two
    differ: with foreach updates the kit's fp32 ran 9% faster than the example on an H200 (the first
    H200 run in docs/measurements.md)."""
    if precision_modes.scheme(precision_mode) == precision_modes.TWO_COPIES or not caps.HAS_OPTIM_FOREACH:
        return {}
    return {"foreach": False}


def train_step(model, data: torch.Tensor, target: torch.Tensor, hidden, prec: Precision, optimizer, clip: float,
               params, in_fp32: bool):
    """One step of the example's loop on one bptt chunk: the hidden state cut from the last chunk's
    graph (truncated BPTT), forward and loss under the mode's autocast, the mode's backward and
    update; returns (loss, the hidden state for the next chunk)."""
    hidden = repackage_hidden(hidden)
    with prec.autocast():
        logits, hidden = model(data, hidden)
        loss = lm_loss(logits, target, in_fp32=in_fp32)
    prec.backward_step(loss, optimizer, clip=clip, params=params)
    return loss, hidden


def train_epoch(model, core: LSTMModel, source: torch.Tensor, cfg: LSTMConfig, prec: Precision, optimizer, clock: StepClock, hooks: Hooks) -> float:
    """One pass over the training columns; returns the mean training loss per token."""
    model.train()
    hidden = core.init_hidden(source.size(1))
    params = prec.optimizer_params(model)
    in_fp32 = loss_in_fp32(prec)
    loss_sum = torch.zeros((), dtype=torch.float64, device=source.device)  # summed on the device: no per-step sync
    tokens = 0
    tally = StepTally(hooks.on_batches, hooks.should_stop, PROGRESS_EVERY)
    clock.epoch_start()
    for i in chunk_starts(source, cfg.bptt, cfg.max_batches):
        data, target = get_batch(source, i, cfg.bptt)
        loss, hidden = train_step(model, data, target, hidden, prec, optimizer, cfg.clip, params, in_fp32)
        n = target.numel()
        loss_sum += loss.detach().double() * n
        tokens += n
        clock.step_done(n)
        tally.step()
    clock.epoch_end()
    tally.flush()
    return float(loss_sum.item()) / max(tokens, 1)


def _finite(x: float | None) -> float | None:
    """JSON has no NaN/inf: a diverged value is recorded as None (and noted)."""
    return x if x is not None and math.isfinite(x) else None


def full_windows(source: torch.Tensor, cfg: LSTMConfig) -> list[int]:
    """The starts of an epoch's chunks that are a whole bptt long (the shape most steps have)."""
    return [i for i in chunk_starts(source, cfg.bptt, cfg.max_batches) if i + cfg.bptt <= source.size(0) - 1]


def run_repeat(cfg: LSTMConfig, data: SplitData, precision_mode: str, device: str, seed: int,
               precision_kwargs: dict | None = None, hooks: Hooks | None = None,
               after: Callable[[Callable[[], object], int], None] | None = None) -> dict:
    """Train a fresh model for ``cfg.epochs`` epochs; return the repeat's record
    (the metric names of kit.results.schema.CellResult.repeats).

    ``after``, when given, is called once the record is complete with the loop's own step
    (:func:`train_step`, walking the whole-bptt chunks from the first, the hidden state carried)
    and how many such chunks there are: the profiled window runs there and cannot change the
    record."""
    hooks = hooks or Hooks()
    n_batches = len(chunk_starts(data.train, cfg.bptt, cfg.max_batches))
    # short smoke runs still get a steady-state window: warm up over at most half of the steps
    clock = StepClock(device, warmup_steps=warmup_steps_for(n_batches * cfg.epochs, WARMUP_BATCHES))
    timing.reset_peak_memory(device)
    clock.start()

    torch.manual_seed(seed)  # also seeds every CUDA device
    core = LSTMModel(data.ntokens, cfg.emsize, cfg.nhid, cfg.nlayers, cfg.dropout, cfg.tied).to(device)
    prec = Precision(precision_mode, device, **(precision_kwargs or {}))
    model = prec.prepare_model(core)  # halves `core` in place for fp16-master
    optimizer = torch.optim.SGD(prec.optimizer_params(model), lr=cfg.lr, **sgd_update_kwargs(precision_mode))
    model, optimizer = prec.wrap(model, optimizer)

    lr, best_val = cfg.lr, None
    best = BestCheckpoint()
    train_losses: list[float] = []
    val_losses: list[float] = []
    lrs: list[float] = []
    for epoch in range(1, cfg.epochs + 1):
        for group in optimizer.param_groups:
            group["lr"] = lr
        lrs.append(lr)
        train_loss = train_epoch(model, core, data.train, cfg, prec, optimizer, clock, hooks)
        val_loss = evaluate(model, core, data.valid, cfg.bptt, prec, cfg.max_batches)
        train_losses.append(train_loss)
        val_losses.append(val_loss)
        hooks.on_epoch({
            "epoch": epoch, "seconds": clock.epoch_seconds[-1], "lr": lr,
            "train_loss": _finite(train_loss), "val_loss": _finite(val_loss),
            "val_perplexity": _finite(perplexity(val_loss)),
        })
        best.offer(core, epoch, val_loss, best_val)
        lr, best_val = anneal_lr(lr, val_loss, best_val)
    data_parallel.repeat_done(core)  # a data-parallel rank records its weights' digest
    best.restore(core)  # test perplexity of the best-validation model, as the example reports it
    test_loss = evaluate(model, core, data.test, cfg.bptt, prec, cfg.max_batches)
    counters = prec.counters()
    peak = timing.peak_memory_bytes(device)

    record = repeat_record(seed, clock.summary(), n_batches, peak, counters, train_losses, val_losses, lrs, test_loss,
                           best.epoch, prec.describe())
    if after is not None:
        after(_window_step(model, core, data.train, cfg, prec, optimizer), len(full_windows(data.train, cfg)))
    return record


def _window_step(model, core: LSTMModel, source: torch.Tensor, cfg: LSTMConfig, prec: Precision, optimizer):
    """The loop's step as a call without arguments: each call trains the next whole-bptt chunk
    from the first (again from the first after the last), the hidden state carried."""
    starts = full_windows(source, cfg)
    params = prec.optimizer_params(model)
    in_fp32 = loss_in_fp32(prec)
    state = {"at": 0, "hidden": core.init_hidden(source.size(1))}
    model.train()

    def step():
        i = starts[state["at"] % len(starts)]
        state["at"] += 1
        x, y = get_batch(source, i, cfg.bptt)
        loss, state["hidden"] = train_step(model, x, y, state["hidden"], prec, optimizer, cfg.clip, params, in_fp32)
        return loss

    return step


def repeat_record(seed: int, times: dict, n_batches: int, peak, counters: dict, train_losses: list, val_losses: list,
                  lrs: list, test_loss: float, best_epoch, precision: dict, extra: dict | None = None) -> dict:
    """One repeat's record as results.json stores it, the same for both LSTM engines (``extra``: an
    engine's own fields, after the step counters): times from the step clock, the precision's
    counters, the losses per epoch and the test perplexity of the best-validation model."""
    test_ppl = perplexity(test_loss)
    diverged = not all(math.isfinite(x) for x in train_losses + val_losses + [test_loss])
    return {
        "seed": seed,
        "epoch_seconds": times["epoch_seconds"],
        "epoch_seconds_median": times["epoch_seconds_median"],
        "throughput_items_per_s": times["throughput_items_per_s"],  # tokens/s, steady state
        "steady_tokens": times["steady_items"],
        "steady_seconds": times["steady_seconds"],
        "steady_windows": times["steady_windows"],  # for the runner's steady-state energy
        "warmup_batches": times["warmup_steps"],
        "train_batches_per_epoch": n_batches,
        "time_to_first_step_s": times["time_to_first_step_s"],
        "peak_memory_bytes": peak,
        "overflow_steps": counters["overflow_steps"],
        "nan_losses": counters["nan_losses"],
        "loss_scale_final": counters["loss_scale_final"],
        "steps": counters["steps"],
        **(extra or {}),
        "final_loss": _finite(train_losses[-1]),
        "final_metric": _finite(test_ppl),
        "diverged": diverged,
        "metrics": {
            "train_loss": [_finite(x) for x in train_losses],
            "val_loss": [_finite(x) for x in val_losses],
            "val_perplexity": [_finite(perplexity(x)) for x in val_losses],
            "lr": lrs,
            "test_loss": _finite(test_loss),
            "test_perplexity": _finite(test_ppl),
            "test_model_epoch": best_epoch,
        },
        "precision": precision,
    }
