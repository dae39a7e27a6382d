set -u
T0=$(date +%s)
mkdir -p /tmp/apex && tar -xzf .device/apex-25.01.tar.gz -C /tmp/apex
F=$OUT/fidelity-lstm-3; mkdir -p $F
cp .device/fid1000.sh $F/run.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv > $F/env.txt 2>&1
timeout 560 python -m kit fidelity apex --apex-src .device/apex-241dd6c4.tar.gz --fp16-utils /tmp/apex/apex-25.01 \
  --presets tensor-core,apex-2018 --settings strict,fp16 --runs 3 --repeats 3 --max-batches 1000 --out $F > $F/table.md 2> $F/stderr.log
echo "fidelity rc=$? at $(( $(date +%s) - T0 )) s"; cat $F/table.md; tail -5 $F/stderr.log
cd $OUT && tar czf fidelity-lstm-3.tgz fidelity-lstm-3 && rm -rf fidelity-lstm-3
