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
    return RunResults(run_id="r1", config=RunConfig.of(data="synthetic"), cells=[cell], status="complete")


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
        RunConfig.of(models=["resnet9"])
    with pytest.raises(UsageError, match="repeats"):
        RunConfig.of(repeats=0)
    with pytest.raises(UsageError, match="image-size"):
        RunConfig.of(image_size=33)


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


# --- wrong types anywhere are a SchemaError with the JSON path, from load, verify and show -----------

import copy  # noqa: E402
import io  # noqa: E402

from fixtures.results.factory import (  # noqa: E402
    write_bundle,
    make_cell,
    make_env,
    make_results,
)

#: One value of each JSON type, put in place of a field in turn.
WRONG = {"string": "oops", "list": [], "null": None, "number": 7, "object": {}, "boolean": True}


def _valid_results() -> dict:
    """A results object with every optional field set (so null is a change of type too)."""
    cells = [make_cell("resnet18", "fp32", epoch_s=[10.0, 10.1], data_wait_frac=0.2, util_pct=90.0),
             make_cell("resnet18", "amp-fp16", epoch_s=[6.0, 6.1], energy_j_per_epoch=100.0),
             make_cell("resnet18", "apex-o1", status="skipped", reason="Apex is not installed [fixture]")]
    d = make_results(cells, make_env())
    d["config"].update(steps=60, batch_size=256, tolerance=0.05, gpus=2, global_batch_size=512, profile_window=True)
    d["config"]["suite_options"]["cifar"].update(models=["resnet18"], epochs=1, batch_sizes=[256, 512],
                                                 static_loss_scale=128.0, dynamic_loss_scale=False)
    for c in d["cells"]:
        c["started_at"], c["finished_at"] = 1735732800.0, 1735732900.0
    d["cells"][0]["reason"] = "fixture note"
    for c in d["cells"][:2]:  # how they were measured (kit.results.method): an object, or null
        c["method"] = {"engine": "cifar/torch", "revision": 6, "settings": {"step": "eager", "batch_size": 256},
                       "details": {"inductor": "off (fixture)"}}
    d["derived"] = {"performance_ratios": []}
    return d


#: Fields the schema allows to be null (optional in the dataclasses; measured numbers that may be missing).
NULLABLE = {"started_at", "finished_at", "config.steps", "config.batch_size", "config.suite_options.cifar.models",
            "config.suite_options.cifar.epochs", "config.suite_options.cifar.batch_sizes",
            "config.suite_options.cifar.static_loss_scale", "config.suite_options.cifar.dynamic_loss_scale",
            "config.tolerance", "config.gpus", "config.global_batch_size", "cells[0].reason", "cells[0].telemetry", "cells[0].started_at", "cells[0].finished_at",
            "cells[0].host", "cells[0].method", "config.profile_window"}


def _nullable(path: str) -> bool:
    from kit.results.schema_rules import REPEAT_NUMBERS, STATS_NUMBERS

    last = path.rsplit(".", 1)[-1]
    if ".repeats[0]." in path:
        return last in REPEAT_NUMBERS or last == "energy_j_per_epoch"
    if ".summary." in path:
        return last in STATS_NUMBERS
    if ".params." in path:
        return True
    return path in NULLABLE


def _typed_paths(d: dict) -> list[str]:
    """Every field the schema gives a type: the run's, the config's, the first cell's,
    its first repeat's measured numbers and its summary statistics."""
    from kit.results.schema_rules import (PARAM_INTEGERS, REPEAT_NUMBER_LISTS, REPEAT_NUMBER_OR_LISTS, REPEAT_NUMBERS,
                                          STATS_NUMBERS)

    cell = d["cells"][0]
    paths = [k for k in d] + [f"config.{k}" for k in d["config"]] + [f"cells[0].{k}" for k in cell if k != "cell_id"]
    # each suite's own options: typed by its options class (kit.results.option_fields)
    own = d["config"]["suite_options"]
    paths += [f"config.suite_options.{suite}" for suite in own]
    paths += [f"config.suite_options.{suite}.{k}" for suite in own for k in own[suite]]
    paths += [f"cells[0].repeats[0].{k}" for k in cell["repeats"][0] if k in REPEAT_NUMBERS + REPEAT_NUMBER_LISTS + REPEAT_NUMBER_OR_LISTS]
    paths += [f"cells[0].params.{k}" for k in cell["params"] if k in PARAM_INTEGERS]
    metric = next(iter(cell["summary"]))
    paths += [f"cells[0].summary.{metric}.{k}" for k in ("n",) + STATS_NUMBERS]
    paths += ["cells[0].repeats[0]", "cells[0].summary." + metric, "cells[0]", "cells[0].notes[0]",
              "config.suite_options.cifar.models[0]" if own["cifar"]["models"] else "config.command_line[0]"]
    return paths


#: Free-form places (no type in the schema): any value must load or be refused cleanly, never crash.
FREE_FORM = ["environment.gpus", "environment.gpus[0]", "environment.gpus[0].name", "environment.hostname",
             "environment.driver", "environment.stack", "environment.torch", "cells[0].params.batch_size",
             "cells[0].params", "cells[0].telemetry.throttled", "cells[0].telemetry.util_mean_pct",
             "cells[0].telemetry.energy_j", "cells[0].data.source", "cells[0].repeats[0].metrics",
             "derived.performance_ratios", "cells[1].reason", "cells[0].method.revision", "cells[0].method.settings",
             "cells[0].method.engine", "cells[0].method.settings.step"]


def _steps(path: str) -> list:
    out: list = []
    for part in path.split("."):
        name, _, rest = part.partition("[")
        out.append(name)
        while rest:
            idx, _, rest = rest.partition("]")
            out.append(int(idx))
            rest = rest.lstrip("[")
    return out


def _replaced(d: dict, path: str, value) -> dict:
    d = copy.deepcopy(d)
    *parents, last = _steps(path)
    obj = d
    for step in parents:
        obj = obj[step]
    obj[last] = value
    return d


def _get(d: dict, path: str):
    obj = d
    for step in _steps(path):
        obj = obj[step]
    return obj


def _json_type(v) -> str:
    return next(k for k, w in WRONG.items() if type(w) is type(v) or (k == "number" and type(v) is float))


@pytest.fixture(scope="module")
def bundle_files() -> dict[str, bytes]:
    """The members of a minimal bundle (manifest, results, env); results.json is replaced per case."""
    manifest = {"bundle_format": 1, "schema_version": SCHEMA_VERSION, "kit_version": "0.1.0", "files": {}}
    return {"manifest.json": json.dumps(manifest).encode(), "env.json": json.dumps(make_env()).encode()}


def _bundle_with(files: dict[str, bytes], results: dict, path) -> str:
    return str(write_bundle(path, dict(files, **{"results.json": json.dumps(results).encode()})))


def _outcomes(results: dict, tmp_path, files) -> tuple[str, int, int]:
    """(load: "ok"/"schema"), and the exit codes of `kit bundle verify` and `kit bundle show`
    (both open the bundle first, then print). Any exception but SchemaError escapes the test."""
    from rich.console import Console

    from kit.bundle.safe_open import open_bundle
    from kit.report.show import print_show, verify_lines

    p = tmp_path / "results.json"
    p.write_text(json.dumps(results))
    try:
        load_results(p)
        loaded = "ok"
    except SchemaError as exc:
        assert "\n" not in exc.message and ("malformed" in exc.message or "schema" in exc.message), exc.message
        loaded = "schema"
    try:
        bundle = open_bundle(_bundle_with(files, results, tmp_path / "b.tar.gz"))
    except SchemaError as exc:
        assert exc.exit_code == 4
        return loaded, 4, 4
    verify_lines(bundle)
    print_show(bundle, Console(file=io.StringIO(), width=200))
    return loaded, 0, 0


@pytest.mark.parametrize("path", _typed_paths(_valid_results()))
def test_a_field_of_the_wrong_type_is_a_schema_error_from_load_verify_and_show(path, tmp_path, bundle_files):
    valid = _valid_results()
    original = _get(valid, path)
    for kind, value in WRONG.items():
        wrong_type = _json_type(original) != kind and not (value is None and _nullable(path))
        if path.endswith(".energy_j_per_epoch") and kind in ("number", "list"):
            wrong_type = False  # a number, or one per epoch
        loaded, verify, show = _outcomes(_replaced(valid, path, value), tmp_path, bundle_files)
        if wrong_type:
            assert (loaded, verify, show) == ("schema", 4, 4), (path, kind)
        else:  # the same type (or an allowed null): it loads, or a bad value is refused cleanly
            assert (loaded, verify, show) in (("ok", 0, 0), ("schema", 4, 4)), (path, kind)


@pytest.mark.parametrize("path", FREE_FORM)
def test_free_form_fields_of_any_type_never_crash_verify_or_show(path, tmp_path, bundle_files):
    for kind, value in WRONG.items():
        loaded, verify, show = _outcomes(_replaced(_valid_results(), path, value), tmp_path, bundle_files)
        assert (loaded, verify, show) in (("ok", 0, 0), ("schema", 4, 4)), (path, kind)


def test_cells_oops_names_the_path(tmp_path):
    d = _valid_results()
    d["cells"] = "oops"
    (tmp_path / "r.json").write_text(json.dumps(d))
    with pytest.raises(SchemaError, match=r"malformed results at cells: expected a list of objects, found a string"):
        load_results(tmp_path / "r.json")
    d["cells"] = [_valid_results()["cells"][0], "oops"]
    (tmp_path / "r.json").write_text(json.dumps(d))
    with pytest.raises(SchemaError, match=r"at cells\[1\]: expected an object, found a string"):
        load_results(tmp_path / "r.json")
    d = _replaced(_valid_results(), "cells[0].repeats[1].throughput_items_per_s", "fast")
    (tmp_path / "r.json").write_text(json.dumps(d))
    with pytest.raises(SchemaError, match=r"at cells\[0\]\.repeats\[1\]\.throughput_items_per_s: expected a number"):
        load_results(tmp_path / "r.json")


def test_an_unknown_model_in_a_results_file_is_a_schema_error_not_a_usage_error(tmp_path):
    d = _replaced(_valid_results(), "config.suite_options.cifar.models", ["resnet9"])
    (tmp_path / "r.json").write_text(json.dumps(d))
    with pytest.raises(SchemaError, match=r"at config: unknown model 'resnet9'"):
        load_results(tmp_path / "r.json")
