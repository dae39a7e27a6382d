"""The versioned results schema and the append-only journal."""

from __future__ import annotations

import json

import pytest

from kit.errors import SchemaError, UsageError
from kit.results.journal import Journal, read_journal
from kit.results.schema import SCHEMA_VERSION, CellResult, RunConfig, RunResults, load_results
from kit.results.stats import Stats


def _results() -> RunResults:
    cell = CellResult("cifar", "resnet18", "fp32", "torch", "ok", params={"batch_size": 256},
                      repeats=[{"throughput_items_per_s": 10.0}], throughput_unit="images")
    return RunResults(run_id="r1", config=RunConfig(data="synthetic"), cells=[cell], status="complete")


def test_results_round_trip_through_json(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_results().to_dict()))
    back = load_results(path)
    assert back.cells[0].cell_id == "cifar/resnet18/fp32/torch"
    assert back.config.data == "synthetic"
    assert back.schema_version == SCHEMA_VERSION


@pytest.mark.parametrize("version, words", [(SCHEMA_VERSION + 1, "newer"), (0, "older"), ("x", "no valid schema_version")])
def test_other_schema_versions_get_a_clear_message(tmp_path, version, words):
    d = _results().to_dict()
    d["schema_version"] = version
    path = tmp_path / "results.json"
    path.write_text(json.dumps(d))
    with pytest.raises(SchemaError, match=words):
        load_results(path)


def test_malformed_results_are_reported_not_crashed_on(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("{not json")
    with pytest.raises(SchemaError, match="not valid JSON"):
        load_results(path)
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION}))
    with pytest.raises(SchemaError, match="malformed"):
        load_results(path)


def test_config_rejects_nonsense():
    with pytest.raises(UsageError, match="unknown model"):
        RunConfig(models=["resnet9"])
    with pytest.raises(UsageError, match="repeats"):
        RunConfig(repeats=0)
    with pytest.raises(UsageError, match="image-size"):
        RunConfig(image_size=33)


def test_journal_lines_have_a_fixed_key_order_and_survive_reopen(tmp_path):
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.write("run_start", run_id="r")
        j.write("cell_end", "c1", result={"status": "ok"})
    with Journal(path) as j:
        j.write("run_end", status="complete")
    events = list(read_journal(path))
    assert [e["seq"] for e in events] == [0, 1, 2]
    for line in path.read_text().splitlines():
        assert list(json.loads(line))[:4] == ["seq", "time", "event", "cell_id"]


def test_step_lines_are_rate_limited_but_epoch_lines_never_are(tmp_path):
    path = tmp_path / "journal.jsonl"
    with Journal(path, step_interval_s=3600) as j:
        for i in range(100):
            j.write("step", "c", step=i)
        for e in range(3):
            j.write("epoch", "c", epoch=e)
    events = [e["event"] for e in read_journal(path)]
    assert events.count("step") == 1
    assert events.count("epoch") == 3


def test_a_garbled_line_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text('{"seq":0,"event":"a"}\nGARBAGE\n{"seq":2,"event":"b"}\n')
    with pytest.raises(SchemaError, match="line 2"):
        list(read_journal(path))


def test_stats_of_repeats():
    s = Stats.of([1.0, 2.0, 3.0, 10.0])
    assert s.median == 2.5 and s.min == 1.0 and s.max == 10.0 and s.n == 4
    assert s.noisy
    assert Stats.of([]) is None
    assert Stats.of([5.0]).cv == 0.0
