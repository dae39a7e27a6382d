set -u
mkdir -p /tmp/apex && tar -xzf .device/apex-25.01.tar.gz -C /tmp/apex
F=$OUT/fidelity-lstm; mkdir -p $F
timeout 330 python -m kit fidelity apex --apex-src .device/apex-241dd6c4.tar.gz --fp16-utils /tmp/apex/apex-25.01 \
  --presets tensor-core,apex-2018 --settings strict,fp16 --runs 2 --repeats 2 --max-batches 500 --out $F > $F/table.md 2> $F/stderr.log
echo "fidelity rc=$?"; cat $F/table.md; tail -5 $F/stderr.log
cd $OUT && tar czf fidelity-lstm.tgz fidelity-lstm && rm -rf fidelity-lstm
