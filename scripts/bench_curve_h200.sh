#!/usr/bin/env bash
# The batch curve (docs/performance.md, "Batch curve"): ResNet-18 and ResNet-50, torch
# engine, at 32 px and at 224 px, throughput against batch size per precision, with the knee,
# the speedup over fp32 at each size and images per joule (kit run --batch-sizes).
#
#   bash scripts/bench_curve_h200.sh [OUT_DIR]
#
# Synthetic CIFAR-100-shaped data, steady state (warm-up and capture excluded), 3 repeats per
# point. A size that does not fit is recorded as "out of memory at batch N" and the curve goes on.
# Writes run folders and bundles under OUT_DIR (default bench-curve-out/) and prints each bundle's
# curve table (kit bundle show).
#
# The step is the captured CUDA graph with eager kernels (--compile off, COMPILE= to change):
# with Inductor inside it (the default step) every batch size compiles again, 20-36 s a point on
# an H200. PARTS="32 224" (default both) runs one image size per command where a command's time is
# limited; PRECISIONS=fp32,amp-fp16,amp-bf16 leaves out tf32.
#
# Stopped and run again, it goes on where it stopped: a part whose run folder is already in OUT_DIR
# (a command cut by a time limit, Ctrl-C) is resumed (kit run --resume), keeping every finished point
# and running only the rest; a finished part is left as it is. Measured on an H200 (2026-12-01,
# references/h200/curve/): the 32 px part with three precisions takes about 5 minutes; at 224 px
# strict fp32 dominates, because cuDNN's autotuning (the untimed warm-up) grows with the batch:
# ResNet-18 fp32 took 5, 9, 20, 46 and 103 s of warm-up at batch 64 to 1,024 (at 32 px the amp points
# took 2-4 s at every size), so that part needs two or three 10-minute commands. A resumed part keeps the
# options it was started with (PRECISIONS, COMPILE, REPEATS of the first command), and writes a new
# bundle beside the stopped one's: keep the newest.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-curve-out}
KIT=${KIT:-python3 -m kit}
DEVICE=${DEVICE:-cuda:0}   # which GPU (cuda:N)
COMPILE=${COMPILE:-off}
PARTS=${PARTS:-32 224}
PRECISIONS=${PRECISIONS:-fp32,tf32,amp-fp16,amp-bf16}   # the curve's lines (fp32 is each ratio's base)
REPEATS=${REPEATS:-3}
want() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
mkdir -p "$OUT"
common=(--suite cifar --engines torch --models resnet18,resnet50 --precisions "$PRECISIONS"
        --data synthetic --device "$DEVICE" --epochs 1 --repeats "$REPEATS" --compile "$COMPILE" --skip-checks)

# one part: resume its run folder in OUT_DIR if there is one, else start it
part() {  # part NAME kit-run-options...
    local name=$1; shift
    local prev
    prev=$(find "$OUT/$name" -mindepth 2 -maxdepth 2 -name journal.jsonl 2>/dev/null | sort | tail -1 || true)
    if [ -n "$prev" ]; then
        echo "resuming $(dirname "$prev")" >&2
        $KIT run --resume "$(dirname "$prev")" > "$OUT/$name.bundle"
    else
        $KIT run "${common[@]}" "$@" --results-dir "$OUT/$name" > "$OUT/$name.bundle"
    fi
}

# 1) 32 px (the seed's batch 256 and up)
if want 32; then part curve-32px --image-size 32 --steps 30 --batch-sizes 256,512,1024,2048,4096,8192; fi
# 2) 224 px (upsampled on the device; ResNet-50 fp32's largest batch is about 1,700 on a 141 GB H200)
if want 224; then part curve-224px --image-size 224 --steps 10 --batch-sizes 64,128,256,512,1024,2048; fi
# 3) the curves
for b in "$OUT"/curve-*.bundle; do
    $KIT bundle show "$(cat "$b")"
done
