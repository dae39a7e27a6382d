# Sourced by the scripts that run on a GPU in parts (reference_run.sh, reference_check.sh, explain_run.sh):
# run_part PART ARGS... starts `kit run ARGS... "${common[@]}" --results-dir "$OUT/PART"`, or, when OUT/PART
# already holds a run folder (a part cut short by a time limit or Ctrl-C), resumes it (`kit run --resume`;
# a complete one is left as it is). The caller sets OUT, then sources this, which makes OUT, sets KIT
# (default `python3 -m kit`) and reads EXTRA (more kit run options) into the array extra, then the
# caller sets the array common.
#
# BUDGET (seconds, optional) bounds the parts' runs of one call of the script, for a machine lent by the
# time slot (a scheduler's time limit, a lease): each part's `kit run` gets the time left as its
# --time-limit (it starts no cell its estimate says would end past it, and stops a cell still running
# at it as at Ctrl-C, keeping its finished cells and writing an .interrupted bundle; exit 124). In case
# the run does not stop, `timeout -s INT` sends Ctrl-C's signal STOP_GRACE_S (default 15) seconds
# later and kills it 60 s after that, its journal keeping its finished cells. A part is not started
# with under MIN_PART_S (default 30, at least 1) seconds left, nor after a part left (the parts run in
# order, even where one stopped early before a cell that would not fit), and each part left is added
# to the array LEFT_PARTS and named; run_part then returns 0. Running the script again with the same
# OUT goes on from there. From a terminal, Ctrl-C still stops the running part (timeout --foreground).
KIT=${KIT:-python3 -m kit}
mkdir -p "$OUT"
read -r -a extra <<< "${EXTRA:-}"
BUDGET_START=$(date +%s)
LEFT_PARTS=()

run_part() {
  local part=$1; shift
  local dir left rc=0
  local -a cmd
  dir=$(ls -d "$OUT/$part"/*/ 2>/dev/null | sort | tail -1 || true)
  if [ -n "$dir" ]; then
    cmd=(run --resume "${dir%/}")
  else
    cmd=(run "$@" "${common[@]}" --results-dir "$OUT/$part")
  fi
  if [ -n "${BUDGET:-}" ]; then
    left=$(( BUDGET - ($(date +%s) - BUDGET_START) ))
    if [ ${#LEFT_PARTS[@]} -gt 0 ]; then
      echo "$part: not started: it waits for ${LEFT_PARTS[0]}; run again with the same OUT to go on"
      LEFT_PARTS+=("$part")
      return 0
    fi
    if [ "$left" -le 0 ] || [ "$left" -lt "${MIN_PART_S:-30}" ]; then
      echo "$part: not started: ${left}s of BUDGET=${BUDGET}s left; run again with the same OUT to go on"
      LEFT_PARTS+=("$part")
      return 0
    fi
  fi
  [ -z "$dir" ] || echo "$part: resuming ${dir%/}"
  if [ -z "${BUDGET:-}" ]; then
    $KIT "${cmd[@]}"
    return
  fi
  local -a fg=()
  [ ! -t 0 ] || fg=(--foreground)  # a terminal's Ctrl-C reaches the run (else timeout's own group hides it)
  timeout ${fg[@]+"${fg[@]}"} -k 60 -s INT $((left + ${STOP_GRACE_S:-15})) $KIT "${cmd[@]}" --time-limit "$left" || rc=$?
  case "$rc" in
    124) echo "$part: stopped within BUDGET=${BUDGET}s (at its time limit, or before a cell that would not fit), its finished cells kept; run again with the same OUT to go on" ;;
    137) echo "$part: killed 60 s after BUDGET=${BUDGET}s's stop signal; its journal keeps its finished cells; run again with the same OUT to go on" ;;
    *) return "$rc" ;;
  esac
  LEFT_PARTS+=("$part")
}

# Whether STEP (merge, explain: a step that reads every part's bundle) may run now: not while parts
# are left (it says so, and returns 1).
parts_done_for() {
  [ ${#LEFT_PARTS[@]} -gt 0 ] || return 0
  echo "$1: not run while parts are left (${LEFT_PARTS[*]})"
  return 1
}

# The final bundles among the paths given, sorted, one a line: a part cut short also leaves
# NAME.interrupted.tar.gz, and one cut again NAME.interrupted-N.tar.gz, which no step reads.
final_bundles() {
  local b
  for b in "$@"; do
    [ -e "$b" ] || continue
    case "$b" in *.interrupted.tar.gz | *.interrupted-[0-9]*.tar.gz) ;; *) echo "$b" ;; esac
  done | sort
}

# After the parts: what is left, if anything (a line naming the parts; nothing when all ran to the end).
parts_left() {
  [ ${#LEFT_PARTS[@]} -eq 0 ] || echo "left for another call (BUDGET=${BUDGET}s): ${LEFT_PARTS[*]}"
}
