#!/usr/bin/env bash
# CI's Slurm job (called by .ci/run after `make test`, before the container job), as root on a fresh
# Debian 12 machine:
#
#   1. install Debian's slurm-wlm and munge (when missing)
#   2. a munge key, a one-node slurm.conf (this host, `hostname -s`, 2 CPUs, no accounting),
#      then start munged, slurmctld and slurmd, and wait until the node is idle
#   3. run the tests marked `slurm` (tests/slurm/): a real 2-task CPU sweep through
#      `kit fleet slurm submit --wait`, its merged bundle checked, and the error paths
#   4. stop the three daemons this script started (by their pid files), whatever happened
#
# Each phase prints how long it took. Knobs: KIT_SLURM_STATE (default /tmp/kit-slurm) holds the
# daemons' state, logs and pid files; PY the Python (default the checkout's .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
PY="${PY:-$ROOT/.venv/bin/python}"
STATE="${KIT_SLURM_STATE:-/tmp/kit-slurm}"
CONF_DIR=/etc/slurm
JOB_START=$(date +%s)
phase_start=0
phase() { phase_start=$(date +%s); echo; echo "== ci_slurm: $* =="; }
phase_done() { echo "-- done in $(( $(date +%s) - phase_start )) s (job so far $(( $(date +%s) - JOB_START )) s)"; }

STARTED=()
stop_daemons() {
    # only what this script started, by the pid each daemon wrote
    for pidfile in "${STARTED[@]}"; do
        if [ -f "$pidfile" ]; then
            pid="$(cat "$pidfile" 2>/dev/null || true)"
            if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
                kill "$pid" 2>/dev/null || true
                for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
            fi
        fi
    done
    echo "ci_slurm: daemons stopped (job $(( $(date +%s) - JOB_START )) s)"
}
trap stop_daemons EXIT

# -- 1. packages ------------------------------------------------------------
phase "slurm-wlm and munge"
export DEBIAN_FRONTEND=noninteractive
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq slurm-wlm munge >/dev/null
fi
slurmctld -V
phase_done

# -- 2. a one-node cluster ----------------------------------------------------
phase "munged, slurmctld, slurmd (one node, 2 CPUs)"
HOST="$(hostname -s)"
mkdir -p "$STATE/ctld" "$STATE/spool" "$STATE/log" /run/munge /var/log/munge /var/lib/munge "$CONF_DIR"
if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
chmod 0700 /etc/munge; chmod 0400 /etc/munge/munge.key
cat > "$CONF_DIR/slurm.conf" <<CONF
# written by scripts/ci_slurm.sh: one node, no accounting (no slurmdbd)
ClusterName=kitci
SlurmctldHost=$HOST
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
JobCompType=jobcomp/none
SchedulerType=sched/backfill
NodeName=$HOST CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
if ! pgrep -x munged >/dev/null 2>&1; then
    # munged drops to the munge user itself; --force: it is started as root here, by design
    munged --force
    STARTED+=(/run/munge/munged.pid)
fi
munge -n | unmunge >/dev/null
slurmctld
STARTED+=("$STATE/slurmctld.pid")
slurmd
STARTED+=("$STATE/slurmd.pid")
for _ in $(seq 1 60); do
    state="$(sinfo -h -n "$HOST" -o %t 2>/dev/null || true)"
    [ "$state" = "idle" ] && break
    sleep 1
done
sinfo
if [ "$(sinfo -h -n "$HOST" -o %t 2>/dev/null)" != "idle" ]; then
    echo "ci_slurm: the node did not become idle; the daemons' logs:" >&2
    tail -n 30 "$STATE/log/slurmctld.log" "$STATE/log/slurmd.log" >&2 || true
    exit 1
fi
phase_done

# -- 3. the tests -------------------------------------------------------------
phase "tests marked slurm (a real 2-task CPU sweep)"
KIT_SLURM_TESTS=1 "$PY" -m pytest -m slurm -p no:cacheprovider -q tests/slurm
phase_done
echo "ci_slurm: whole job $(( $(date +%s) - JOB_START )) s"
