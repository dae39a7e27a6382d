"""The profiled window of real cells on the CPU, with the window on and off: it runs after the timed
repeats and leaves their records as they were, its profile has the documented shape (on a CPU: not
available, host time under its own names), --no-profile-window leaves no profile, and the cell's
method is the same either way (a bundle with windows compares with one without, no method change)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from kit.results import kernel_classes as kc

pytest.importorskip("torch")
pytest.importorskip("torchvision")

from fixtures.results.factory import make_env, make_results, make_run_dir  # noqa: E402
from kit.bench import profile_window  # noqa: E402
from kit.bench.cifar import suite as cifar  # noqa: E402
from kit.bench.context import CellContext  # noqa: E402
from kit.bench.gpt import suite as gpt  # noqa: E402
from kit.bench.lstm import suite as lstm  # noqa: E402
from kit.results.method import identity  # noqa: E402
from kit.results.schema import CellSpec, RunConfig  # noqa: E402
from test_cifar_suite import TinyArrays  # noqa: E402
from test_gpt_suite import fixture_corpus  # noqa: E402
from test_lstm_suite import TINY, tiny_corpus  # noqa: E402

STEPS = 3
#: what a repeat records from clocks (differs run to run); everything else must not move
TIMED = ("epoch_seconds", "epoch_seconds_median", "throughput_items_per_s", "time_to_first_step_s", "steady_seconds",
         "steady_windows", "data_wait_s", "compute_s", "achieved_tflops", "fit_seconds", "gpu_busy_seconds",
         "gpu_busy_fraction")
CELLS = {
    "cifar/torch": CellSpec("cifar", "resnet18", "fp32", "torch", {"batch_size": 4, "image_size": 32, "epochs": 1, "steps": 4}),
    "cifar/fastai": CellSpec("cifar", "resnet18", "fp32", "fastai", {"batch_size": 4, "image_size": 32, "epochs": 1, "steps": 6}),
    "lstm/kit": CellSpec("lstm", "apex-2018", "fp32", "kit", dict(TINY, max_batches=6)),
    "lstm/graphed": CellSpec("lstm", "apex-2018", "fp32", "graphed", dict(TINY, max_batches=6)),
    "gpt/kit": CellSpec("gpt", "tiny", "fp32", "kit", {"preset": "tiny", "compile": "off", "steps": 4}),
}


@pytest.fixture(scope="module")
def runs():
    """Each engine's cell run twice (2 repeats, same seed): window on, then off; with the journal's
    events and the moment the window ran among them."""
    if CELLS["cifar/fastai"].engine == "fastai":
        pytest.importorskip("fastai")
    mp = pytest.MonkeyPatch()
    arrays, corpus = TinyArrays(), tiny_corpus()
    mp.setattr(cifar, "load_data", lambda ctx: arrays)
    mp.setattr(lstm, "load_corpus", lambda ctx, pad, splits=None: corpus)
    gpt_corpus = fixture_corpus()
    mp.setattr(gpt, "load_corpus", lambda ctx, pad, splits=None: gpt_corpus)
    events: list = []
    real_run = profile_window.run

    def spy(*a, **kw):
        events.append(("window", {}))
        return real_run(*a, **kw)

    mp.setattr(profile_window, "run", spy)
    real_fit = cifar.fastai_window.profile_fit

    def fit_spy(*a, **kw):
        events.append(("window", {}))
        return real_fit(*a, **kw)

    mp.setattr(cifar.fastai_window, "profile_fit", fit_spy)
    out = {}
    try:
        for name, spec in CELLS.items():
            suite = {"lstm": lstm, "gpt": gpt}.get(spec.workload, cifar)
            for on in (True, False):
                events.clear()
                ctx = CellContext(device="cpu", data_dir=Path("unused"), data_source="synthetic", repeats=2,
                                  event=lambda kind, **f: events.append((kind, f)), profile_steps=STEPS if on else 0)
                result = suite.run_cell(spec, ctx)
                assert result.status == "ok", result.reason
                out[name, on] = SimpleNamespace(result=result, events=list(events))
    finally:
        mp.undo()
    return out


def _untimed(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k not in TIMED}


@pytest.mark.parametrize("engine", list(CELLS))
def test_the_window_runs_after_the_timed_repeats_and_leaves_their_records_as_they_were(runs, engine):
    on, off = runs[engine, True], runs[engine, False]
    kinds = [k for k, _ in on.events]
    assert kinds.count("window") == 1 and "window" not in [k for k, _ in off.events]
    # after the last repeat's last epoch (GPT's repeats have no epoch event: after the first repeat's end)
    gpt_cell = engine.startswith("gpt")
    last = max(i for i, (k, f) in enumerate(on.events) if f.get("repeat") == (0 if gpt_cell else 1)
               and k == ("note" if gpt_cell else "epoch"))
    assert kinds.index("window") > last
    assert len(on.result.repeats) == len(off.result.repeats) == 2
    for a, b in zip(on.result.repeats, off.result.repeats):
        # the steps counted, losses, metrics, counters and seeds: identical, as if no window had run
        assert _untimed(a) == _untimed(b)
    assert on.result.summary.keys() == off.result.summary.keys()


@pytest.mark.parametrize("engine", list(CELLS))
def test_a_cpu_window_says_the_device_was_not_measured_and_keeps_the_host_time(runs, engine):
    p = runs[engine, True].result.profile
    assert p["available"] is False and "CPU" in p["reason"]
    assert p["source"].startswith(f"torch.profiler (CPU activity), {STEPS} steps")
    assert p["steps"] == STEPS and p["step_s"] > 0 and p["host_op_s"] > 0
    assert 0 < p["window_wall_s"] and p["timed_step_s"] > 0
    phases = p["window_phases_s"]  # where the window's time went, adding up to it
    assert set(phases) == {"before", "profiler_start", "steps", "profiler_stop", "read", "after"}
    assert (phases["after"] > 0) == (engine == "cifar/fastai")  # the fit's end, after the profiler stopped
    assert min(phases.values()) >= 0 and sum(phases.values()) == pytest.approx(p["window_wall_s"], rel=1e-6)
    assert phases["steps"] == pytest.approx(p["step_s"] * STEPS, abs=1e-3)  # the same steps, read on the host's clock
    assert not any(k.startswith("device") or k in ("idle_s", "busy_s", "largest_kernels") for k in p)
    ops = p["largest_host_ops"]  # the step's own operators, host time
    assert ops and sum(o["s"] for o in ops) <= p["host_op_s"] * (1 + 1e-9)
    assert any(o["class"] in (kc.OTHER_MATMUL, kc.TENSOR_CORE_MATMUL) for o in ops), ops  # every engine's model multiplies
    json.dumps(p)  # stored as it is


@pytest.mark.parametrize("engine", list(CELLS))
def test_no_window_leaves_no_profile_and_the_same_method(runs, engine):
    on, off = runs[engine, True].result, runs[engine, False].result
    assert off.profile is None and "profile" not in off.to_dict()
    assert "profile" in on.to_dict()
    assert on.method and identity(on.method) == identity(off.method)


def test_a_bundle_with_windows_compares_with_one_without_and_no_method_changes(runs, tmp_path):
    from kit.compare.engine import compare_paths
    from kit.report.export import export_run

    bundles = []
    for on, host in ((False, "fixture-host-a"), (True, "fixture-host-b")):
        cells = [runs[name, on].result.to_dict() for name in CELLS]
        res = make_results(cells, make_env(host=host), run_id=f"FIXTURE-window-{on}")
        bundles.append(export_run(make_run_dir(tmp_path / f"runs-{host}", res), tmp_path / f"bundles-{host}"))
    cmp = compare_paths(bundles)
    assert len(cmp.rows) == len(CELLS)
    assert not cmp.method_changes and "method" not in [w.kind for w in cmp.warnings]


def test_the_window_is_on_for_gpu_cells_by_default_as_asked_otherwise_and_off_for_older_runs():
    from kit.runner.option_checks import config_from_options
    from kit.runner.options import parse_args, to_args

    base = ["--device", "cpu", "--suite", "lstm", "--skip-checks"]
    default = config_from_options(parse_args(base))
    assert default.profile_window is None and "--profile-window" not in to_args(parse_args(base))
    assert default.profiles("cuda:0") and default.profiles("cuda:3") and not default.profiles("cpu")
    on = parse_args(base + ["--profile-window"])
    assert config_from_options(on).profile_window is True and config_from_options(on).profiles("cpu")
    assert "--profile-window" in to_args(on)
    off = config_from_options(parse_args(base + ["--no-profile-window"]))
    assert off.profile_window is False and not off.profiles("cuda:0")
    assert config_from_options(parse_args(["--smoke", "--device", "cpu"])).profile_window is None
    assert config_from_options(parse_args(["--smoke", "--device", "cpu", "--profile-window"])).profile_window is True
    older = RunConfig.from_dict({"suite": "lstm"})  # recorded before the option: no window, on a GPU too
    assert older.profile_window is False and not older.profiles("cuda:0")
    assert RunConfig.from_dict(default.to_dict()).profile_window is None  # a run of today's default resumes as one


@pytest.mark.parametrize("on, steps", [(True, 5), (False, 0), (None, 0)])
def test_the_runner_gives_each_cell_the_windows_steps_from_the_runs_config(tmp_path, on, steps):
    from kit.results.journal import Journal
    from kit.runner import cell_run

    seen = []
    spec = CELLS["lstm/kit"]
    bench = SimpleNamespace(run_cell=lambda s, ctx: seen.append(ctx.profile_steps) or cell_run.CellResult.skipped(s, "test"))
    ui = SimpleNamespace(cell_start=lambda s: None, cell_progress=lambda *a: None)
    with Journal(tmp_path / "journal.jsonl") as journal:
        cell_run._run_one(bench, spec, RunConfig.of(suite="lstm", profile_window=on), "cpu", tmp_path, journal, ui)
    assert seen == [steps]


@pytest.mark.parametrize("cuda, env, runs", [("13.0", None, True), ("12.6", "1", True), ("12.4", None, False),
                                             (None, None, False), ("13.0", "0", False)])
def test_a_gpu_window_runs_only_where_the_profiler_will_release_cupti_after_it(monkeypatch, cuda, env, runs):
    import torch

    monkeypatch.setattr(torch.version, "cuda", cuda)
    if env is None:
        monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    else:
        monkeypatch.setenv("TEARDOWN_CUPTI", env)
    why = profile_window.not_profiled_reason("cuda:0")
    if runs:
        assert why is None and os.environ["TEARDOWN_CUPTI"] == "1"
    else:
        assert "CUPTI" in why and "slow the cells timed after it" in why
        assert os.environ.get("TEARDOWN_CUPTI") == env  # nothing asked of the profiler
    assert profile_window.not_profiled_reason("cpu") is None  # no CUPTI on the CPU


@pytest.mark.parametrize("batches, steps, warm", [(195, 5, 2), (6, 5, 1), (5, 5, 0)])
def test_the_fastai_window_starts_after_the_fresh_loaders_first_batches(batches, steps, warm):
    """Two unprofiled batches (the loader's workers starting), fewer where the epoch has no more: the
    window does not wait out the workers' prefetched queue (34 batches with 16 workers), which cost a
    second or more a window and bought nothing the ladder reads (it takes the timed step)."""
    from kit.bench.cifar import fastai_window

    assert fastai_window.warmup_batches(batches, steps) == warm


def test_the_fastai_windows_callback_profiles_the_batches_after_its_warm_up_and_ends_the_fit():
    pytest.importorskip("fastai")
    from fastai.callback.core import CancelFitException

    from kit.bench.cifar import fastai_window

    calls = []
    window = SimpleNamespace(start=lambda: calls.append("start"), stop=lambda: calls.append("stop") or {"steps": 3})
    cb = fastai_window._make_window_cls()(window, warm=2, steps=3)
    cb.learn = SimpleNamespace(training=True)
    cb.before_train()
    for batch in range(1, 6):
        if batch < 5:
            cb.after_batch()
        else:
            with pytest.raises(CancelFitException):
                cb.after_batch()
        calls.append(batch)
    # started when the second batch ended, stopped (and the fit ended) when the fifth did: batches 3-5 profiled
    assert calls == [1, "start", 2, 3, 4, "stop", 5] and cb.profile == {"steps": 3}


def test_a_gpu_window_traces_the_devices_activity_alone_and_says_so():
    """On a GPU the profile reads only the device's events, and tracing every CPU operator as well is
    what made host-bound windows run up to 90% longer than their timed steps on an H100
    (references/h100/explain/): the window traces the device's activity alone, and its source says what
    was traced."""
    from kit.bench import profile_window as pw

    assert pw.ACTIVITIES["cuda"] == ("CUDA",) and pw.ACTIVITIES["cpu"] == ("CPU",)
    assert pw.source(5) == "torch.profiler (CUDA activity), 5 steps after the timed repeats"
    assert pw.source(5, device="cpu").startswith("torch.profiler (CPU activity)")


def _raw(name, start_ns, end_ns, device="CUDA", annotation=False, hidden=False):
    """A record as the profiler's results hand it over (torch's _KinetoEvent: methods, nanoseconds)."""
    import torch

    kind = getattr(torch.autograd.DeviceType, device)
    return SimpleNamespace(name=lambda: name, device_type=lambda: kind, start_ns=lambda: start_ns,
                           end_ns=lambda: end_ns, is_user_annotation=lambda: annotation, is_hidden_event=lambda: hidden)


def test_a_gpu_window_leaves_the_annotations_mirrored_on_the_device_out_of_its_time():
    """The profiler mirrors a user annotation (the optimizer's ``Optimizer.step#SGD.step``) onto the
    device's timeline as an event of device type CUDA spanning kernels it already reports: counted, the
    optimizer's kernels would count twice and the busy time would cover the gaps between them. The host's
    records (the runtime's launch calls) and the events the profiler hides are not the device's work either."""
    from kit.bench import profile_window as pw

    records = [_raw("sm90_xmma_gemm_f16f16_f32", 0, 400_000), _raw("multi_tensor_apply_kernel", 600_000, 700_000),
               _raw("Optimizer.step#SGD.step", 500_000, 900_000, annotation=True),
               _raw("cudaLaunchKernel", 590_000, 595_000, device="CPU"), _raw("hidden", 0, 900_000, hidden=True)]
    prof = SimpleNamespace(profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: records,
                                                                                trace_start_ns=lambda: 0)))
    events = pw.device_events(prof)
    assert [n for n, _, _ in events] == ["sm90_xmma_gemm_f16f16_f32", "multi_tensor_apply_kernel"]
    profile = pw.Window("cuda:0", steps=1)._device_profile(events, wall=1e-3)
    assert profile["device_s"] == pytest.approx(500e-6)
    assert profile["busy_s"] == pytest.approx(500e-6)
    assert "Optimizer.step#SGD.step" not in {k["name"] for k in profile["largest_kernels"]}


def test_the_window_reads_the_profilers_own_records_as_its_event_list_gives_them():
    """The window reads the profiler's results as Kineto hands them over, not ``prof.events()`` (which
    builds the operators' event tree too, tens of microseconds an event): on a real profile (the CPU's
    operators here, the only records a CPU profile has) every event ``prof.events()`` lists is read with the
    same name and duration (the tree merges an operator into a parent of the same name; the raw records keep
    both), and a profiler without raw results is read through ``prof.events()``."""
    import collections

    import torch
    from torch.profiler import ProfilerActivity, profile

    from kit.bench import profile_window as pw

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            model(torch.randn(4, 8)).sum().backward()
    cpu = torch.autograd.DeviceType.CPU
    raw = pw._events_of(prof, cpu)
    listed = pw._events_of(SimpleNamespace(events=prof.events), cpu)
    assert len(listed) > 20 and {n for n, _, _ in raw} >= {n for n, _, _ in listed}  # it hides a few of them

    def by_name(events):
        out = collections.defaultdict(list)
        for n, a, b in events:
            out[n].append(b - a)
        return {n: sorted(d) for n, d in out.items()}

    raw_d, listed_d = by_name(raw), by_name(listed)
    for name, durations in listed_d.items():
        assert len(raw_d[name]) >= len(durations), name
        if len(raw_d[name]) == len(durations):  # no merged operator: the same durations, to the nanosecond
            assert raw_d[name] == pytest.approx(durations, abs=2e-9), name
    assert pw.device_events(prof) == []  # a CPU profile has no device events
