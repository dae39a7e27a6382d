#!/usr/bin/env bash
# Why each precision is (not) faster on this GPU, for the article's cells (docs/explain.md; committed
# per GPU model as references/<gpu>/explain/, e.g. references/h100/explain/): CIFAR ResNet-18 and -50 through the `torch` and
# `fastai` engines, and the LSTM through its `kit` and `graphed` engines, in fp32, amp-fp16 and
# amp-bf16, each cell with its profiled window (kit run --profile-window), then `kit explain` of
# each bundle as text and JSON.
#
#   bash scripts/explain_run.sh OUT_DIR [PART...]
#
# PARTs (default: all, in order), each sized for a command of under ten minutes on an H100 or H200
# (references/h100/explain/README.md: the cifar part took 7 minutes on an H100, the lstm part 5.7):
#   gpu-tests   pytest -m gpu of the profiled window (tests/test_profile_window_gpu.py): its parts add
#               up, its cost, the same timed throughput with and without it and after it; and of the
#               calibration (tests/test_calibrate_bandwidth.py): the peaks' sweep, the bandwidth
#   cifar       the CIFAR cells (the fastai engine needs fastai installed: docs/containers.md)
#   lstm        the LSTM cells, preset PRESETS (default apex-2018, the article's 200-unit model)
#   explain     kit explain of every bundle in OUT_DIR: OUT_DIR/explain-<part>.txt and .json
# A part whose folder already holds a run resumes it (kit run --resume). Synthetic data, default
# steps, batches and repeats; DEVICE (default cuda:0) picks the GPU; EXTRA adds kit run options to
# both suites' runs, LSTM_EXTRA to the LSTM's (a CPU trial of the script:
# DEVICE=cpu EXTRA="--steps 3 --repeats 1" LSTM_EXTRA="--max-batches 4").
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: explain_run.sh OUT_DIR [gpu-tests|cifar|lstm|explain ...]}
shift
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(gpu-tests cifar lstm explain)
PY=${PY:-python3}
PRECISIONS=${PRECISIONS:-fp32,amp-fp16,amp-bf16}
read -r -a lstm_extra <<< "${LSTM_EXTRA:-}"
source scripts/part_run.sh
common=(--data synthetic --skip-checks --profile-window --precisions "$PRECISIONS" --device "${DEVICE:-cuda:0}" "${extra[@]}")

for part in "${PARTS[@]}"; do
  case "$part" in
    gpu-tests) $PY -m pytest -q -p no:cacheprovider -m gpu tests/test_profile_window_gpu.py tests/test_calibrate_bandwidth.py \
                 2>&1 | tee "$OUT/gpu-tests.log" ;;
    cifar)     run_part "$part" --suite cifar --engines torch,fastai --models resnet18,resnet50 ;;
    lstm)      run_part "$part" --suite lstm --engines kit,graphed --preset "${PRESETS:-apex-2018}" "${lstm_extra[@]}" ;;
    explain)
      parts_done_for explain || continue
      mapfile -t bundles < <(final_bundles "$OUT"/{cifar,lstm}/*.tar.gz)
      for b in ${bundles[@]+"${bundles[@]}"}; do
        name=$(basename "$(dirname "$b")")
        $KIT explain "$b" > "$OUT/explain-$name.txt"
        $KIT explain "$b" --json "$OUT/explain-$name.json"
        echo "$OUT/explain-$name.txt"
      done ;;
    *) echo "unknown part: $part (gpu-tests, cifar, lstm, explain)" >&2; exit 2 ;;
  esac
done
parts_left
