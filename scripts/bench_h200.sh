#!/usr/bin/env bash
# Reproduces every figure in docs/performance.md's table in one command.
#
#   bash scripts/bench_h200.sh [OUT_DIR]        (or: make bench-h200)
#
# Synthetic CIFAR-100-shaped data at 32 px, batch 256, steady state (warm-up and
# compilation excluded), 3 repeats per cell; the LSTM uses synthetic WikiText-2-shaped
# data. Needs one CUDA GPU, torch, torchvision and fastai. Writes run folders,
# bundles and perf.md under OUT_DIR (default bench-out/), then prints the table.
#
# PARTS picks steps (default all: "torch graph fastai lstm overhead"), so that one output folder
# can be filled by several shorter commands (a machine that limits one command's time); the
# table is printed from whatever the folder holds.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-out}
KIT=${KIT:-python3 -m kit}
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda:0}   # which GPU (cuda:N)
PARTS=${PARTS:-torch graph fastai lstm overhead}
want() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
mkdir -p "$OUT"
common=(--data synthetic --device "$DEVICE" --image-size 32 --batch-size 256 --repeats 3 --skip-checks)

# 1) torch engine, ResNet-18 and ResNet-50, strict fp32, amp-fp16 and amp-bf16: the default step
#    (--compile auto: the captured step with the model compiled by Inductor inside it)
if want torch; then
$KIT run --suite cifar --engines torch --models resnet18 --precisions fp32,amp-fp16,amp-bf16 \
    --epochs 1 --steps 300 "${common[@]}" --results-dir "$OUT/r18-torch"
$KIT run --suite cifar --engines torch --models resnet50 --precisions fp32,amp-fp16,amp-bf16 \
    --epochs 1 --steps 150 "${common[@]}" --results-dir "$OUT/r50-torch"
fi
# 2) the same cells with the captured step's eager kernels (--compile off): what Inductor adds
if want graph; then
$KIT run --suite cifar --engines torch --models resnet18 --precisions fp32,amp-fp16,amp-bf16 --compile off \
    --epochs 1 --steps 300 "${common[@]}" --results-dir "$OUT/r18-graph"
$KIT run --suite cifar --engines torch --models resnet50 --precisions fp32,amp-fp16,amp-bf16 --compile off \
    --epochs 1 --steps 150 "${common[@]}" --results-dir "$OUT/r50-graph"
fi
# 3) fastai engine, ResNet-18, amp-fp16 (what a fastai user gets)
want fastai && $KIT run --suite cifar --engines fastai --models resnet18 --precisions amp-fp16 \
    --epochs 1 --steps 100 "${common[@]}" --results-dir "$OUT/r18-fastai"
# 4) LSTM tensor-core preset: strict fp32 vs amp-fp16
want lstm && $KIT run --suite lstm --preset tensor-core --precisions fp32,amp-fp16 --data synthetic --device "$DEVICE" \
    --epochs 1 --max-batches 300 --repeats 3 --skip-checks --results-dir "$OUT/lstm-tc"
# 5) instrumentation overheads: kit's fastai callback vs a bare Learner.fit; the NVML sampler
want overhead && $PY scripts/bench_overhead.py --device "$DEVICE" --out "$OUT/overhead.json"
# 6) the table
$PY scripts/perf_table.py "$OUT" | tee "$OUT/perf.md"
