set -u
mkdir -p /tmp/apex && tar -xzf .device/apex-25.01.tar.gz -C /tmp/apex
export PYTHONPATH=/tmp/apex/apex-25.01
python -c "import apex.amp, apex.fp16_utils; print('apex amp ok')" 2>&1 | tail -1
R=$OUT/runs; mkdir -p $R
timeout 200 python -m kit run --suite lstm --preset apex-2018,tensor-core --precisions fp32,fp16-master,amp-fp16,apex-o1,apex-o2 --data synthetic --device cuda --repeats 1 --max-batches 150 --skip-checks --results-dir $R/lstm > $R/lstm.out 2> $R/lstm.err; echo "lstm rc=$?"; grep -E "tokens/s|skipped|failed" $R/lstm.err | tail -12
timeout 150 python -m kit run --suite cifar --engines torch --models resnet18 --precisions fp32,apex-o1,apex-o2,amp-fp16 --data synthetic --device cuda --repeats 1 --steps 30 --compile off --skip-checks --results-dir $R/cifar > $R/cifar.out 2> $R/cifar.err; echo "cifar rc=$?"; grep -E "images/s|skipped|failed" $R/cifar.err | tail -6
for iso in none all; do timeout 90 python -m kit run --suite lstm --preset apex-2018 --precisions fp32 --data synthetic --device cuda --repeats 1 --max-batches 150 --skip-checks --isolate $iso --results-dir $R/iso-$iso > /dev/null 2> $R/iso-$iso.err; echo "iso $iso rc=$?"; done
python - <<'PY'
import json, glob, os
out = os.environ["OUT"]
for name in ("lstm", "cifar", "iso-none", "iso-all"):
    for f in glob.glob(f"{out}/runs/{name}/*/results.json"):
        r = json.load(open(f))
        for c in r["cells"]:
            print(name, c["workload"], c["model"], c["precision"], c["status"], round(c["finished_at"] - c["started_at"], 2),
                  (c.get("summary") or {}).get("throughput_items_per_s", {}).get("median"), (c.get("reason") or "")[:100])
PY
cd $OUT && tar czf runs.tgz runs && rm -rf runs
