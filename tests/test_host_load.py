"""A run slowed by a busy host: the runner records the host's load average and CPU steal
around each cell, a record past the thresholds says "busy", and `kit compare` warns about it
before it puts a gap down to a different image stack. Records and bundles are crafted fixtures;
nothing here is timed."""

from __future__ import annotations

from fixtures.results.factory import make_env, make_results, make_run_dir, standard_cells
from kit.compare.engine import compare_paths
from kit.env import hostload
from kit.report.export import export_run
from kit.results.schema import load_results
from kit.runner.execute import execute
from test_runner_resume import _config, fake_bench  # noqa: F401  (the fixture)

STAT_BEFORE = "cpu  1000 0 500 8000 100 0 0 400 0 0\ncpu0 500 0 250 4000 50 0 0 200 0 0\n"
STAT_AFTER = "cpu  1600 0 700 8800 100 0 0 800 0 0\n"


def test_steal_is_read_from_proc_stat():
    before, after = hostload.cpu_times(STAT_BEFORE), hostload.cpu_times(STAT_AFTER)
    assert before == (10000, 400) and after == (12000, 800)
    assert hostload.steal_pct(before, after) == 20.0
    assert hostload.cpu_times("intr 1 2 3\n") is None and hostload.steal_pct(None, after) is None


def test_busy_is_a_load_past_the_cores_or_steal_past_the_threshold():
    quiet = {"cores": 2, "load_1m_start": 1.2, "load_1m_end": 2.1, "steal_pct": 0.3}
    assert hostload.busy_reason(quiet) is None
    assert hostload.busy_reason(dict(quiet, load_1m_end=6.4)) == "load average 6.4 on 2 cores"
    assert hostload.busy_reason(dict(quiet, steal_pct=12.0)) == "CPU steal 12%"
    assert hostload.busy_reason({"cores": "2", "load_1m_end": "9"}) is None  # a stranger's record: numbers only
    assert hostload.busy_reason(None) is None


def test_the_runner_records_the_host_around_every_cell(tmp_path, fake_bench):
    fake_bench()
    out = execute(_config(), tmp_path, make_bundle=False)
    cells = load_results(out.run_dir / "results.json").cells
    assert cells and all(isinstance(c.host, dict) and c.host["cores"] and "busy" in c.host for c in cells)
    assert "load_1m" in out.results.environment["host_load"]


def _bundle(tmp_path, name, env, host=None, speed=1.0):
    res = make_results(standard_cells(speed=speed), env, run_id=f"FIXTURE-{name}")
    for cell in res["cells"]:
        cell["host"] = host
    return export_run(make_run_dir(tmp_path / name, res), tmp_path / "out")


def test_compare_says_the_host_was_busy_before_blaming_the_image_stack(tmp_path):
    busy = {"cores": 2, "load_1m_start": 5.9, "load_1m_end": 6.4, "steal_pct": 0.0, "busy": "load average 6.4 on 2 cores"}
    a = _bundle(tmp_path, "a", make_env(stack="cuda12"))
    b = _bundle(tmp_path, "b", make_env(host="fixture-host-b", stack="cpu"), host=busy, speed=0.12)
    warnings = compare_paths([a, b]).warnings
    kinds = [w.kind for w in warnings]
    assert "busy" in kinds and kinds.index("busy") < kinds.index("stack"), kinds
    busy_warning = warnings[kinds.index("busy")]
    assert busy_warning.severity == "high"
    assert busy_warning.message.startswith("B: the host was busy during 6 cell(s)")
    assert "load average 6.4 on 2 cores" in busy_warning.message and "not the machine" in busy_warning.message


def test_a_quiet_host_adds_no_warning(tmp_path):
    quiet = {"cores": 2, "load_1m_start": 1.0, "load_1m_end": 1.1, "steal_pct": 0.0, "busy": None}
    a = _bundle(tmp_path, "a", make_env(), host=quiet)
    b = _bundle(tmp_path, "b", make_env(host="fixture-host-b"), host=quiet)
    assert "busy" not in [w.kind for w in compare_paths([a, b]).warnings]
