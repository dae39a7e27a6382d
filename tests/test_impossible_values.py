"""Values no run can produce (zero, negative, NaN, infinite times and rates, also as JSON's
NaN / Infinity tokens) in a bundle's results.json: `kit bundle verify` refuses the bundle with
exit 4, naming the field and the cell. The bundles are fixture data, crafted with a true
(re-hashed) manifest so only the schema can catch them."""

from __future__ import annotations

import json

import pytest

from fixtures.results.factory import bundle_members, make_env, make_results, make_run_dir, standard_cells, write_bundle
from kit.cli.main import main
from kit.errors import SchemaError
from kit.report.export import export_run
from kit.results.schema import RunResults


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    root = tmp_path_factory.mktemp("impossible")
    return bundle_members(export_run(make_run_dir(root / "runs", make_results(standard_cells(), make_env())), root / "out"))


def _craft(good, tmp_path, field, value_json):
    """results.json with cells[0].repeats[1].<field> replaced by the raw JSON ``value_json``."""
    res = json.loads(good["results.json"])
    marker = "__IMPOSSIBLE__"
    rep = res["cells"][0]["repeats"][1]
    if field == "epoch_seconds":
        rep[field][0] = marker
    else:
        rep[field] = marker
    text = json.dumps(res).replace(f'"{marker}"', value_json)
    return write_bundle(tmp_path / "crafted.tar.gz", dict(good, **{"results.json": text.encode()}))


@pytest.mark.parametrize("field", ["throughput_items_per_s", "epoch_seconds_median", "epoch_seconds"])
@pytest.mark.parametrize("value", ["-1", "0", "0.0", "-86.351", "NaN", "Infinity", "-Infinity", "1e999", "1" + "0" * 400])
def test_verify_refuses_a_time_or_rate_no_run_can_produce(good, tmp_path, capsys, field, value):
    bundle = _craft(good, tmp_path, field, value)
    with pytest.raises(SystemExit) as info:
        main(["bundle", "verify", str(bundle)])
    assert info.value.code == SchemaError.exit_code == 4
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"cells[0].repeats[1].{field}" in lines[0] and "cifar/resnet18/fp32/torch" in lines[0], lines[0]
    assert len(lines[0]) < 400  # an integer of 401 digits is named by its length, not printed


def test_a_summary_with_an_impossible_median_is_refused_too(good):
    res = json.loads(good["results.json"])
    res["cells"][0]["summary"]["throughput_items_per_s"]["median"] = -5.0
    with pytest.raises(SchemaError, match=r"summary\.throughput_items_per_s\.median"):
        RunResults.from_dict(res)


def test_null_still_means_not_measured_and_a_zero_spread_is_fine(good):
    res = json.loads(good["results.json"])
    res["cells"][0]["repeats"][1]["time_to_first_step_s"] = None
    res["cells"][0]["summary"]["throughput_items_per_s"]["stdev"] = 0.0
    res["cells"][0]["summary"]["throughput_items_per_s"]["cv"] = 0.0
    assert RunResults.from_dict(res).cells[0].repeats[1]["time_to_first_step_s"] is None


def test_the_untouched_bundle_verifies(good, tmp_path):
    bundle = write_bundle(tmp_path / "same.tar.gz", dict(good))
    try:
        main(["bundle", "verify", str(bundle)])
    except SystemExit as exc:
        assert exc.code in (0, None)
