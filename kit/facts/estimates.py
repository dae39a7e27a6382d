"""Rates behind the plan's rough time estimate (``kit run`` prints it before a run and
``--dry-run`` alone; the progress ETA uses it only to weigh cells against each other).

Never reported as a result. Each rate is measured by the kit itself: a cell's wall
time (``finished_at - started_at`` in results.json) against the model FLOPs the
estimate counts (kit.facts.models: CIFAR training; LSTM training plus its evaluation
passes), fitted as ``cell_s + repeats x FLOPs / (tflops x 1e12)``. ``tflops`` is an
effective rate of the whole cell (data, optimizer, host overhead), far below the
device's peak.

Sources:

- [parts 2026-12-06] the parts of today's references, measured by today's engines:
  references/h200/remeasure/torch-a/ and lstm-graphed/ (NVIDIA H200), and references/h100/parts/
  (torch-a ... torch-d, fastai-a ... fastai-d, lstm-graphed, lstm-kit-a and lstm-kit-b; NVIDIA H100, whose
  GPU-bound cells there run at 0.93-0.99x the H200's). Their cells' records are in
  references/gpu-estimates/cells.json, and ``scripts/fit_estimates.py`` fits them: the ``torch`` CIFAR
  engine from 35 cells (every ResNet and precision, Inductor's first compile of each precision and the
  profiled window included), the ``fastai`` engine from 25 (every ResNet) and the ``graphed`` LSTM engine
  from 20, each cell's wall time less its batch search. The search (``--find-max-batch``, 35 cells)
  grows with the model: 7-19 s for ResNet-18, 30-116 s for ResNet-152, longest where the largest batch
  is below the data set's size and is found by bisection (fp32 and tf32, and every precision of
  ResNet-152). It trains a few steps at each batch it tries, whatever the run's steps or batch size, so
  the estimate counts it per training GFLOP per image of the model (the searches' seconds over their
  cells' GFLOPs per image); a flat 25 s (their mean) read the ``torch`` parts at 0.77-1.34x, this
  0.87-1.09x. The rates these replaced, fitted to the reference of 2026-11-30, estimated these runs at
  0.25-0.80x their cells' seconds.
  The ``kit`` LSTM engine's 10 cells (49-141 s) fit no FLOPs line (the smaller model's cells took longer
  than four of the larger's five): its host launches every kernel of a step from Python and sets the
  step's pace whatever the model's size. Its rate is host-paced: the ``graphed`` engine's fixed cost and
  FLOPs rate (the device's pace for the same model) and 5.26 ms a step (training and evaluation batches,
  kit.bench.lstm.plan.steps: 4,308 a repeat of ``apex-2018``, 3,811 of ``tensor-core``), the least-squares
  fit over the cells whose time was longer than the device's share; a repeat takes the longer of the two.
  The FLOPs-only rate it replaced (11.2 s + 79 TFLOP/s, fitted to the shipped H200 reference) read the
  ``apex-2018`` part at 0.19x of its seconds, so that part's ``--time-limit`` started its last cell with
  37 s left on an estimate of 15 s, and the limit cut it; this rate reads the two parts at 1.14x and
  1.12x. A faster host takes less: the ``apex-2018`` fp32 cell read 1.67x on another lease.
- [VM 2026-12-03] references/cpu-vm/estimates/ (measurements.json, remade by its measure.py): the
  README's two CPU commands, ``kit run --smoke --suite all`` (what ``make run`` runs on a host
  without a GPU) and the "one-minute CPU check" (``kit run --suite cifar --data synthetic
  --device cpu --models resnet18 --epochs 1 --steps 4``), each run three times on the 2-core
  VM (AMD EPYC, x86-64, no GPU, torch 2.14.1 on the CPU) while other jobs shared it; the rates
  fit the *minimum* of each cell over the rounds: ResNet-18 ``torch`` 5.35 s (smoke: 4 steps of
  32, 1 repeat) and 6.21 s (the check: 4 steps of 32, 3 repeats), ``fastai`` 5.10 s and 6.29 s,
  the LSTM (smoke) 16.9 s; the whole commands took 32.9 s and 16.8 s at the least
  (``MEASURED``; the plan estimates only cells, not the process's start and the bundle). On a
  CPU only fp32 (and amp-bf16 where the CPU has bf16 instructions) trains; the other cells are
  skipped in at most 0.03 s each (``SKIPPED_CELL_S``), so they count as skipped, not trained.
- [H200 gpt] the kit's own GPT run, references/h200/gpt/ (2026-12-02; NVIDIA H200, torch 2.11,
  the three presets x six precisions x 3 repeats): 471 s of cell wall time in all. 8 s a cell
  (compilation per repeat is a few seconds) + 200 TFLOP/s gives the same total (18 x 8 + 327 s);
  one rate serves every precision, so a single cell is off by up to 3x either way (strict fp32
  runs at about 50 TFLOP/s there, bf16 at about 560).
- [VM gpt] ``kit run --suite gpt --smoke --device cpu -p fp32,amp-bf16`` on the 2-core VM
  (2026-12-01, load average 4-12 from other jobs): 47 s for both cells of the tiny preset,
  nearly all fixed cost.
"""

from __future__ import annotations

from typing import NamedTuple


class EstimateRate(NamedTuple):
    #: fixed seconds per cell: model build, data on the device, warm-up / compilation, teardown
    cell_s: float
    #: effective TFLOP/s of the cell's counted FLOPs
    tflops: float
    #: a host-paced engine's seconds per step (its suite's ``steps``): a repeat takes the longer of its
    #: FLOPs' time and its steps at this pace; 0: the FLOPs alone
    step_s: float = 0.0


#: (device kind, "workload/engine") -> rate; device kind as kit.env.record.device_kind gives it.
RATES: dict[tuple[str, str], EstimateRate] = {
    ("cuda", "cifar/torch"): EstimateRate(cell_s=18.7, tflops=1.57),    # [parts 2026-12-06]
    ("cuda", "cifar/fastai"): EstimateRate(cell_s=9.1, tflops=5.24),    # [parts 2026-12-06]
    ("cuda", "lstm/kit"): EstimateRate(cell_s=19.7, tflops=73.4, step_s=0.00526),  # [parts 2026-12-06]
    ("cuda", "lstm/graphed"): EstimateRate(cell_s=19.7, tflops=73.4),   # [parts 2026-12-06]
    ("cuda", "gpt/kit"): EstimateRate(cell_s=8.0, tflops=200.0),        # [H200 gpt]
    ("cpu", "cifar/torch"): EstimateRate(cell_s=5.0, tflops=0.060),     # [VM 2026-12-03]
    ("cpu", "cifar/fastai"): EstimateRate(cell_s=4.5, tflops=0.045),    # [VM 2026-12-03]
    ("cpu", "lstm/kit"): EstimateRate(cell_s=4.0, tflops=0.023),        # [VM 2026-12-03]
    ("cpu", "gpt/kit"): EstimateRate(cell_s=20.0, tflops=0.010),        # [VM gpt]
}

#: Seconds the batch search (``--find-max-batch``, CUDA only) adds to a cell for each of the model's
#: training GFLOPs per image (kit.runner.plan.search_gflop): 35 searches [parts 2026-12-06]
SEARCH_S_PER_GFLOP = 41.9

#: Seconds the plan counts for a cell the device cannot run (skipped before any training):
#: at most 0.03 s each on the VM [VM 2026-12-03]; 0.1 s leaves room for a slower host.
SKIPPED_CELL_S = 0.1


class Measured(NamedTuple):
    """A whole ``kit`` command timed on a machine kind, the data the estimate is checked against."""

    machine: str
    #: the command's arguments after ``kit``
    argv: tuple
    #: the least wall seconds over the rounds, and the least sum of its cells' seconds
    wall_s: float
    cells_s: float
    source: str


#: The README's CPU commands as measured [VM 2026-12-03] (min over 3 rounds;
#: references/cpu-vm/estimates/measurements.json). tests/test_estimates.py checks the plan's
#: estimate against them (within 3x).
MEASURED: tuple = (
    Measured("2-core VM, CPU", ("run", "--smoke", "--suite", "all", "--device", "cpu", "--data", "synthetic"),
             wall_s=32.88, cells_s=28.06, source="[VM 2026-12-03]"),
    Measured("2-core VM, CPU", ("run", "--suite", "cifar", "--data", "synthetic", "--device", "cpu", "--models",
                                "resnet18", "--epochs", "1", "--steps", "4"),
             wall_s=16.82, cells_s=12.50, source="[VM 2026-12-03]"),
)

#: What the plan's printout says the estimate rests on, per device kind.
SOURCES: dict[str, str] = {
    "cuda": "from model FLOPs at the rates of H200 and H100 reference runs; a slower GPU takes longer",
    "cpu": "from model FLOPs at rates measured on a 2-core VM's CPU",
}


def rate(device_kind: str, workload: str, engine: str) -> EstimateRate:
    """The rate for a cell; an engine without its own (e.g. a CIFAR engine added later) uses
    the workload's first; a suite with none measured the device kind's slowest (:func:`unmeasured`)."""
    kind = device_kind if device_kind in SOURCES else "cuda"
    key = (kind, f"{workload}/{engine}")
    if key in RATES:
        return RATES[key]
    own = [r for (k, name), r in RATES.items() if k == kind and name.startswith(workload + "/")]
    return own[0] if own else unmeasured(kind)


def unmeasured(kind: str) -> EstimateRate:
    """A suite without a measured rate: the largest fixed cost and the lowest rate measured on the device kind."""
    rates = [r for (k, _), r in RATES.items() if k == kind]
    return EstimateRate(cell_s=max(r.cell_s for r in rates), tflops=min(r.tflops for r in rates))
