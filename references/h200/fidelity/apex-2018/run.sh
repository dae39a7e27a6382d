set -u
T0=$(date +%s)
export PYTHONUNBUFFERED=1
el() { echo $(( $(date +%s) - T0 )); }
R=$OUT/s25c3; mkdir -p $R
timeout 300 bash scripts/bench_ddp_h200.sh $R/ddp > $R/ddp.log 2>&1; echo "ddp rc=$? at $(el) s"; tail -7 $R/ddp.log
mkdir -p /tmp/apex && tar -xzf .device/apex-25.01.tar.gz -C /tmp/apex
F=$R/fidelity-apex2018; mkdir -p $F
left=$(( 530 - $(el) ))
timeout $left python -m kit fidelity apex --apex-src .device/apex-241dd6c4.tar.gz --fp16-utils /tmp/apex/apex-25.01 \
  --presets apex-2018 --settings strict,fp16 --out $F > $F/table.md 2> $F/stderr.log; echo "fidelity rc=$? at $(el) s"; cat $F/table.md; tail -3 $F/stderr.log
cd $OUT && tar czf s25c3.tgz s25c3 && rm -rf s25c3
