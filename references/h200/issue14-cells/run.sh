set -u
mkdir -p /tmp/apex && tar -xzf .device/apex-25.01.tar.gz -C /tmp/apex
pip install -q --no-index --no-deps --target /tmp/fa .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/apex/apex-25.01:/tmp/fa
R=$OUT/issue14; mkdir -p $R
python -c "import apex.amp, apex.fp16_utils, fastai; print('apex amp ok; fastai', fastai.__version__)" 2>&1 | tail -1
timeout 100 python -m pytest -m gpu -q -p no:cacheprovider -s tests/test_gpu.py tests/test_gpu_fastai_syncs.py tests/test_lstm_gpu.py > $R/pytest-gpu.log 2>&1; echo "pytest gpu rc=$?"; grep -E "host syncs|passed|failed|Error" $R/pytest-gpu.log | tail -6
timeout 110 python -m kit run --suite lstm --preset apex-2018,tensor-core --precisions fp32,fp16-master,amp-fp16,apex-o1,apex-o2 --data synthetic --device cuda --repeats 1 --max-batches 100 --skip-checks --results-dir $R/lstm > $R/lstm.out 2> $R/lstm.err; echo "lstm rc=$?"
timeout 110 python -m kit run --suite cifar --engines torch,fastai --models resnet18 --precisions fp32,amp-fp16,fp16-master,apex-o1,apex-o2 --data synthetic --device cuda --repeats 1 --steps 30 --skip-checks --results-dir $R/cifar > $R/cifar.out 2> $R/cifar.err; echo "cifar rc=$?"
python - <<'PY'
import json, glob, os
out = os.environ["OUT"]
for name in ("lstm", "cifar"):
    for f in glob.glob(f"{out}/issue14/{name}/*/results.json"):
        r = json.load(open(f))
        for c in r["cells"]:
            print(name, c["cell_id"] if "cell_id" in c else (c["workload"], c["model"], c["precision"]), c["status"],
                  (c.get("summary") or {}).get("throughput_items_per_s", {}).get("median"), (c.get("reason") or "")[:110])
PY
cd $OUT && tar czf issue14.tgz issue14 && rm -rf issue14
