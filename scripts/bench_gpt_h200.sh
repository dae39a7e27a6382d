#!/usr/bin/env bash
# The GPT suite on an H200: every preset x every precision x 3 repeats in one
# `kit run`, then (where WikiText-2 is present) a convergence run of the small preset.
#
#   bash scripts/bench_gpt_h200.sh [OUT_DIR]          (OUT_DIR default: bench-gpt-out/)
#
# For the GPU machine: no network, torch already installed, no torchao. torchao comes from a
# wheel in $WHEELS (default .whl/; fetch it on a machine with PyPI:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 torchao==0.18.0 -d .whl
# ) and is installed with `pip install --no-index --no-deps --target` into OUT_DIR/site,
# which goes on PYTHONPATH; nothing is installed into the machine's Python.
#
# Throughput (THROUGHPUT=1, the default): synthetic WikiText-2-shaped data (labelled synthetic
# in every cell), batch 16 x 1024, each preset's own warm-up and timed steps
# (kit.facts.models.GPT_PRESETS; STEPS= overrides). Convergence (CONVERGENCE=1, the default):
# gpt2-small, amp-bf16 vs amp-fp16 and both fp8 recipes, 400 steps, 1 repeat, on real WikiText-2
# only (data/ or $KIT_DATA_DIR; the kit refuses convergence on synthetic data); skipped with the
# reason when it is absent. A machine with only the real valid and test splits (the project's
# GPU machine: ../shared/data/wikitext-2-valid-test/ copied to $KIT_DATA_DIR/wikitext-2/) runs
# it with TRAIN_SPLIT=valid (train on valid, held-out loss on test); CONV_ARGS adds options
# (e.g. "--batch-size 4 --steps 160": three passes over the valid split), CONV_REPEATS repeats.
#
# Writes, for references/h200/gpt/: throughput/<bundle>.tar.gz and its run folder,
# convergence/ likewise, throughput.log / convergence.log (the console, progress bars
# removed), env.txt (GPU, driver, torch, torchao), table.md (tokens/s, MFU and ratios per cell).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-gpt-out}
PY=${PY:-python3}
WHEELS=${WHEELS:-.whl}
DEVICE=${DEVICE:-cuda:0}
REPEATS=${REPEATS:-3}
PRESETS=${PRESETS:-gpt2-small,gpt-1b,gpt-2b}
PRECISIONS=${PRECISIONS:-fp32,tf32,amp-fp16,amp-bf16,fp8-tensorwise,fp8-rowwise}
STEPS=${STEPS:-}
CONVERGENCE=${CONVERGENCE:-1}
CONV_PRECISIONS=${CONV_PRECISIONS:-amp-bf16,amp-fp16,fp8-tensorwise,fp8-rowwise}
THROUGHPUT=${THROUGHPUT:-1}
TRAIN_SPLIT=${TRAIN_SPLIT:-train}
CONV_ARGS=${CONV_ARGS:-}
CONV_REPEATS=${CONV_REPEATS:-1}
CONV_DIR=${CONV_DIR:-convergence}
export CONV_DIR
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if ! $PY -c "import torchao" 2>/dev/null; then
    whl=$(ls "$WHEELS"/torchao-*.whl 2>/dev/null | head -1)
    if [ -n "$whl" ]; then
        $PY -m pip install -q --no-index --no-deps --target "$OUT/site" "$whl" || echo "torchao wheel did not install; fp8 cells will be skipped"
        export PYTHONPATH="$OUT/site${PYTHONPATH:+:$PYTHONPATH}"
    else
        echo "no torchao wheel in $WHEELS: fp8 cells will be skipped with that reason"
    fi
fi
{
    nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv 2>&1
    $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cc', torch.cuda.get_device_capability())"
    $PY -c "import torchao; print('torchao', torchao.__version__)" 2>&1 | tail -1
} > "$OUT/env.txt"
cat "$OUT/env.txt"

strip_progress() { tr '\r' '\n' | grep -v -E '━|^\s*$' ; }

steps_opt=()
[ -n "$STEPS" ] && steps_opt=(--steps "$STEPS")
if [ "$THROUGHPUT" = 1 ]; then
    $PY -m kit run --suite gpt --gpt-presets "$PRESETS" --precisions "$PRECISIONS" --data synthetic \
        --device "$DEVICE" --repeats "$REPEATS" "${steps_opt[@]}" --skip-checks \
        --results-dir "$OUT/throughput" 2>&1 | strip_progress | tee "$OUT/throughput.log"
    echo "throughput run: exit ${PIPESTATUS[0]}"
fi

if [ "$CONVERGENCE" = 1 ]; then
    # the whole zip (or the three files) for the benchmark's train split; valid and test alone otherwise
    if [ "$TRAIN_SPLIT" != train ] || $PY -m kit data verify wikitext2 >/dev/null 2>&1; then
        # shellcheck disable=SC2086  # CONV_ARGS is a list of options
        $PY -m kit run --suite gpt --mode convergence --gpt-presets gpt2-small --precisions "$CONV_PRECISIONS" \
            --data real --train-split "$TRAIN_SPLIT" $CONV_ARGS --device "$DEVICE" --repeats "$CONV_REPEATS" --skip-checks \
            --results-dir "$OUT/$CONV_DIR" 2>&1 | strip_progress | tee "$OUT/$CONV_DIR.log"
        echo "convergence run: exit ${PIPESTATUS[0]}"
    else
        echo "convergence run skipped: WikiText-2 is not in the data folder (kit data verify wikitext2 failed); carry data/wikitext-2-v1.zip to this machine, or its valid and test splits with TRAIN_SPLIT=valid" | tee "$OUT/$CONV_DIR.log"
    fi
fi

$PY - "$OUT" <<'PY' | tee "$OUT/table.md"
import glob, json, os, sys
from kit.compare import measures
from kit.results import ratios
out = sys.argv[1]
for part in sorted({"throughput", "convergence", os.environ.get("CONV_DIR", "convergence")}):
    for path in sorted(glob.glob(os.path.join(out, part, "*", "results.json"))):
        r = json.load(open(path))
        peaks = r["environment"].get("peak_tflops_measured") or {}
        eff = {row["cell_id"]: row for row in r["derived"].get("efficiency", [])}
        bf16 = {(x["model"], x["precision"]): x for x in r["derived"].get("bf16_ratios", [])}
        fp32 = {(x["model"], x["precision"]): x for x in r["derived"].get("performance_ratios", [])}
        print(f"## {part}: {os.path.relpath(path, out)}\n")
        print("peaks (TFLOP/s, measured): " + ", ".join(f"{k} {peaks.get(k)}" for k in ("fp32", "tf32", "fp16", "bf16", "fp8")) + "\n")
        print("| preset | precision | status | tokens/s (median) | MFU (own peak) | ÷ bf16 | ÷ fp32 | first step s (repeat 1) | peak GiB | final metric | recompile warnings |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for c in r["cells"]:
            s = c.get("summary") or {}
            med = lambda k: (s.get(k) or {}).get("median")
            e = eff.get(c["cell_id"])
            rw = ((c.get("metrics") or {}).get("compile") or {}).get("recompile_warnings") or []
            peak = med("peak_memory_bytes")
            tput = med("throughput_items_per_s")
            print("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                c["model"], c["precision"], c["status"] if c["status"] == "ok" else f"{c['status']}: {c.get('reason')}",
                f"{tput:,.0f}" if tput else "—",
                f"{e['fraction_of_peak']:.0%} of {e['peak_dtype']}" if e else "—",
                ratios.fmt_ratio((bf16.get((c["model"], c["precision"])) or {}).get("speedup_over_bf16")),
                ratios.fmt_speedup((fp32.get((c["model"], c["precision"])) or {}).get("speedup_over_fp32")),
                (lambda v: f"{v:.1f}" if v else "—")((c.get("metrics") or {}).get("first_repeat_time_to_first_step_s")),
                f"{peak / 2**30:.1f}" if peak else "—",
                f"{med('final_metric'):.4f}" if med("final_metric") else "—",
                len(rw)))
        for p in r["derived"].get("parity", []):
            print(f"\nparity {p['model']} {p['precision']}: {measures.fmt_parity(p)}")
        print()
PY
