set -u
source .device/common.sh
mkdir -p /tmp/apex && tar -xzf .device/apex-25.01.tar.gz -C /tmp/apex
R=$OUT/issue14; mkdir -p $R
git rev-parse HEAD 2>/dev/null > $R/commit.txt || true
( export PYTHONPATH=/tmp/apex/apex-25.01:/tmp/site
  python3 -c "import apex.amp, apex.fp16_utils, fastai, torch; print('apex amp ok; fastai', fastai.__version__, 'torch', torch.__version__)" 2>&1 | tail -1
  t0=$(date +%s)
  timeout 170 python3 -m kit run --suite lstm --preset apex-2018,tensor-core --precisions fp32,fp16-master,amp-fp16,apex-o1,apex-o2 --data synthetic --device cuda --repeats 1 --max-batches 100 --skip-checks --results-dir $R/lstm > $R/lstm.out 2> $R/lstm.err; echo "lstm rc=$? $(( $(date +%s)-t0 )) s"
  t0=$(date +%s)
  timeout 330 python3 -m kit run --suite cifar --engines torch,fastai --models resnet18 --precisions fp32,amp-fp16,fp16-master,apex-o1,apex-o2 --data synthetic --device cuda --repeats 1 --steps 30 --skip-checks --results-dir $R/cifar > $R/cifar.out 2> $R/cifar.err; echo "cifar rc=$? $(( $(date +%s)-t0 )) s"
)
python3 - <<'PY'
import json, glob, os
out = os.environ["OUT"]
for name in ("lstm", "cifar"):
    for f in glob.glob(f"{out}/issue14/{name}/*/results.json"):
        r = json.load(open(f))
        for c in r["cells"]:
            s = c.get("summary") or {}
            print(name, c.get("cell_id") or (c["model"], c["precision"], c.get("engine")), c["status"],
                  (s.get("throughput_items_per_s") or {}).get("median"), round(c.get("finished_at", 0) - c.get("started_at", 0), 1), (c.get("reason") or "")[:110])
PY
cd $OUT && tar czf s27a-issue14.tgz issue14 && rm -rf issue14
