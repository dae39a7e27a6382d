# next session, call 1 (~9 min): kit fidelity apex in interleaved rounds, the command's defaults (3 rounds, 1 kit repeat per round, 1000 batches)
set -u
T0=$(date +%s)
mkdir -p /tmp/apex && tar -xzf .device/apex-25.01.tar.gz -C /tmp/apex
F=$OUT/fidelity-lstm-4; mkdir -p $F; cp .device/next-fidelity.sh $F/run.sh
timeout 565 python -m kit fidelity apex --apex-src .device/apex-241dd6c4.tar.gz --fp16-utils /tmp/apex/apex-25.01 \
  --presets tensor-core,apex-2018 --settings strict,fp16 --out $F > $F/table.md 2> $F/stderr.log
echo "fidelity rc=$? at $(( $(date +%s) - T0 )) s"; cat $F/table.md; tail -3 $F/stderr.log
cd $OUT && tar czf fidelity-lstm-4.tgz fidelity-lstm-4 && rm -rf fidelity-lstm-4
