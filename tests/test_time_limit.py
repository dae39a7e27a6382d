"""`kit run --time-limit`: no cell starts that its plan estimate says would end past the limit, a
cell still running at the limit stops as at Ctrl-C, finished cells are kept, the run ends with exit
124 and `--resume` goes on (with a limit of its own).

In-process cases use a fake benchmark module (the runner's bookkeeping, not training) and a fixed
estimate per cell; the cases in a real `python -m kit` process use tests/fixtures/fake_bench.py.
"""

from __future__ import annotations

import re
import signal
import sys
import time
from pathlib import Path

import pytest

from kit.errors import Interrupted, TimeLimitReached, UsageError
from kit.results.journal import read_journal
from kit.results.schema import RunConfig, load_results
from kit.runner.execute import execute
from kit.runner.options import parse_duration
from test_exit_codes_run import SMALL, _env, kit
from test_runner_resume import FakeBench as ResumeFakeBench

CELLS = ["cifar/resnet18/fp32/torch", "cifar/resnet18/amp-bf16/torch", "cifar/resnet34/fp32/torch",
         "cifar/resnet34/amp-bf16/torch"]


class FakeBench(ResumeFakeBench):
    """test_runner_resume's fake kit.bench.api, whose cells take ``seconds[cell]`` each (asking to stop
    every 10 ms, as an engine asks before each step)."""

    def __init__(self, seconds: dict | None = None):
        super().__init__()
        self.seconds = seconds or {}

    def run_cell(self, spec, ctx):
        end = time.monotonic() + self.seconds.get(spec.cell_id, 0.0)
        try:
            while time.monotonic() < end:
                if ctx.should_stop():
                    raise KeyboardInterrupt("stop requested")
                time.sleep(0.01)
        except KeyboardInterrupt:
            self.ran.append(spec.cell_id)
            raise
        return super().run_cell(spec, ctx)


@pytest.fixture
def bench(monkeypatch):
    def install(seconds=None, estimates=None):
        fb = FakeBench(seconds)
        monkeypatch.setitem(sys.modules, "kit.bench.api", fb)
        import kit.bench
        import kit.runner.execute as execute_module

        monkeypatch.setattr(kit.bench, "api", fb, raising=False)
        monkeypatch.setattr(execute_module, "cell_seconds",
                            lambda config, spec, device=None: (estimates or {}).get(spec.cell_id, 0.0))
        return fb

    return install


def _config():
    return RunConfig.of(suite="cifar", data="synthetic", device="cpu", models=["resnet18", "resnet34"],
                     precisions=["fp32", "amp-bf16"], engines=["torch"], repeats=1, steps=1)


def _limit(seconds: float, words: str = "--time-limit test") -> tuple[float, str]:
    return time.monotonic() + seconds, words


def _run_dir(root: Path) -> Path:
    return next(p for p in root.iterdir() if p.is_dir())


def test_a_cell_whose_estimate_would_end_past_the_limit_is_not_started(tmp_path, bench):
    fb = bench(estimates={"cifar/resnet34/fp32/torch": 600.0})
    with pytest.raises(TimeLimitReached) as err:
        execute(_config(), tmp_path, make_bundle=False, time_limit=_limit(60, "--time-limit 1m"))
    assert err.value.exit_code == 124 and isinstance(err.value, Interrupted)
    assert ("stopped at its time limit (--time-limit 1m; cifar/resnet34/fp32/torch not started: its estimate is 600.0 s, "
            in err.value.message)
    assert fb.ran == CELLS[:2]
    run_dir = _run_dir(tmp_path)
    res = load_results(run_dir / "results.json")
    assert res.status == "interrupted" and [c.cell_id for c in res.cells] == CELLS[:2]
    stops = [e for e in read_journal(run_dir / "journal.jsonl") if e["event"] == "run_interrupted"]
    assert len(stops) == 1 and stops[0]["signal"] == "time-limit"
    assert err.value.remedy == f"Continue with: kit run --resume {run_dir}"


def test_a_cell_still_running_at_the_limit_stops_as_at_ctrl_c_and_a_resume_finishes(tmp_path, bench):
    fb = bench(seconds={"cifar/resnet18/amp-bf16/torch": 30.0})
    alarm_handler = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    with pytest.raises(TimeLimitReached) as err:
        execute(_config(), tmp_path, make_bundle=False, time_limit=_limit(3))
    assert time.monotonic() - started < 20  # stopped at the limit, not at the cell's end (30 s)
    assert "stopped at its time limit (--time-limit test)" in err.value.message
    run_dir = _run_dir(tmp_path)
    assert [c.cell_id for c in load_results(run_dir / "results.json").cells] == CELLS[:1]  # the cut cell is not kept
    assert fb.ran == CELLS[:2]
    # nothing of the limit is left behind in this process: no timer, SIGALRM's handler as it was
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is alarm_handler
    fb = bench()
    outcome = execute(None, tmp_path, resume_dir=run_dir, make_bundle=False, time_limit=_limit(600))
    assert outcome.results.status == "complete" and fb.ran == CELLS[1:]


def test_a_run_that_ends_in_time_is_complete_and_leaves_no_timer(tmp_path, bench):
    bench()
    alarm_handler = signal.getsignal(signal.SIGALRM)
    outcome = execute(_config(), tmp_path, make_bundle=False, time_limit=_limit(600))
    assert outcome.results.status == "complete" and len(outcome.results.cells) == 4
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is alarm_handler


@pytest.mark.parametrize("text, seconds", [("540", 540), ("90s", 90), ("15m", 900), ("1.5h", 5400),
                                           ("1:30:00", 5400), ("0:05:00", 300), (" 2H ", 7200), ("720h", 2592000)])
def test_a_duration_reads_as_a_person_writes_it(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text, words", [("soon", "is not a duration"), ("1:15:75", "is not a duration"),
                                         ("1:30", "is not a duration"),  # 90 s or 1 h 30? refused
                                         ("-5m", "is not a duration"), ("15 min", "is not a duration"),
                                         ("0", "leaves no time"), ("0:00:00", "leaves no time"),
                                         ("721h", "over 30 days"), ("300000000h", "over 30 days")])
def test_a_malformed_empty_or_endless_duration_is_refused(text, words):
    with pytest.raises(UsageError) as err:
        parse_duration(text)
    assert words in err.value.message and "--time-limit 15m" in err.value.remedy


def test_a_run_off_the_main_thread_names_its_own_limit(tmp_path, bench):
    """No timer off the main thread, but a cell that would not fit is still not started, and the
    message names this run's limit, not an earlier run's."""
    import threading

    bench(estimates={"cifar/resnet34/fp32/torch": 600.0})
    with pytest.raises(TimeLimitReached):
        execute(_config(), tmp_path / "first", make_bundle=False, time_limit=_limit(60, "--time-limit 1m"))
    errors = []

    def run():
        try:
            execute(_config(), tmp_path / "second", make_bundle=False, time_limit=_limit(120, "--time-limit 2m"))
        except TimeLimitReached as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    (err,) = errors
    assert "(--time-limit 2m; cifar/resnet34/fp32/torch not started" in err.message
    assert "1m" not in err.message and err.message.count("not started") == 1


# -- in a real `python -m kit` process (the fake-bench process helpers of test_exit_codes_run) --------


def test_kit_run_whose_first_cell_would_not_finish_writes_nothing_and_exits_124(tmp_path):
    # each SMALL cell's CPU estimate is about 5 s: none fits in 3, so the run does not start
    out = kit(tmp_path, "run", *SMALL, "--time-limit", "3")
    assert out.returncode == 124, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out.stderr
    assert "Run not started: its first cell to run, cifar/resnet18/fp32/torch, has an estimate of" in errors[0]
    assert "--time-limit 3 leaves" in errors[0] and "no run folder was made" in errors[0]
    assert re.search(r"kit run \.\.\. --time-limit \d+s", out.stderr.split("what to do:")[1]), out.stderr
    assert "Traceback" not in out.stderr
    assert out.stdout == ""  # no bundle
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def test_the_limit_the_refusal_suggests_starts_the_run_though_its_start_up_is_slow(tmp_path):
    """The limit suggested when the first cell would not fit counts the start-up: a run given it starts
    and measures its first cell, where importing the benchmark stack takes 6 s and the device's
    calibration 3 s more (a slow machine; the refusal used to suggest twice the estimate alone, which
    the start-up then ate)."""
    env = _env(tmp_path, KIT_FAKE_BENCH_STARTUP_S="6", KIT_FAKE_BENCH_CALIBRATE_S="3")
    refused = kit(tmp_path, "run", *SMALL, "--time-limit", "3", env=env)
    assert refused.returncode == 124, refused.stderr
    said = " ".join(refused.stderr.split())
    suggested = re.search(r"kit run \.\.\. --time-limit (\d+)s", said).group(1)
    again = kit(tmp_path, "run", *SMALL, "--time-limit", f"{suggested}s", env=env)
    assert "Run not started" not in again.stderr, again.stderr
    run_dir = _run_dir(tmp_path / "results")
    ended = [e["cell_id"] for e in read_journal(run_dir / "journal.jsonl") if e["event"] == "cell_end"]
    assert ended[:1] == ["cifar/resnet18/fp32/torch"], ended
    assert "the limit counts the start-up" in said, said  # and the refusal says why its figure is larger


def test_a_resume_whose_next_cell_would_not_finish_leaves_the_run_folder_as_it_was(tmp_path):
    gate = tmp_path / "gate"  # never opened: the second cell runs until the limit cuts it
    env = _env(tmp_path, KIT_FAKE_BENCH_GATE_AT="cifar/resnet34/fp32/torch", KIT_FAKE_BENCH_GATE=str(gate))
    out = kit(tmp_path, "run", *SMALL, "--time-limit", "12", env=env)
    assert out.returncode == 124, out.stderr
    run_dir = _run_dir(tmp_path / "results")

    # each SMALL cell's CPU estimate is about 5 s: the cell left does not fit in 2
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    bundles = sorted(p.name for p in (tmp_path / "results").glob("*.tar.gz"))
    again = kit(tmp_path, "run", "--resume", str(run_dir), "--time-limit", "2", env=env)
    assert again.returncode == 124, again.stderr
    assert "its first cell to run, cifar/resnet34/fp32/torch" in again.stderr
    assert f"{run_dir} is as it was" in " ".join(again.stderr.split())
    assert f"kit run --resume {run_dir} --time-limit" in " ".join(again.stderr.split())
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in (tmp_path / "results").glob("*.tar.gz")) == bundles


def test_kit_run_stops_a_cell_at_the_limit_and_resume_with_its_own_limit_finishes(tmp_path):
    gate = tmp_path / "gate"
    env = _env(tmp_path, KIT_FAKE_BENCH_GATE_AT="cifar/resnet34/fp32/torch", KIT_FAKE_BENCH_GATE=str(gate))
    out = kit(tmp_path, "run", *SMALL, "--time-limit", "12", env=env)
    assert out.returncode == 124, out.stderr
    assert "stopped at its time limit (--time-limit 12)" in out.stderr and "Traceback" not in out.stderr
    assert Path(f"{gate}.reached").exists() and "not started" not in out.stderr  # cut at the limit, in the cell
    run_dir = _run_dir(tmp_path / "results")
    events = list(read_journal(run_dir / "journal.jsonl"))
    assert [e["cell_id"] for e in events if e["event"] == "cell_end"] == ["cifar/resnet18/fp32/torch"]
    assert [e["signal"] for e in events if e["event"] == "run_interrupted"] == ["time-limit"]
    gate.touch()
    again = kit(tmp_path, "run", "--resume", str(run_dir), "--time-limit", "10m", env=env)
    assert again.returncode == 0, again.stderr
    assert load_results(run_dir / "results.json").status == "complete"


@pytest.mark.parametrize("limit, words", [("3", "--time-limit 3: by the estimate, not even the first of the 2 cell(s) to run "
                                                "fits in it: the run would not start."),
                                          ("8", "--time-limit 8: by the estimate, the first 1 of the 2 cell(s)"),
                                          ("1h", "--time-limit 1h: by the estimate, all 2 cell(s) to run fit in it.")])
def test_dry_run_says_how_many_cells_the_estimate_fits_in_the_limit(tmp_path, limit, words):
    # each SMALL cell's CPU estimate is about 5 s
    out = kit(tmp_path, "run", "--dry-run", *SMALL, "--time-limit", limit)
    assert out.returncode == 0, out.stderr
    assert words in " ".join(out.stdout.split())
    assert not (tmp_path / "results").exists()


def test_the_limit_keeps_an_earlier_stops_reason():
    """A Ctrl-C just before the limit: the alarm that follows neither interrupts the stop being written
    down nor renames it."""
    from kit.runner import stop_signals

    stop_signals.reset_stops("--time-limit 1s")
    try:
        with pytest.raises(KeyboardInterrupt):
            stop_signals._raise_interrupt(signal.SIGINT, None)  # Ctrl-C, as its handler records it
        stop_signals._time_up(signal.SIGALRM, None)  # returns: no second interrupt
        assert stop_signals._stop_reason() == ("SIGINT", "interrupted (Ctrl-C)")
        stop_signals.reset_stops("--time-limit 1s")
        with pytest.raises(KeyboardInterrupt):
            stop_signals._time_up(signal.SIGALRM, None)
        assert stop_signals._stop_reason() == ("time-limit", "stopped at its time limit (--time-limit 1s)")
    finally:
        stop_signals.reset_stops()


def test_kit_run_ends_without_waiting_for_a_teardown_that_hangs(tmp_path):
    """torch's teardown at interpreter exit can hang after a run's bundle is written (an H100, the
    `kit` LSTM engine: references/h100/parts/logs/console-20261206-155202.log). `kit run` on the command
    line ends at once when its work is done, complete or stopped (kit.cli.fast_exit), its output whole."""
    import subprocess

    env = _env(tmp_path, KIT_FAKE_TEARDOWN_HANG="120")
    with pytest.raises(subprocess.TimeoutExpired):  # the stand-in hang holds an ordinary Python process
        subprocess.run([sys.executable, "-c", "pass"], env=env, timeout=3)
    done = subprocess.run([sys.executable, "-m", "kit", "run", *SMALL], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    bundle = Path(done.stdout.strip())
    assert bundle.is_file() and "2 cell(s) measured" in " ".join(done.stderr.split())
    assert kit(tmp_path, "bundle", "verify", str(bundle)).returncode == 0
    stopped = subprocess.run([sys.executable, "-m", "kit", "run", *SMALL, "--time-limit", "3"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 124 and "Run not started" in stopped.stderr


@pytest.mark.parametrize("args, code", [([], 0), (["--time-limit", "3"], 124), (["--precisions", "fp99"], 2)],
                         ids=["complete", "not-started", "bad-option"])
def test_kit_run_ends_with_kit_run_note_whatever_its_outcome(tmp_path, args, code):
    """KIT_RUN_NOTE (compose.cpu.yaml: "No GPU was used: ...") is the last line on stderr, also where kit
    run ends at once (kit.cli.fast_exit)."""
    env = _env(tmp_path, KIT_RUN_NOTE="No GPU was used: a note.")
    done = kit(tmp_path, "run", *SMALL, *args, env=env)
    assert done.returncode == code, done.stderr
    assert done.stderr.rstrip().splitlines()[-1] == "No GPU was used: a note."
    assert done.stderr.count("No GPU was used: a note.") == 1


@pytest.mark.parametrize("spare, refused", [(2.0, False), (-1.0, True)])
def test_with_device_auto_the_first_cell_check_takes_the_cheaper_estimate(spare, refused, monkeypatch):
    """`--device auto` resolves only once torch is loaded: a run is refused before it starts only when
    its first cell would not fit on either kind of device, and its dry run says "would not start" then
    and only then."""
    import io

    from rich.console import Console

    from kit.runner import plan as plan_module
    from kit.runner.plan import build_plan, cell_seconds
    from kit.runner.service import check_first_cell_fits, show_plan

    config = RunConfig.of(suite="cifar", data="synthetic", device="auto", models=["resnet18"], precisions=["fp32"],
                       engines=["torch"], repeats=1, steps=1)
    plan = build_plan(config)
    gpu, cpu = (cell_seconds(config, plan.cells[0], kind) for kind in ("cuda", "cpu"))
    assert gpu != cpu
    guess, kind_of = ("cuda" if gpu > cpu else "cpu"), plan_module.device_kind  # 'auto' guessed as the dearer
    monkeypatch.setattr(plan_module, "device_kind", lambda device: guess if device == "auto" else kind_of(device))
    limit = _limit(min(gpu, cpu) + spare, "--time-limit test")
    if refused:
        with pytest.raises(TimeLimitReached, match=f"estimate of {min(gpu, cpu):.1f} s"):
            check_first_cell_fits(plan, {}, limit)
    else:
        check_first_cell_fits(plan, {}, limit)
    out = io.StringIO()
    show_plan(plan, {}, Console(file=out, width=200), _limit(min(gpu, cpu) + spare, "--time-limit test"))
    assert ("the run would not start" in out.getvalue()) == refused, out.getvalue()
    assert refused or "all 1 cell(s) to run fit in it" in out.getvalue()
