#!/usr/bin/env bash
# Does a shipped reference (references/<name>/) hold on a GPU of its model? Today's kit measures the
# cells a user runs first, and `kit compare` sets them against the reference: the GPU-bound cells
# (the `torch` engine's captured step, the `graphed` LSTM) should read within a few percent of it,
# with no HIGH comparability warning, and the host-paced ones (the `kit` LSTM engine) are labelled
# host-paced with their ratios.
#
#   bash scripts/reference_check.sh NAME OUT_DIR [PART...]
#
# PARTs (default: all, in order), each sized for a command of under ten minutes on an H100 or H200:
#   cifar          kit run --suite cifar --engines torch --models resnet18,resnet50 (every precision)
#   lstm-graphed   kit run --suite lstm --engines graphed (both presets, every precision)
#   lstm-kit       kit run --suite lstm --engines kit (both presets, every precision)
#   compare        the parts' final bundles joined (kit bundle merge --same-model, OUT_DIR/merged/, made
#                  again each time) and compared --against NAME: OUT_DIR/compare-NAME.txt and .json
#                  (not run while parts are left)
# Synthetic data, default steps, batches and repeats, as the reference's own cells. A part whose folder
# already holds a run resumes it, and BUDGET=SECONDS bounds one call, as in reference_run.sh
# (scripts/part_run.sh). DEVICE (default cuda:0) picks the GPU; EXTRA adds kit run options to a part
# that starts.
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=${1:?usage: reference_check.sh NAME OUT_DIR [cifar|lstm-graphed|lstm-kit|compare ...]}
OUT=${2:?usage: reference_check.sh NAME OUT_DIR [cifar|lstm-graphed|lstm-kit|compare ...]}
shift 2
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(cifar lstm-graphed lstm-kit compare)
source scripts/part_run.sh
common=(--data synthetic --skip-checks --device "${DEVICE:-cuda:0}" "${extra[@]}")

for part in "${PARTS[@]}"; do
  case "$part" in
    cifar)        run_part "$part" --suite cifar --engines torch --models resnet18,resnet50 ;;
    lstm-graphed) run_part "$part" --suite lstm --engines graphed ;;
    lstm-kit)     run_part "$part" --suite lstm --engines kit ;;
    compare)
      parts_done_for compare || continue
      mapfile -t bundles < <(final_bundles "$OUT"/{cifar,lstm-graphed,lstm-kit}/*.tar.gz)
      if [ ${#bundles[@]} -eq 0 ]; then
        echo "compare: no part's final bundle in $OUT: run the parts first" >&2
        exit 1
      fi
      rm -rf "$OUT/merged"
      merged=$($KIT bundle merge "${bundles[@]}" --same-model --out "$OUT/merged" | sed -n "s/^Merged bundle: //p")
      $KIT compare "$merged" --against "$NAME" > "$OUT/compare-$NAME.txt"
      $KIT compare "$merged" --against "$NAME" --json "$OUT/compare-$NAME.json" > /dev/null
      echo "$OUT/compare-$NAME.txt" ;;
    *) echo "unknown part: $part (cifar, lstm-graphed, lstm-kit, compare)" >&2; exit 2 ;;
  esac
done
parts_left
