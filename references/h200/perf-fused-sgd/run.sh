# session 25, call 2 (~9 min): issue 16's torch part with the fused SGD step, issue 18's DDP check, the graph part, pytest -m gpu
set -u
T0=$(date +%s)
export PYTHONUNBUFFERED=1
R=$OUT/s25c2; B=$R/perf; mkdir -p $R $B/logs
el() { echo $(( $(date +%s) - T0 )); }
PARTS=torch timeout 240 bash scripts/bench_h200.sh $B > $B/logs/part1-torch.log 2>&1; echo "bench torch rc=$? at $(el) s"
grep -A12 "^| " $B/logs/part1-torch.log | head -14
timeout 230 bash scripts/bench_ddp_h200.sh $R/ddp > $R/ddp.log 2>&1; echo "ddp rc=$? at $(el) s"; tail -7 $R/ddp.log
left=$(( 500 - $(el) )); [ $left -gt 60 ] && { PARTS=graph timeout $left bash scripts/bench_h200.sh $B > $B/logs/part2-graph.log 2>&1; echo "bench graph rc=$? at $(el) s"; }
left=$(( 570 - $(el) )); [ $left -gt 40 ] && { timeout $left python -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py -k "cuda_graph or untimed" > $B/logs/pytest-gpu-cuda-graph.log 2>&1; echo "pytest gpu rc=$? at $(el) s"; tail -3 $B/logs/pytest-gpu-cuda-graph.log; }
python scripts/perf_table.py $B 2>&1 | head -30
cd $OUT && tar czf s25c2.tgz s25c2 && rm -rf s25c2
