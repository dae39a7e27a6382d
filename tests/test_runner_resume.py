"""The runner journals every cell, survives a crash or Ctrl-C, and resumes.

The benchmark module is replaced by a small fake here (these tests are about
the runner's bookkeeping, not about training); the fake's numbers are fixtures.
"""

from __future__ import annotations

import json
import sys
import types

import pytest

from kit.errors import Interrupted, Terminated
from kit.results.journal import read_journal
from kit.results.schema import CellResult, RunConfig, load_results
from kit.runner.execute import execute


class FakeBench(types.ModuleType):
    """Stands in for kit.bench.api: fixture numbers, optional failures."""

    def __init__(self, interrupt_on: str | None = None, fail_on: str | None = None):
        super().__init__("kit.bench.api")
        self.interrupt_on = interrupt_on
        self.fail_on = fail_on
        self.ran: list[str] = []

    def resolve_device(self, requested: str) -> str:
        return "cpu"

    def calibrate(self, device: str) -> dict:
        return {"available": False, "reason": "fake bench"}

    def memory_bandwidth(self, device: str) -> dict:
        return {"available": False, "reason": "fake bench"}

    def run_cell(self, spec, ctx):
        self.ran.append(spec.cell_id)
        if spec.cell_id == self.interrupt_on:
            raise KeyboardInterrupt
        if spec.cell_id == self.fail_on:
            raise RuntimeError("simulated crash inside the cell")
        if ctx.should_stop():  # as every engine asks before each step
            raise KeyboardInterrupt("stop requested")
        ctx.event("epoch", repeat=0, epoch=0, seconds=1.0)
        repeats = [{"epoch_seconds": [1.0 + r / 10], "epoch_seconds_median": 1.0 + r / 10,
                    "throughput_items_per_s": 100.0 - r} for r in range(ctx.repeats)]
        return CellResult(spec.workload, spec.model, spec.precision, spec.engine, "ok",
                          params=spec.params, repeats=repeats, throughput_unit="images")


@pytest.fixture
def fake_bench(monkeypatch):
    def install(**kw):
        fb = FakeBench(**kw)
        monkeypatch.setitem(sys.modules, "kit.bench.api", fb)
        import kit.bench

        monkeypatch.setattr(kit.bench, "api", fb, raising=False)
        return fb

    return install


def _config(**kw):
    base = dict(suite="cifar", data="synthetic", device="cpu", models=["resnet18", "resnet34"],
                precisions=["fp32", "amp-bf16"], engines=["torch"], repeats=2, steps=2)
    base.update(kw)
    return RunConfig.of(**base)


def test_every_cell_is_journaled_and_results_written(tmp_path, fake_bench):
    fb = fake_bench()
    out = execute(_config(), tmp_path, make_bundle=False)
    assert len(fb.ran) == 4
    res = load_results(out.run_dir / "results.json")
    assert res.status == "complete"
    assert [c.status for c in res.cells] == ["ok"] * 4
    # summaries are computed from the repeats
    assert res.cells[0].summary["throughput_items_per_s"]["median"] == pytest.approx(99.5)
    events = [e["event"] for e in read_journal(out.run_dir / "journal.jsonl")]
    assert events[0] == "run_start" and events[-1] == "run_end"
    assert events.count("cell_end") == 4
    # the derived fp32/other ratios exist for the two models
    assert len(res.derived["performance_ratios"]) == 2


def test_ctrl_c_keeps_finished_cells_and_resume_skips_them(tmp_path, fake_bench):
    fake_bench(interrupt_on="cifar/resnet34/fp32/torch")
    with pytest.raises(Interrupted) as err:
        execute(_config(), tmp_path, make_bundle=False)
    assert "kit run --resume" in (err.value.remedy or "")
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    partial = load_results(run_dir / "results.json")
    assert partial.status == "interrupted"
    assert [c.cell_id for c in partial.cells] == ["cifar/resnet18/fp32/torch", "cifar/resnet18/amp-bf16/torch"]

    fb2 = fake_bench()
    out = execute(None, tmp_path, resume_dir=run_dir, make_bundle=False)
    assert fb2.ran == ["cifar/resnet34/fp32/torch", "cifar/resnet34/amp-bf16/torch"]
    final = load_results(out.run_dir / "results.json")
    assert final.status == "complete"
    assert len(final.cells) == 4


def test_resume_ignores_a_truncated_last_journal_line(tmp_path, fake_bench):
    fake_bench(interrupt_on="cifar/resnet34/fp32/torch")
    with pytest.raises(Interrupted):
        execute(_config(), tmp_path, make_bundle=False)
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    # a crash mid-write leaves half a JSON line at the end
    with open(run_dir / "journal.jsonl", "a") as fh:
        fh.write('{"seq": 999, "event": "cell_end", "result": {"stat')
    fb = fake_bench()
    out = execute(None, tmp_path, resume_dir=run_dir, make_bundle=False)
    assert len(fb.ran) == 2
    assert load_results(out.run_dir / "results.json").status == "complete"
    # the journal is valid JSON lines again after the resume
    for line in (run_dir / "journal.jsonl").read_text().splitlines():
        json.loads(line)


def test_a_crashing_cell_is_recorded_failed_and_the_rest_still_run(tmp_path, fake_bench):
    fb = fake_bench(fail_on="cifar/resnet18/amp-bf16/torch")
    out = execute(_config(), tmp_path, make_bundle=False)
    assert len(fb.ran) == 4
    statuses = {c.cell_id: c.status for c in out.results.cells}
    assert statuses["cifar/resnet18/amp-bf16/torch"] == "failed"
    assert "simulated crash" in next(c.reason for c in out.results.cells if c.status == "failed")
    assert sum(s == "ok" for s in statuses.values()) == 3
    assert "simulated crash" in (out.run_dir / "run.log").read_text()


def test_resume_of_a_folder_without_journal_is_a_clear_error(tmp_path):
    from kit.errors import UsageError

    with pytest.raises(UsageError, match="not a run folder"):
        execute(None, tmp_path, resume_dir=tmp_path, make_bundle=False)


def test_sigterm_ends_the_run_like_ctrl_c(tmp_path, fake_bench):
    """`docker stop` sends SIGTERM: finished cells, a closed journal and an interrupted status remain."""
    import os
    import signal

    fb = fake_bench()
    original = fb.run_cell

    def run_cell(spec, ctx):
        if spec.cell_id == "cifar/resnet34/fp32/torch":
            os.kill(os.getpid(), signal.SIGTERM)
        return original(spec, ctx)

    fb.run_cell = run_cell
    with pytest.raises(Terminated) as err:
        execute(_config(), tmp_path, make_bundle=False)
    assert err.value.exit_code == 143 and "terminated (SIGTERM)" in err.value.message
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    res = load_results(run_dir / "results.json")
    assert res.status == "interrupted" and len(res.cells) == 2
    events = list(read_journal(run_dir / "journal.jsonl"))
    assert events[-1]["event"] == "run_end"
    assert [(e["message"], e["signal"]) for e in events if e["event"] == "run_interrupted"] == [("terminated (SIGTERM)", "SIGTERM")]
    assert signal.getsignal(signal.SIGTERM) is not None  # the previous handler is back


def test_ctrl_c_is_named_in_the_journal_and_exits_130(tmp_path, fake_bench):
    fake_bench(interrupt_on="cifar/resnet18/amp-bf16/torch")
    with pytest.raises(Interrupted) as err:
        execute(_config(), tmp_path, make_bundle=False)
    assert not isinstance(err.value, Terminated) and err.value.exit_code == 130
    assert "interrupted (Ctrl-C)" in err.value.message
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    stops = [e for e in read_journal(run_dir / "journal.jsonl") if e["event"] == "run_interrupted"]
    assert [(e["message"], e["signal"]) for e in stops] == [("interrupted (Ctrl-C)", "SIGINT")]


def _swallowed_ctrl_c() -> None:
    """Ctrl-C landing in a weakref callback (PyTorch's compiler runs them): Python prints "Exception
    ignored" and the KeyboardInterrupt goes nowhere."""
    import gc
    import os
    import signal
    import weakref

    class Obj:
        pass

    obj = Obj()
    keep = weakref.ref(obj, lambda ref: os.kill(os.getpid(), signal.SIGINT))
    del obj
    gc.collect()
    assert keep() is None  # the callback ran, and its KeyboardInterrupt went nowhere


@pytest.fixture
def python_ctrl_c():
    """SIGINT as an interactive Python has it (a pytest started in a script's background ignores it)."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the swallowed interrupt itself
@pytest.mark.parametrize("when", ["inside the cell", "at the cell's end"])
def test_a_swallowed_ctrl_c_still_stops_the_run(tmp_path, fake_bench, python_ctrl_c, when):
    """A lost KeyboardInterrupt must still stop the run, not let it measure on: inside the cell at its
    next step (the cell is not kept), at its end before the next cell (the cell is kept)."""
    import signal

    fb = fake_bench()
    original = fb.run_cell

    def run_cell(spec, ctx):
        if spec.cell_id == "cifar/resnet18/amp-bf16/torch" and when == "inside the cell":
            _swallowed_ctrl_c()
        result = original(spec, ctx)
        if spec.cell_id == "cifar/resnet18/amp-bf16/torch" and when == "at the cell's end":
            _swallowed_ctrl_c()
        return result

    fb.run_cell = run_cell
    with pytest.raises(Interrupted) as err:
        execute(_config(), tmp_path, make_bundle=False)
    assert err.value.exit_code == 130 and "interrupted (Ctrl-C)" in err.value.message
    assert fb.ran == ["cifar/resnet18/fp32/torch", "cifar/resnet18/amp-bf16/torch"]  # none of resnet34's
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    res = load_results(run_dir / "results.json")
    kept = ["cifar/resnet18/fp32/torch"] + (["cifar/resnet18/amp-bf16/torch"] if when == "at the cell's end" else [])
    assert res.status == "interrupted" and [c.cell_id for c in res.cells] == kept
    stops = [e for e in read_journal(run_dir / "journal.jsonl") if e["event"] == "run_interrupted"]
    assert [(e["message"], e["signal"]) for e in stops] == [("interrupted (Ctrl-C)", "SIGINT")]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's own handler is back


def test_a_clean_run_leaves_a_log_of_what_it_did(tmp_path, fake_bench):
    fake_bench()
    out = execute(_config(), tmp_path, make_bundle=False)
    log = (out.run_dir / "run.log").read_text()
    assert f"run {out.run_dir.name}" in log and "plan: 4 cell(s) x 2 repeat(s)" in log
    assert "cell cifar/resnet34/amp-bf16/torch: started" in log
    assert "cell cifar/resnet34/amp-bf16/torch: 100 images/s" in log
    assert "run ended complete: 4 cell(s) ok, 0 skipped, 0 failed, 0 not run" in log


def test_resuming_a_complete_run_measures_and_writes_nothing(tmp_path, fake_bench):
    fake_bench()
    first = execute(_config(), tmp_path, make_bundle=True)
    assert first.bundle is not None
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    fb = fake_bench()
    again = execute(None, tmp_path, resume_dir=first.run_dir)
    assert again.already_complete and fb.ran == []
    assert again.bundle == first.bundle and len(again.results.cells) == 4
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before


def test_a_resume_measures_the_failed_cells_of_a_run_that_ended(tmp_path, fake_bench):
    fake_bench(fail_on="cifar/resnet18/amp-bf16/torch")
    first = execute(_config(), tmp_path, make_bundle=False)
    assert first.results.status == "complete"
    fb = fake_bench()
    again = execute(None, tmp_path, resume_dir=first.run_dir, make_bundle=False)
    assert not again.already_complete and fb.ran == ["cifar/resnet18/amp-bf16/torch"]
    assert [c.status for c in again.results.cells] == ["ok"] * 4


def test_a_child_forked_during_a_run_is_killed_by_sigterm(tmp_path, fake_bench):
    """DataLoader workers are forked inside a cell; PyTorch stops a slow one with SIGTERM.
    The kit's SIGTERM -> KeyboardInterrupt handler must not be inherited by them."""
    import os
    import signal

    fb = fake_bench()
    original = fb.run_cell
    seen: dict[str, int] = {}

    def run_cell(spec, ctx):
        if not seen:
            pid = os.fork()
            if pid == 0:  # the child: wait for the signal; a KeyboardInterrupt would exit 3
                signal.alarm(10)  # and a lost signal ends it by SIGALRM instead of hanging the test
                try:
                    signal.pause()
                except KeyboardInterrupt:
                    os._exit(3)
                os._exit(0)
            os.kill(pid, signal.SIGTERM)
            _, status = os.waitpid(pid, 0)
            seen["status"] = status
            # the parent itself still turns SIGTERM into an interrupt
            seen["parent_handler"] = signal.getsignal(signal.SIGTERM).__name__
        return original(spec, ctx)

    fb.run_cell = run_cell
    execute(_config(), tmp_path, make_bundle=False)
    assert os.WIFSIGNALED(seen["status"]) and os.WTERMSIG(seen["status"]) == signal.SIGTERM
    assert seen["parent_handler"] == "_raise_interrupt"


def test_resuming_a_complete_run_points_at_its_complete_bundle_not_the_interrupted_one(tmp_path, fake_bench):
    fake_bench(interrupt_on="cifar/resnet34/fp32/torch")
    with pytest.raises(Interrupted) as err:
        execute(_config(), tmp_path)
    interrupted_bundle = err.value.outcome.bundle
    run_dir = err.value.outcome.run_dir
    fake_bench()
    finished = execute(None, tmp_path, resume_dir=run_dir)
    assert finished.bundle != interrupted_bundle and interrupted_bundle.exists()
    again = execute(None, tmp_path, resume_dir=run_dir)
    assert again.already_complete and again.bundle == finished.bundle


def test_a_resume_keeps_the_environment_of_the_sessions_that_measured_the_finished_cells(tmp_path, fake_bench, capsys):
    """env.json describes the session that writes it; a resume (another day, commit, machine or GPU)
    moves the earlier sessions' records to earlier_sessions, each naming the cells it measured, and
    says so when the run started on another machine. Two interruptions, three sessions."""
    fake_bench(interrupt_on="cifar/resnet18/amp-bf16/torch")
    with pytest.raises(Interrupted):
        execute(_config(), tmp_path, make_bundle=False)
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    first = json.loads((run_dir / "env.json").read_text())
    # the first session ran elsewhere: another host and GPU, another commit of the kit
    first.update(host={"name": "gpu-box", "host_id": "h-elsewhere"}, nvml={"gpus": [{"name": "H200", "uuid": "GPU-first"}]},
                 kit={"version": "0.1.0", "git_commit": "aaaa", "git_dirty": False})
    (run_dir / "env.json").write_text(json.dumps(first))
    capsys.readouterr()

    fake_bench(interrupt_on="cifar/resnet34/amp-bf16/torch")
    with pytest.raises(Interrupted):
        execute(None, tmp_path, resume_dir=run_dir, make_bundle=False)
    assert "started on another machine or GPU (host h-elsewhere, GPU-first)" in capsys.readouterr().err
    second = json.loads((run_dir / "env.json").read_text())
    assert [s["cells"] for s in second["earlier_sessions"]] == [["cifar/resnet18/fp32/torch"]]
    assert second["earlier_sessions"][0]["kit"]["git_commit"] == "aaaa"
    assert second["earlier_sessions"][0]["nvml"]["gpus"][0]["uuid"] == "GPU-first"
    assert "earlier_sessions" not in second["earlier_sessions"][0]

    fb = fake_bench()
    out = execute(None, tmp_path, resume_dir=run_dir, make_bundle=False)
    assert fb.ran == ["cifar/resnet34/amp-bf16/torch"]
    assert "another machine" not in capsys.readouterr().err  # the second session ran here, like this one
    final = load_results(out.run_dir / "results.json")
    assert final.status == "complete"
    sessions = final.environment["earlier_sessions"]
    assert [s["cells"] for s in sessions] == [["cifar/resnet18/fp32/torch"],
                                              ["cifar/resnet18/amp-bf16/torch", "cifar/resnet34/fp32/torch"]]
    assert json.loads((run_dir / "env.json").read_text())["earlier_sessions"] == sessions


def test_a_resume_whose_earlier_environment_is_unreadable_still_runs(tmp_path, fake_bench):
    fake_bench(interrupt_on="cifar/resnet34/fp32/torch")
    with pytest.raises(Interrupted):
        execute(_config(), tmp_path, make_bundle=False)
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    (run_dir / "env.json").write_text("{not json")
    fake_bench()
    out = execute(None, tmp_path, resume_dir=run_dir, make_bundle=False)
    final = load_results(out.run_dir / "results.json")
    assert final.status == "complete" and "earlier_sessions" not in final.environment


def test_a_resume_on_another_gpu_model_is_refused_and_changes_nothing(tmp_path, fake_bench, monkeypatch):
    """Cells of two GPU models in one run would make its ratios and curves meaningless: the resume
    names both models, exits 2 (UsageError) before measuring anything, and env.json and the
    journal's cells stay as they were; on the run's own GPU model it resumes."""
    from kit.env import record as env_record
    from kit.errors import UsageError

    real_collect = env_record.collect

    def on(gpu):
        def collect(config=None, **kw):
            env = real_collect(config, **kw)
            env["nvml"] = {"gpus": [{"name": gpu, "uuid": f"GPU-{gpu[-4:]}"}]}
            return env
        monkeypatch.setattr(env_record, "collect", collect)

    on("NVIDIA H200")
    fake_bench(interrupt_on="cifar/resnet34/fp32/torch")
    with pytest.raises(Interrupted):
        execute(_config(), tmp_path, make_bundle=False)
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    env_before = (run_dir / "env.json").read_bytes()
    ended_before = [e for e in read_journal(run_dir / "journal.jsonl") if e["event"] == "cell_end"]

    on("NVIDIA A100-SXM4-80GB")
    fb = fake_bench()
    with pytest.raises(UsageError) as refused:
        execute(None, tmp_path, resume_dir=run_dir, make_bundle=False)
    assert "measured on NVIDIA H200, and this machine has NVIDIA A100-SXM4-80GB" in str(refused.value)
    assert "start a new run" in refused.value.remedy
    assert fb.ran == []
    assert (run_dir / "env.json").read_bytes() == env_before
    assert [e for e in read_journal(run_dir / "journal.jsonl") if e["event"] == "cell_end"] == ended_before

    on("NVIDIA H200")
    fb = fake_bench()
    out = execute(None, tmp_path, resume_dir=run_dir, make_bundle=False)
    assert fb.ran == ["cifar/resnet34/fp32/torch", "cifar/resnet34/amp-bf16/torch"]
    assert load_results(out.run_dir / "results.json").status == "complete"


@pytest.mark.parametrize("device, asked, profiled", [("cpu", None, False), ("cuda:0", None, True),
                                                     ("cuda:0", False, False), ("cpu", True, True)])
def test_the_results_say_whether_the_cells_were_profiled_and_the_journal_keeps_the_option(
        tmp_path, fake_bench, monkeypatch, device, asked, profiled):
    """The default (None) means "on a GPU": the results record what it meant on the run's device, so a
    bundle reads the same in a kit whose default differs, while the journal keeps the option for a resume
    (on another machine it is resolved there)."""
    fb = fake_bench()
    monkeypatch.setattr(fb, "resolve_device", lambda requested: device)
    seen = []
    real = fb.run_cell
    monkeypatch.setattr(fb, "run_cell", lambda spec, ctx: seen.append(ctx.profile_steps) or real(spec, ctx))
    out = execute(_config(models=["resnet18"], precisions=["fp32"], profile_window=asked), tmp_path, make_bundle=False)
    assert load_results(out.run_dir / "results.json").config.profile_window is profiled
    assert seen == [5 if profiled else 0]
    start = next(e for e in read_journal(out.run_dir / "journal.jsonl") if e["event"] == "run_start")
    assert start["config"]["profile_window"] is asked


def test_a_resume_remakes_the_bundle_of_a_complete_run_only_from_its_cells_as_they_are_now(tmp_path, fake_bench):
    """The run's first bundle holds a failed cell that its resume measured again; with the second bundle
    gone, the first is not the run's bundle: a resume makes one again, holding the cells as they are now."""
    fake_bench(fail_on="cifar/resnet18/amp-bf16/torch")
    first = execute(_config(), tmp_path)
    assert "failed" in {c.status for c in first.results.cells}
    fake_bench()
    second = execute(None, tmp_path, resume_dir=first.run_dir)
    assert second.bundle != first.bundle and not second.already_complete
    second.bundle.unlink()
    again = execute(None, tmp_path, resume_dir=first.run_dir)
    assert again.already_complete and again.bundle_remade and again.bundle not in (first.bundle, None)
    from kit.bundle.safe_open import open_bundle

    assert {c.status for c in open_bundle(again.bundle).results.cells} == {"ok"}
    assert not execute(None, tmp_path, resume_dir=first.run_dir).bundle_remade  # found now


@pytest.mark.parametrize("locked", [False, True])
def test_without_make_bundle_nothing_is_made_and_with_it_the_locked_path_makes_it_too(tmp_path, fake_bench, locked):
    from kit.runner.lock import RunLock

    fake_bench()
    first = execute(_config(), tmp_path)
    first.bundle.unlink()
    kept = execute(None, tmp_path, resume_dir=first.run_dir, make_bundle=False)
    assert kept.already_complete and kept.bundle is None and not list(tmp_path.glob("*.tar.gz"))
    if locked:  # the run ended between `kit run --resume`'s first look and its lock
        with RunLock(first.run_dir) as lock:
            made = execute(None, tmp_path, resume_dir=first.run_dir, lock=lock)
    else:
        made = execute(None, tmp_path, resume_dir=first.run_dir)
    assert made.bundle_remade and made.bundle.is_file()


def test_a_bundle_that_cannot_be_made_again_is_a_kit_error_naming_a_remedy(tmp_path, fake_bench, monkeypatch):
    import errno

    from kit.errors import KitError
    from kit.report import export

    fake_bench()
    first = execute(_config(), tmp_path)
    first.bundle.unlink()

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(export, "export_run", read_only)
    with pytest.raises(KitError) as err:
        execute(None, tmp_path, resume_dir=first.run_dir)
    assert err.value.exit_code == 1 and "making one again failed: Read-only file system." in err.value.message
    assert f"kit bundle export {first.run_dir} --out DIR" in err.value.remedy
