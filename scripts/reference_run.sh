#!/usr/bin/env bash
# The full reference run shipped in references/<name>/: every ResNet in both CIFAR
# engines and every precision (with the batch-size search), and both LSTM presets in
# every precision, with the kit's default repeats (3), on synthetic data.
#
#   bash scripts/reference_run.sh OUT_DIR [PART...]
#
# PARTs (default: all four, in order):
#   torch   CIFAR, torch engine, 5 ResNets x every precision, 100 steps, --find-max-batch
#   fastai  CIFAR, fastai engine, 5 ResNets x every precision, 50 steps (the CPU data
#           loader sets its pace; 50 steps x 3 repeats keep the part near 9 minutes on an H200)
#   lstm    LSTM, both presets x every precision, 1 epoch cut to 300 batches
#   merge   join the parts' bundles into one with `kit bundle merge`
# Devices: DEVICE_TORCH, DEVICE_FASTAI, DEVICE_LSTM (default cuda:0 each); MODELS narrows the
# CIFAR parts to some ResNets (to split a part across GPUs, then merge the bundles). On a two-GPU
# machine the torch and fastai parts can run at once on different GPUs; the merged
# bundle records which device each part ran on (environment.merged_from).
# Precisions the GPU or the installed software cannot run (apex-* without apex.amp)
# are recorded as skipped with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: reference_run.sh OUT_DIR [torch|fastai|lstm|merge ...]}
shift
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(torch fastai lstm merge)
KIT=${KIT:-python3 -m kit}
MODELS=${MODELS:-resnet18,resnet34,resnet50,resnet101,resnet152}
PRECS=fp32,tf32,amp-fp16,amp-bf16,fp16-master,apex-o1,apex-o2
mkdir -p "$OUT"
common=(--data synthetic --repeats 3 --skip-checks)

for part in "${PARTS[@]}"; do
  case "$part" in
    torch)
      $KIT run --suite cifar --engines torch --models $MODELS --precisions $PRECS --steps 100 --find-max-batch \
          --device "${DEVICE_TORCH:-cuda:0}" "${common[@]}" --results-dir "$OUT/torch" ;;
    fastai)
      $KIT run --suite cifar --engines fastai --models $MODELS --precisions $PRECS --steps 50 \
          --device "${DEVICE_FASTAI:-cuda:0}" "${common[@]}" --results-dir "$OUT/fastai" ;;
    lstm)
      $KIT run --suite lstm --preset apex-2018,tensor-core --precisions $PRECS --epochs 1 --max-batches 300 \
          --device "${DEVICE_LSTM:-cuda:0}" "${common[@]}" --results-dir "$OUT/lstm" ;;
    merge)
      mapfile -t bundles < <(ls "$OUT"/torch/*.tar.gz "$OUT"/fastai/*.tar.gz "$OUT"/lstm/*.tar.gz 2>/dev/null)
      $KIT bundle merge "${bundles[@]}" --out "$OUT/merged" ;;
    *) echo "unknown part: $part (torch, fastai, lstm, merge)" >&2; exit 2 ;;
  esac
done
