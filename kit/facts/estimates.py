"""Rates behind the plan's rough time estimate (``kit run`` prints it before a run and
``--dry-run`` alone; the progress ETA uses it only to weigh cells against each other).

Never reported as a result. Each rate is measured by the kit itself: a cell's wall
time (``finished_at - started_at`` in results.json) against the model FLOPs the
estimate counts (kit.facts.models: CIFAR training; LSTM training plus its evaluation
passes), fitted as ``cell_s + repeats x FLOPs / (tflops x 1e12)``. ``tflops`` is an
effective rate of the whole cell (data, optimizer, host overhead), far below the
device's peak.

Sources:

- [H200] the shipped reference, references/h200/vm_NVIDIA-H200_native_20261130-141944.tar.gz
  (NVIDIA H200, torch 2.11, 3 repeats, batch 256, 100 / 50 steps, LSTM 300 batches): a
  least-squares fit over its measured cells, 25 ``torch``, 25 ``fastai``, 10 LSTM. The
  ``torch`` fit includes the fp16-master cells, which recompile each repeat (35-141 s a
  cell; the other 20 alone fit 7.3 s + 15.8 TFLOP/s). A slower GPU takes longer.
- [VM] runs on the project's 2-core development VM (x86-64, no GPU, torch 2.14.1 on the
  CPU), 2026-12-01, while other jobs shared its two cores (load average 3-8): ``kit run
  --smoke --suite all --device cpu --data synthetic`` (ResNet-18, 4 steps of 32, 1 repeat:
  10.5-30 s a ``torch`` cell, 17-21 s a ``fastai`` cell; the LSTM, 5 batches: 16-21 s a
  cell) and ``kit run --device cpu --data synthetic --suite all -m resnet18,resnet34 -p fp32
  --steps 8 --repeats 2 --preset apex-2018 --max-batches 20`` (23-40 s ``torch``, 41-56 s
  ``fastai``, 243 s the LSTM). Rounded to fit those within about 2x; a quiet or larger CPU
  is faster.
- [H200 gpt] the kit's own GPT run, references/h200/gpt/ (2026-12-02; NVIDIA H200, torch 2.11,
  the three presets x six precisions x 3 repeats): 471 s of cell wall time in all. 8 s a cell
  (compilation per repeat is a few seconds) + 200 TFLOP/s gives the same total (18 x 8 + 327 s);
  one rate serves every precision, so a single cell is off by up to 3x either way (strict fp32
  runs at about 50 TFLOP/s there, bf16 at about 560). It replaced issue 17's guess (60 s + 200
  TFLOP/s), which put that run at 23 minutes; it took 8.
- [VM gpt] ``kit run --suite gpt --smoke --device cpu -p fp32,amp-bf16`` on the 2-core VM
  (2026-12-01, load average 4-12 from other jobs): 25 and 43 s a cell with a first, larger
  tiny preset (seq 64, batch 8), 47 s for both cells of today's; nearly all fixed cost.
"""

from __future__ import annotations

from typing import NamedTuple


class EstimateRate(NamedTuple):
    #: fixed seconds per cell: model build, data on the device, warm-up / compilation, teardown
    cell_s: float
    #: effective TFLOP/s of the cell's counted FLOPs
    tflops: float


#: (device kind, "workload/engine") -> rate; device kind as kit.runner.plan.device_kind gives it.
RATES: dict[tuple[str, str], EstimateRate] = {
    ("cuda", "cifar/torch"): EstimateRate(cell_s=7.0, tflops=3.4),      # [H200]
    ("cuda", "cifar/fastai"): EstimateRate(cell_s=7.8, tflops=2.4),     # [H200]
    ("cuda", "lstm/kit"): EstimateRate(cell_s=11.2, tflops=79.0),       # [H200]
    ("cuda", "gpt/kit"): EstimateRate(cell_s=8.0, tflops=200.0),        # [H200 gpt]
    ("cpu", "cifar/torch"): EstimateRate(cell_s=8.0, tflops=0.010),     # [VM]
    ("cpu", "cifar/fastai"): EstimateRate(cell_s=15.0, tflops=0.006),   # [VM]
    ("cpu", "lstm/kit"): EstimateRate(cell_s=8.0, tflops=0.012),        # [VM]
    ("cpu", "gpt/kit"): EstimateRate(cell_s=20.0, tflops=0.010),        # [VM gpt]
}

#: What the plan's printout says the estimate rests on, per device kind.
SOURCES: dict[str, str] = {
    "cuda": "from model FLOPs at the rates of the shipped H200 reference run; a slower GPU takes longer",
    "cpu": "from model FLOPs at rates measured on a 2-core VM's CPU",
}


def rate(device_kind: str, workload: str, engine: str) -> EstimateRate:
    """The rate for a cell; an engine without its own (e.g. a CIFAR engine added later) uses
    the workload's first."""
    kind = device_kind if device_kind in SOURCES else "cuda"
    key = (kind, f"{workload}/{engine}")
    if key in RATES:
        return RATES[key]
    return next(r for (k, name), r in RATES.items() if k == kind and name.startswith(workload + "/"))
