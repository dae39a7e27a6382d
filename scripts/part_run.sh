# Sourced by the scripts that run on a GPU in parts (reference_run.sh, explain_run.sh): run_part PART ARGS...
# starts `kit run ARGS... "${common[@]}" --results-dir "$OUT/PART"`, or, when OUT/PART already holds a run
# folder (a part cut short by a time limit or Ctrl-C), resumes it (`kit run --resume`; a complete one is
# left as it is). The caller sets OUT, KIT and the array common.
run_part() {
  local part=$1; shift
  local dir
  dir=$(ls -d "$OUT/$part"/*/ 2>/dev/null | sort | tail -1 || true)
  if [ -n "$dir" ]; then
    echo "$part: resuming ${dir%/}"
    $KIT run --resume "${dir%/}"
  else
    $KIT run "$@" "${common[@]}" --results-dir "$OUT/$part"
  fi
}
