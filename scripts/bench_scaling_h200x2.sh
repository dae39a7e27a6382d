#!/usr/bin/env bash
# The two-GPU run (docs/fleet.md): each cell on one GPU and then data-parallel on two of one host
# (`kit run --gpus 2 --scaling`: the one-GPU baseline is measured just before, in the same run), with the
# total and per-GPU throughput, the scaling efficiency, the all-reduce time and the GPUs' interconnect.
#
#   bash scripts/bench_scaling_h200x2.sh [OUT_DIR]        (two CUDA GPUs; device tool: $OUT comes back)
#
# Parts (PARTS, default all five, in this order; one command of the device tool may run 10 minutes, so
# PARTS="cifar32 cifar224" and PARTS="lstm gpt pytest" fit one command each):
#   cifar32   ResNet-50, CIFAR torch engine, 32 px, batch 256 per GPU, fp32 and amp-bf16, 100 steps
#   cifar224  the same at 224 px, batch 128 per GPU, 40 steps (the data upsampled on the device)
#   lstm      the LSTM tensor-core preset, fp32 and amp-fp16, 200 batches
#   gpt       the GPT suite's gpt-1b preset, amp-bf16 and fp8-tensorwise (8 timed steps after the preset's warm-up)
#   pytest    pytest -m gpu (the two-GPU tests included)
# Synthetic data, 3 repeats, the default step (CIFAR: the captured CUDA graph, with DDP in it on 2 GPUs;
# COMPILE= to change). Each part writes its run folder and bundle under OUT_DIR/<part>/ and prints its
# table (scripts/perf_table.py --scaling); everything is also in the bundles.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-${OUT:-bench-scaling-out}}
PY=${PY:-python3}
PARTS=${PARTS:-cifar32 cifar224 lstm gpt pytest}
COMPILE=${COMPILE:-auto}
GPUS=${GPUS:-2}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT_DIR"
want() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
common=(--data synthetic --device cuda --repeats 3 --gpus "$GPUS" --scaling --skip-checks)
start=$(date +%s)
part() {  # part NAME kit-run-options...
    local name=$1; shift
    $PY -m kit run "${common[@]}" "$@" --results-dir "$OUT_DIR/$name" > "$OUT_DIR/$name.bundle"
    $PY scripts/perf_table.py --scaling "$(cat "$OUT_DIR/$name.bundle")" | tee "$OUT_DIR/$name.md"
    echo "$name done at $(( $(date +%s) - start )) s"
}
cifar=(--suite cifar --models resnet50 --engines torch --precisions fp32,amp-bf16 --compile "$COMPILE")
if want cifar32; then part cifar32 "${cifar[@]}" --image-size 32 --batch-size 256 --steps 100; fi
if want cifar224; then part cifar224 "${cifar[@]}" --image-size 224 --batch-size 128 --steps 40; fi
if want lstm; then part lstm --suite lstm --preset tensor-core --precisions fp32,amp-fp16 --max-batches 200; fi
if want gpt; then part gpt --suite gpt --gpt-presets gpt-1b --precisions amp-bf16,fp8-tensorwise --compile "$COMPILE"; fi
if want pytest; then
    $PY -m pytest -q -p no:cacheprovider -m gpu tests/ 2>&1 | tee "$OUT_DIR/pytest-gpu.log"
fi
