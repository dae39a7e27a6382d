#!/usr/bin/env bash
# The shipped reference (references/<name>/): exactly the cells, settings and defaults of
# `kit run --suite all` (what `make run GPU=0` runs: both CIFAR engines with every ResNet, both LSTM
# engines with both presets, every precision, default steps, batches and repeats), plus the batch
# search of the torch cells, on synthetic data. It runs in parts sized to finish in under ten minutes
# each on an H200 or an H100 (from the parts' measured wall times, references/h200/remeasure/ and
# references/h100/parts/), then joins them into one bundle.
#
#   bash scripts/reference_run.sh OUT_DIR [PART...]
#
# PARTs (default: all of them, in order):
#   torch-a torch-b torch-c torch-d   CIFAR, torch engine (with --find-max-batch): ResNet-18/34, -50, -101, -152
#   fastai-a fastai-b fastai-c fastai-d   CIFAR, fastai engine: ResNet-18/34, -50, -101, -152
#   lstm-graphed                     the LSTM's graphed engine, both presets
#   lstm-kit-a lstm-kit-b            the LSTM's kit engine: apex-2018, then tensor-core
#   merge                            join every part's bundle in OUT_DIR (any folder torch-*, fastai-*,
#                                    lstm-*) with `kit bundle merge --same-model` into OUT_DIR/merged
# A part continues where it stopped: when OUT_DIR/<part>/ already holds a run folder (a run cut short by
# a time limit or Ctrl-C), the part resumes it (`kit run --resume`; a complete one is left as it is), on
# this machine or another with the same GPU model. Parts may run on different machines of one GPU model
# and driver: the merged bundle records each part's machine.
# BUDGET=SECONDS bounds one call (scripts/part_run.sh): the running part gets the time left as its
# `kit run --time-limit` (it starts no cell that would not fit, and stops one still running at the
# limit as at Ctrl-C), finished cells kept, the parts after it wait, `merge` waits for them, and the
# same command again goes on (references/h100/parts/ was measured so: its first parts in calls of 540 s by a wrapper
# that did the same before BUDGET existed, the later ones with BUDGET=530).
# DEVICE (default cuda:0) picks the GPU; EXTRA adds kit run options to a part that starts (e.g.
# EXTRA=--no-profile-window; a resumed part keeps its run's own options). Every part's cells carry today's engine revisions
# (each suite's descriptor, kit/bench/<suite>/__init__.py); tests/test_methods.py fails when the
# shipped reference's differ.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: reference_run.sh OUT_DIR [torch-a..torch-d|fastai-a..fastai-d|lstm-graphed|lstm-kit-a|lstm-kit-b|merge ...]}
shift
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(torch-a torch-b torch-c torch-d fastai-a fastai-b fastai-c fastai-d
                                 lstm-graphed lstm-kit-a lstm-kit-b merge)
source scripts/part_run.sh
common=(--data synthetic --skip-checks --device "${DEVICE:-cuda:0}" "${extra[@]}")

for part in "${PARTS[@]}"; do
  case "$part" in
    torch-a)      run_part "$part" --suite cifar --engines torch --models resnet18,resnet34 --find-max-batch ;;
    torch-b)      run_part "$part" --suite cifar --engines torch --models resnet50 --find-max-batch ;;
    torch-c)      run_part "$part" --suite cifar --engines torch --models resnet101 --find-max-batch ;;
    torch-d)      run_part "$part" --suite cifar --engines torch --models resnet152 --find-max-batch ;;
    fastai-a)     run_part "$part" --suite cifar --engines fastai --models resnet18,resnet34 ;;
    fastai-b)     run_part "$part" --suite cifar --engines fastai --models resnet50 ;;
    fastai-c)     run_part "$part" --suite cifar --engines fastai --models resnet101 ;;
    fastai-d)     run_part "$part" --suite cifar --engines fastai --models resnet152 ;;
    lstm-graphed) run_part "$part" --suite lstm --engines graphed ;;
    lstm-kit-a)   run_part "$part" --suite lstm --engines kit --preset apex-2018 ;;
    lstm-kit-b)   run_part "$part" --suite lstm --engines kit --preset tensor-core ;;
    merge)
      parts_done_for merge || continue
      mapfile -t bundles < <(final_bundles "$OUT"/{torch,fastai,lstm}-*/*.tar.gz)
      for dir in "$OUT"/{torch,fastai,lstm}-*/; do  # a part that ran has its final bundle, or it is left
        [ -d "$dir" ] || continue
        if ! printf '%s\n' "${bundles[@]}" | grep -qF "${dir%/}/"; then
          echo "merge: ${dir%/} has no final bundle: run its part again to finish it (kit run --resume goes on)" >&2
          exit 1
        fi
      done
      $KIT bundle merge "${bundles[@]}" --same-model --out "$OUT/merged" ;;
    *) echo "unknown part: $part (torch-a..torch-d, fastai-a..fastai-d, lstm-graphed, lstm-kit-a, lstm-kit-b, merge)" >&2; exit 2 ;;
  esac
done
parts_left
