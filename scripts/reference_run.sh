#!/usr/bin/env bash
# The shipped reference (references/<name>/): exactly the cells, settings and defaults of
# `kit run --suite all` (what `make run GPU=0` runs: both CIFAR engines with every ResNet, both LSTM
# engines with both presets, every precision, default steps, batches and repeats), plus the batch
# search of the torch cells, on synthetic data. It runs in parts of under ten minutes each on an
# H200, then joins them into one bundle.
#
#   bash scripts/reference_run.sh OUT_DIR [PART...]
#
# PARTs (default: all of them, in order):
#   torch-a torch-b        CIFAR, torch engine: ResNet-18/34/50, then ResNet-101/152 (with --find-max-batch)
#   fastai-a fastai-b fastai-c   CIFAR, fastai engine: ResNet-18/34/50, ResNet-101, ResNet-152
#   lstm-kit lstm-graphed  the LSTM's two engines, both presets
#   merge                  join the parts' bundles with `kit bundle merge` into OUT_DIR/merged
# A part whose run was cut short resumes with `kit run --resume OUT_DIR/<part>/<run folder>`.
# DEVICE (default cuda:0) picks the GPU. Every part's cells carry today's engine revisions
# (kit/bench/methods.py); tests/test_methods.py fails when the shipped reference's differ.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: reference_run.sh OUT_DIR [torch-a|torch-b|fastai-a|fastai-b|fastai-c|lstm-kit|lstm-graphed|merge ...]}
shift
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(torch-a torch-b fastai-a fastai-b fastai-c lstm-kit lstm-graphed merge)
KIT=${KIT:-python3 -m kit}
mkdir -p "$OUT"
common=(--data synthetic --skip-checks --device "${DEVICE:-cuda:0}")

for part in "${PARTS[@]}"; do
  case "$part" in
    torch-a)      $KIT run --suite cifar --engines torch --models resnet18,resnet34,resnet50 --find-max-batch "${common[@]}" --results-dir "$OUT/$part" ;;
    torch-b)      $KIT run --suite cifar --engines torch --models resnet101,resnet152 --find-max-batch "${common[@]}" --results-dir "$OUT/$part" ;;
    fastai-a)     $KIT run --suite cifar --engines fastai --models resnet18,resnet34,resnet50 "${common[@]}" --results-dir "$OUT/$part" ;;
    fastai-b)     $KIT run --suite cifar --engines fastai --models resnet101 "${common[@]}" --results-dir "$OUT/$part" ;;
    fastai-c)     $KIT run --suite cifar --engines fastai --models resnet152 "${common[@]}" --results-dir "$OUT/$part" ;;
    lstm-kit)     $KIT run --suite lstm --engines kit "${common[@]}" --results-dir "$OUT/$part" ;;
    lstm-graphed) $KIT run --suite lstm --engines graphed "${common[@]}" --results-dir "$OUT/$part" ;;
    merge)
      mapfile -t bundles < <(ls "$OUT"/{torch,fastai,lstm}-*/*.tar.gz 2>/dev/null | grep -v '\.interrupted\.tar\.gz$')
      $KIT bundle merge "${bundles[@]}" --out "$OUT/merged" ;;
    *) echo "unknown part: $part (torch-a, torch-b, fastai-a, fastai-b, fastai-c, lstm-kit, lstm-graphed, merge)" >&2; exit 2 ;;
  esac
done
