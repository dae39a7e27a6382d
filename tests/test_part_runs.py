"""The parted GPU scripts (scripts/part_run.sh, sourced by reference_run.sh and explain_run.sh):
resuming a part's run folder, a call bounded by BUDGET (the running part stopped with SIGINT, the rest
left for the next call, merge and explain held back), and merge and explain reading only the parts'
final bundles. The scripts run for real with a stand-in for `kit`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "reference_run.sh"
EXPLAIN = ROOT / "scripts" / "explain_run.sh"

#: a stand-in for `python3 -m kit`: logs its arguments, and `run` measures until it is stopped: at
#: its --time-limit (exit 124, as `kit run` stops there), unless FAKE_KIT_IGNORES_LIMIT is set (a run
#: that does not stop in time), or by SIGINT (as `kit run` stops at Ctrl-C; exit 130)
FAKE_KIT = """#!/usr/bin/env bash
echo "kit $*" >> "$KIT_LOG"
if [ "$1" = run ]; then
  limit=60
  while [ $# -gt 0 ]; do [ "$1" = --time-limit ] && [ -z "${FAKE_KIT_IGNORES_LIMIT:-}" ] && limit=$2; shift; done
  sleep "$limit" > /dev/null 2>&1 &  # a background job ignores SIGINT: the trap ends it
  trap 'kill $!; echo "kit: interrupted" >> "$KIT_LOG"; exit 130' INT
  wait
  echo "kit: stopped at its time limit" >> "$KIT_LOG"
  exit 124
fi
"""


def _run(tmp_path: Path, *parts: str, script: Path = SCRIPT, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    kit = tmp_path / "kit"
    kit.write_text(FAKE_KIT)
    kit.chmod(0o755)
    log = tmp_path / "kit.log"
    done = subprocess.run(["bash", str(script), str(tmp_path / "out"), *parts], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60,
                          env={**os.environ, "KIT": str(kit), "KIT_LOG": str(log), **env})
    return done, (log.read_text().splitlines() if log.exists() else [])


def test_a_budget_stops_the_running_part_and_leaves_the_rest_for_the_next_call(tmp_path):
    done, calls = _run(tmp_path, "torch-a", "torch-b", "merge", BUDGET="2", MIN_PART_S="1")
    assert done.returncode == 0, done.stderr
    assert "torch-a: stopped within BUDGET=2s (at its time limit, or before a cell that would not fit), its finished cells kept" in done.stdout
    assert "torch-b: not started: it waits for torch-a" in done.stdout
    assert "merge: not run while parts are left (torch-a torch-b)" in done.stdout
    assert done.stdout.rstrip().endswith("left for another call (BUDGET=2s): torch-a torch-b")
    # the running part got the time left as its own limit, stopped there, and nothing ran after it
    assert calls[0].startswith("kit run --suite cifar --engines torch --models resnet18,resnet34")
    assert calls[0].split()[-2] == "--time-limit" and calls[0].split()[-1] in ("1", "2")
    assert calls[1:] == ["kit: stopped at its time limit"]


def test_a_part_that_does_not_stop_at_its_limit_gets_ctrl_c_after_the_grace(tmp_path):
    done, calls = _run(tmp_path, "torch-a", "torch-b", BUDGET="2", MIN_PART_S="1", STOP_GRACE_S="1",
                       FAKE_KIT_IGNORES_LIMIT="1")
    assert done.returncode == 0, done.stderr
    assert "torch-a: stopped within BUDGET=2s" in done.stdout
    assert "torch-b: not started" in done.stdout
    assert calls[1:] == ["kit: interrupted"]  # SIGINT, its Ctrl-C


def test_the_parts_after_one_that_stopped_early_wait_for_it(tmp_path):
    """kit run stops before a cell its estimate says would not fit, long before the budget is spent:
    the parts after it still wait, so the parts run in order."""
    kit = tmp_path / "kit"
    kit.write_text('#!/usr/bin/env bash\necho "kit $*" >> "$KIT_LOG"\nexit 124\n')
    kit.chmod(0o755)
    log = tmp_path / "kit.log"
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out"), "torch-a", "torch-b", "merge"], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=60,
                          env={**os.environ, "KIT": str(kit), "KIT_LOG": str(log), "BUDGET": "600"})
    assert done.returncode == 0, done.stderr
    assert len(log.read_text().splitlines()) == 1  # torch-a only
    assert "torch-b: not started: it waits for torch-a" in done.stdout
    assert done.stdout.rstrip().endswith("left for another call (BUDGET=600s): torch-a torch-b")


def test_a_part_whose_folder_holds_a_run_resumes_it(tmp_path):
    run = tmp_path / "out" / "torch-b" / "20261206-062833-vm-cifar-e9de"
    run.mkdir(parents=True)
    done, calls = _run(tmp_path, "torch-b", BUDGET="2", MIN_PART_S="1")
    assert done.returncode == 0, done.stderr
    assert f"torch-b: resuming {run}" in done.stdout
    assert calls[0] in (f"kit run --resume {run} --time-limit 2", f"kit run --resume {run} --time-limit 1")


def test_merge_joins_each_parts_final_bundle_and_no_interrupted_one(tmp_path):
    out = tmp_path / "out"
    for name in ("torch-a/a.tar.gz", "torch-a/a.interrupted.tar.gz", "torch-a/a.interrupted-2.tar.gz",
                 "lstm-graphed/g.tar.gz", "lstm-graphed/g.interrupted-12.tar.gz"):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(b"")
    done, calls = _run(tmp_path, "merge")
    assert done.returncode == 0, done.stderr
    assert calls == [f"kit bundle merge {out}/lstm-graphed/g.tar.gz {out}/torch-a/a.tar.gz --same-model --out {out}/merged"]


def test_merge_refuses_while_a_part_that_ran_has_no_final_bundle(tmp_path):
    out = tmp_path / "out"
    (out / "torch-a").mkdir(parents=True)
    (out / "torch-a" / "a.tar.gz").write_bytes(b"")
    (out / "torch-b" / "20261206-062833-vm-cifar-e9de").mkdir(parents=True)  # cut, not finished
    (out / "torch-b" / "b.interrupted.tar.gz").write_bytes(b"")
    done, calls = _run(tmp_path, "merge")
    assert done.returncode == 1 and calls == []
    assert f"merge: {out}/torch-b has no final bundle" in done.stderr


def test_a_budget_already_spent_starts_nothing(tmp_path):
    done, calls = _run(tmp_path, "torch-a", BUDGET="0", MIN_PART_S="0")
    assert done.returncode == 0 and calls == []
    assert "torch-a: not started: 0s of BUDGET=0s left" in done.stdout


def test_a_failing_part_fails_the_script_with_or_without_a_budget(tmp_path):
    kit = tmp_path / "kit"
    kit.write_text("#!/usr/bin/env bash\nexit 5\n")
    kit.chmod(0o755)
    for budget in ({}, {"BUDGET": "60"}):
        done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out"), "torch-a", "torch-b"], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, timeout=60, env={**os.environ, "KIT": str(kit), **budget})
        assert done.returncode == 5, budget


def test_explain_waits_for_the_parts_left_and_skips_every_interrupted_bundle(tmp_path):
    out = tmp_path / "out"
    done, calls = _run(tmp_path, "cifar", "explain", script=EXPLAIN, BUDGET="0", MIN_PART_S="0")
    assert done.returncode == 0 and calls == []
    assert "explain: not run while parts are left (cifar)" in done.stdout
    (out / "lstm").mkdir(parents=True)
    for name in ("l.tar.gz", "l.interrupted.tar.gz", "l.interrupted-2.tar.gz"):
        (out / "lstm" / name).write_bytes(b"")
    done, calls = _run(tmp_path, "explain", script=EXPLAIN)
    assert done.returncode == 0, done.stderr
    explained = [line for line in calls if line.startswith("kit explain")]
    assert explained == [f"kit explain {out}/lstm/l.tar.gz", f"kit explain {out}/lstm/l.tar.gz --json {out}/explain-lstm.json"]


# -- scripts/reference_check.sh: today's kit against a shipped reference --------------------------------

CHECK = ROOT / "scripts" / "reference_check.sh"


def _check(tmp_path: Path, *parts: str, kit: str | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(CHECK), "h200", str(tmp_path / "out"), *parts], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300, env={**os.environ, **({"KIT": kit} if kit else {}), **env})


def test_the_check_runs_the_first_cells_a_user_runs_and_compares_only_when_every_part_is_done(tmp_path):
    kit = tmp_path / "kit"
    kit.write_text('#!/usr/bin/env bash\necho "kit $*" >> "$KIT_LOG"\n')
    kit.chmod(0o755)
    log = tmp_path / "kit.log"
    done = _check(tmp_path, kit=str(kit), KIT_LOG=str(log))
    assert done.returncode == 1, done.stdout  # the stand-in wrote no bundle: nothing to compare
    assert "compare: no part's final bundle" in done.stderr
    common = "--data synthetic --skip-checks --device cuda:0"
    assert log.read_text().splitlines() == [
        f"kit run --suite cifar --engines torch --models resnet18,resnet50 {common} --results-dir {tmp_path}/out/cifar",
        f"kit run --suite lstm --engines graphed {common} --results-dir {tmp_path}/out/lstm-graphed",
        f"kit run --suite lstm --engines kit {common} --results-dir {tmp_path}/out/lstm-kit"]
    held = _check(tmp_path, "lstm-kit", "compare", kit=str(kit), KIT_LOG=str(log), BUDGET="0", MIN_PART_S="0")
    assert held.returncode == 0, held.stderr
    assert "compare: not run while parts are left (lstm-kit)" in held.stdout


def test_the_checks_compare_joins_the_parts_and_names_a_method_change(tmp_path):
    """The real kit, on two committed H100 parts standing in for a check's (and one interrupted bundle,
    which is left out), against the shipped H200 reference of 2026-11-30, measured before cells
    recorded their method: the comparison says so at HIGH."""
    import shutil
    import sys

    out = tmp_path / "out"
    for part, source in (("cifar", "torch-a"), ("lstm-kit", "lstm-kit-a")):
        (out / part).mkdir(parents=True)
        for bundle in (ROOT / "references" / "h100" / "parts" / source).glob("*.tar.gz"):
            shutil.copy(bundle, out / part)
    (out / "lstm-kit" / "x.interrupted.tar.gz").write_bytes(b"not a bundle")
    done = _check(tmp_path, "compare", kit=f"{sys.executable} -m kit", COLUMNS="200")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{out}/compare-h200.txt"
    text = (out / "compare-h200.txt").read_text()
    assert "HIGH different method in 15 cell(s)" in " ".join(text.split())
    assert "A (baseline)" in text and text.count("NVIDIA H100 80GB HBM3") == 1  # one input: the parts joined
    assert (out / "compare-h200.json").stat().st_size > 0 and len(list((out / "merged").glob("*.tar.gz"))) == 1
