"""The fleet doctor on SYNTHETIC fleets (invented numbers, made by scripts/bench_fleet_compare.py):
200 machines of the full 156-cell suite, two GPU models, four of them faulty in different ways; the
same fleet healthy; and small fleets for the threshold. Findings must hold up under many cells (the
false-discovery rate controlled over a machine's cells, a stated share of cells), say where the
slowdown sits and what differs in the machine's environment, and keep a noisy machine apart from a
slow one."""

from __future__ import annotations

import io
import json
import random
import re

import pytest
from rich.console import Console

from fixtures.cli import run_main
from fixtures.fleet import source
from fixtures.modules import load_script
from fixtures.results.factory import make_env, make_results, make_run_dir
from kit.compare import render
from kit.compare.engine import build_comparison
from kit.compare.fleet.grouped import View, narrow_cells, summarise_fleet
from kit.compare.fleet.findings import bh_adjusted, bh_reject
from kit.report.export import export_run

bench = load_script("bench_fleet_compare", register=True)


@pytest.fixture(scope="module")
def doctor():
    """The done-when fleet: 120 H200s and 80 H100s of the full suite; node011 20% slower everywhere,
    node022 20% slower in amp-fp16 only, node033 noisy, node044 power-capped at 500 W."""
    cmp = build_comparison(bench.suite_sources(bench.doctor_fleet(200)))
    return cmp, summarise_fleet(cmp, "gpu", 5.0)


@pytest.fixture(scope="module")
def healthy():
    cmp = build_comparison(bench.suite_sources(bench.doctor_fleet(200, seed=1, healthy=True), seed=1))
    return cmp, summarise_fleet(cmp, "gpu", 5.0)


def _by_machine(summary):
    return {(f.source.env.machine, f.kind): f for f in summary.findings}


def test_the_doctor_fleet_names_exactly_three_machines_slow_each_with_where_and_why(doctor):
    cmp, summary = doctor
    assert len(cmp.sources) == 200 and len(cmp.rows) == 131
    assert sorted(f.source.env.machine for f in summary.slow) == [
        "synthetic-node011", "synthetic-node022", "synthetic-node044"]
    found = _by_machine(summary)
    everywhere = found["synthetic-node011", "slow"]
    assert everywhere.pattern.everywhere and everywhere.pattern.flagged == 131 and round(everywhere.figure) == 20
    assert everywhere.line == ("synthetic-node011: 20% below the other 119 NVIDIA H200 machines: everywhere, "
                               "131 of 131 cells")
    fp16 = found["synthetic-node022", "slow"]
    assert (fp16.pattern.facet, fp16.pattern.values, fp16.pattern.flagged, fp16.pattern.cells) == (
        "precision", ("amp-fp16",), 36, 36)
    assert fp16.pattern.elsewhere == 0 and fp16.pattern.others_within_pct < 2.0
    assert "amp-fp16 only, 36 of 36 amp-fp16 cells; every other precision within 2%" in fp16.line
    capped = found["synthetic-node044", "slow"]
    assert [c.line for c in capped.causes] == ["candidate cause: power limit 500 W vs the group's 700 W (119 of 119)"]
    # the cap slows the GPU-paced cells; the host-paced ones (fastai, the LSTM) keep their pace
    assert capped.pattern.facet == "pacing" and capped.pattern.values == ("GPU-paced",)
    assert "host-paced cells within 1%" in capped.line
    assert not everywhere.causes and not fp16.causes


def test_the_noisy_machine_is_unstable_not_slow_though_single_cells_pass_p_005(doctor):
    _, summary = doctor
    assert [f.source.env.machine for f in summary.findings if f.kind == "unstable"] == ["synthetic-node033"]
    unstable = _by_machine(summary)["synthetic-node033", "unstable"]
    assert unstable.figure > 3 * unstable.group_figure and unstable.pattern.flagged >= 100
    assert re.match(r"synthetic-node033: unstable: its repeats spread \d+\.\d% \(median CV\) against the group's "
                    r"\d\.\d%, everywhere, \d+ of 131 cells$", unstable.line)
    # what a rule testing each cell on its own would have named: cells significantly more than 5% below
    noisy = [m.vs_rest for gc in summary.cells for m in gc.members if m.source.env.machine == "synthetic-node033"]
    assert sum(1 for e in noisy if e.significant and e.ratio < 0.95) >= 2


def test_two_hundred_healthy_machines_with_normal_noise_name_none(healthy):
    cmp, summary = healthy
    assert len(cmp.sources) == 200 and summary.findings == []
    out = io.StringIO()
    render.print_rich(cmp, Console(file=out, width=160, color_system=None), False, View(group_by="gpu"))
    assert "No machine is slow (more than 5% below the rest of its group, consistently) or unstable." in out.getvalue()


def test_the_summary_leads_one_row_per_machine_and_the_per_cell_tables_wait_for_cells_or_verbose(doctor):
    cmp, _ = doctor
    buf = io.StringIO()
    render.print_rich(cmp, Console(file=buf, width=160, color_system=None), False, View(group_by="gpu"))
    out = buf.getvalue()
    assert "One table per cell" not in out and "--cells PATTERN or --verbose" in out
    h200 = out[out.index("gpu NVIDIA H200: 120 NVIDIA H200 machines"):out.index("gpu NVIDIA H100: 80")]
    rows = [ln for ln in h200.splitlines() if re.match(r"^\s+\d+\s+[A-Z]+ synthetic-node\d{3}\s", ln)]
    assert len(rows) == 120  # one row per machine, nothing folded at 160 columns
    assert re.search(r"\bfp32\b.*\btf32\b.*\bamp-fp16\b.*\bamp-bf16\b.*\bfp16-master\b.*\bCV\b.*\bfinding\b", h200)
    # the machines with findings first, slow before unstable; the amp-fp16 machine's amp-fp16 column
    assert [re.search(r"synthetic-node\d{3}", ln).group(0) for ln in rows[:4]] == [
        "synthetic-node011", "synthetic-node044", "synthetic-node022", "synthetic-node033"]
    fp16 = rows[2].split()
    assert fp16[-2:-1] != [] and "slow: amp-fp16 only" in rows[2] and re.match(r"0\.8\d\d×", fp16[6])
    assert len(out.splitlines()) < 700  # 200 machines, not 27,845 lines
    # --cells narrows the comparison (the findings too: here one cell) and shows its tables
    narrowed = io.StringIO()
    view = View(group_by="gpu", cells="cifar/resnet50/amp-fp16/torch")
    render.print_rich(narrow_cells(cmp, view.cells), Console(file=narrowed, width=160, color_system=None), False, view)
    assert "One table per cell" in narrowed.getvalue() and narrowed.getvalue().count(", outlier") == 3


def test_the_summary_by_suite_and_in_markdown_and_json(doctor):
    cmp, _ = doctor
    md = render.to_markdown(cmp, False, View(group_by="gpu", by="suite"))
    assert "| # | machine | all | cifar | lstm | CV | finding | worst cell |" in md
    assert "### gpu NVIDIA H200: 120 NVIDIA H200 machines" in md and "- synthetic-node022: 19% below" in md
    assert "  - candidate cause: power limit 500 W vs the group's 700 W (119 of 119)" in md
    data = json.loads(render.to_json(cmp, View(group_by="gpu")))
    first = data["fleet"]["summary"][0]["machines"][0]
    assert first["machine"] == "synthetic-node011" and first["findings"] == ["slow: everywhere"]
    kinds = sorted((f["machine"], f["kind"]) for f in data["fleet"]["findings"])
    assert kinds == [("synthetic-node011", "slow"), ("synthetic-node022", "slow"), ("synthetic-node033", "unstable"),
                     ("synthetic-node044", "slow")]


def test_the_fleet_page_leads_with_a_heatmap_per_group_and_outlines_the_slow_cells(doctor):
    from kit.report.html.compare import render_compare_page

    cmp, _ = doctor
    page = render_compare_page(cmp, View(group_by="gpu"))
    assert len(page.encode()) <= 2_000_000 and "<script" not in page
    assert page.count('class="chart heatmap"') == 2 and 'class="chart ranked"' not in page
    # node011: its five precisions; node022: amp-fp16; node044: every precision with a GPU-paced cell (five)
    assert page.count('class="outlier"') == 5 + 1 + 5
    assert "candidate cause: power limit 500 W vs the group&#x27;s 700 W (119 of 119)" in page


# --- the threshold -------------------------------------------------------------------------------------

def _small(slow: dict[int, float], n: int = 30, seed: int = 3):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        jitter = tuple(1.0 + rng.gauss(0.0, 0.005) for _ in range(3))
        out.append(source(i, f"node{i:03d}", slow.get(i, 1.0) * (1.0 + rng.uniform(-0.005, 0.005)), jitter=jitter))
    return build_comparison(out)


def test_a_slowdown_between_the_threshold_and_twice_it_is_named_at_the_threshold_and_not_at_twice():
    cmp = _small({7: 1 / 1.08})  # about 7.4% slower: above 5, under 10
    at5 = summarise_fleet(cmp, "gpu", 5.0)
    assert [f.source.env.machine for f in at5.slow] == ["node007"] and 5.0 < at5.slow[0].figure < 10.0
    assert summarise_fleet(cmp, "gpu", 10.0).slow == []  # doubling the threshold changes the outcome
    # a slowdown under the threshold is never named, however significant
    assert summarise_fleet(_small({7: 1 / 1.03}), "gpu", 5.0).slow == []


def test_benjamini_hochberg_is_scipys():
    stats = pytest.importorskip("scipy.stats")
    if not hasattr(stats, "false_discovery_control"):
        pytest.skip("scipy < 1.11 has no false_discovery_control")
    rng = random.Random(5)
    for m in (1, 2, 7, 131):
        ps = [rng.random() ** 3 for _ in range(m)] + [0.01, 0.01, 1.0]
        assert bh_adjusted(ps) == pytest.approx(list(stats.false_discovery_control(ps)), rel=1e-12)
    # 131 cells of which 7 pass p < 0.05 by chance: none survives the false-discovery rate
    chance = [0.01, 0.02, 0.02, 0.03, 0.04, 0.045, 0.049] + [0.05 + 0.95 * k / 124 for k in range(124)]
    assert not any(bh_reject(chance))
    assert sum(bh_reject([1e-6] * 36 + [0.5] * 95)) == 36


# --- through the command line -----------------------------------------------------------------------

def test_kit_compare_group_by_names_the_capped_machine_and_its_power_limit(tmp_path, capsys, monkeypatch):
    """Eight bundles (the kit's own export), fixture-node003 power-capped (450 W), its application clock
    held at 1,410 MHz, and 15% slower."""
    from fixtures.fleet import machine_cells

    paths = []
    for i in range(8):
        env = make_env(host=f"fixture-node{i:03d}", gpu="NVIDIA H200")
        clocks = {"sm": 1980, "max_sm": 1980, "applications_sm": 1410 if i == 3 else 1980}
        env["nvml"] = {"available": True, "gpus": [{"name": "NVIDIA H200", "power_limit_w": 450.0 if i == 3 else 700.0,
                                                    "clocks_mhz": clocks}]}
        jitter = (1.0, 1.004 + 0.001 * i, 0.996 - 0.001 * i)
        res = make_results(machine_cells(0.85 if i == 3 else 1.0 + 0.002 * (i % 3), jitter), env, run_id=f"FIXTURE-CAP-{i}")
        paths.append(str(export_run(make_run_dir(tmp_path / "runs", res), tmp_path / "b")))
    code, out, err = run_main(["compare", *paths, "--group-by", "gpu"], capsys, monkeypatch)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "fixture-node003: 15% below the other 7 NVIDIA H200 machines: everywhere, 6 of 6 cells" in flat
    assert "candidate cause: power limit 450 W vs the group's 700 W (7 of 7)" in flat
    assert "candidate cause: SM clock applications are held to 1,410 MHz vs the group's 1,980 MHz (7 of 7)" in flat
    assert "maximum SM clock" not in flat  # the same on every machine: no cause
    assert "Benjamini-Hochberg" in flat and "One table per cell" not in out
    code, out, err = run_main(["compare", *paths, "--group-by", "gpu", "--outlier-pct", "30"], capsys, monkeypatch)
    assert code == 0 and "No machine is slow (more than 30% below" in " ".join(out.split())
    code, out, err = run_main(["compare", *paths, "--group-by", "gpu", "--by", "rack"], capsys, monkeypatch)
    assert code == 2 and "--by 'rack': choose one of precision, suite." in err and "Traceback" not in err


def test_the_rest_of_a_group_is_the_pooled_values_less_the_machines_own():
    """kit.compare.stats.rest_samples gives, for each member, the Sample of every other member's
    values: the same count, median, min and max, and the same mean and spread to the last digits."""
    from kit.compare.stats import Sample, rest_samples

    rng = random.Random(1)
    for trial in range(200):
        vals = [[round(rng.gauss(1e5, 1e3), rng.choice([0, 6])) for _ in range(rng.choice([1, 2, 3, 3, 5]))]
                for _ in range(rng.randint(2, 9))]
        if trial % 7 == 0:
            vals[0] = list(vals[1])  # equal values in the pool
        for i, got in enumerate(rest_samples(vals)):
            want = Sample.of_floats([x for j, v in enumerate(vals) if j != i for x in v])
            assert (got.n, got.median, got.min, got.max) == (want.n, want.median, want.min, want.max)
            assert got.mean == pytest.approx(want.mean, rel=1e-12) and got.sd == pytest.approx(want.sd, rel=1e-6, abs=1e-6)
    assert rest_samples([[1.0, 1.0], [1.0]])[0] == Sample(1, 1.0, 0.0, 1.0, 1.0, 1.0)


def _one_model_slow(spread: float):
    """30 machines of six cells; node009 8% slower in its three resnet50 cells, whose repeats spread
    ``spread`` either side (the others' 0.3%)."""
    from pathlib import Path

    from fixtures.results.factory import make_cell
    from kit.bundle.envinfo import summarise_environment
    from kit.compare.load import Source, _label
    from kit.results.schema import RunResults

    def cells(speed, jitter, slow50=1.0):
        return [make_cell(model, p, epoch_s=[(10.0 + 5 * i) / (1.0 + 0.6 * j) / speed / (slow50 if i else 1.0) * x
                                             for x in jitter[model]])
                for i, model in enumerate(("resnet18", "resnet50")) for j, p in enumerate(("fp32", "amp-fp16", "amp-bf16"))]

    rng = random.Random(2)
    sources = []
    for i in range(30):
        if i == 9:
            cs = cells(1.0, {"resnet18": (1.0, 1.003, 0.997), "resnet50": (1.0, 1 + spread, 1 - spread)}, 0.92)
        else:
            j = tuple(1 + rng.uniform(-0.003, 0.003) for _ in range(3))
            cs = cells(1 + rng.uniform(-0.003, 0.003), {"resnet18": j, "resnet50": j})
        res = RunResults.from_dict(make_results(cs, make_env(host=f"node{i:03d}", gpu="NVIDIA H200"), run_id=f"FIXTURE-BH-{i}"))
        sources.append(Source(i, _label(i), Path(f"node{i:03d}.tar.gz"), "bundle", res, res.environment,
                              summarise_environment(res.environment, res.config, res.cells), False))
    return build_comparison(sources)


def test_the_false_discovery_rate_decides_between_three_cells_at_p_002_and_at_p_004(monkeypatch):
    """node009's resnet50 cells are 8% below the rest. At p = 0.017 each, they survive
    Benjamini-Hochberg over its six cells and name it, "resnet50 only"; at p = 0.038 each (wider
    repeats) every one passes p < 0.05 alone, but not the false-discovery rate: not named slow."""
    from kit.compare.fleet import findings as fleet_findings

    clear = summarise_fleet(_one_model_slow(0.02), "gpu", 5.0)
    [slow] = clear.slow
    assert slow.source.env.machine == "node009" and slow.pattern.values == ("resnet50",)
    assert "resnet50 only, 3 of 3 resnet50 cells; resnet18 cells within 1%" in slow.line
    marginal = _one_model_slow(0.03)
    cells = [m.vs_rest for gc in summarise_fleet(marginal, "gpu", 5.0).cells for m in gc.members
             if m.source.env.machine == "node009" and gc.row.model == "resnet50"]
    assert len(cells) == 3 and all(0.025 < e.p_value < 0.05 and e.ratio < 0.95 for e in cells)
    assert summarise_fleet(marginal, "gpu", 5.0).slow == []
    # each cell tested on its own (no false-discovery control) would name it
    monkeypatch.setattr(fleet_findings, "bh_reject", lambda ps: [p < 0.05 for p in ps])
    assert [f.source.env.machine for f in summarise_fleet(marginal, "gpu", 5.0).slow] == ["node009"]
