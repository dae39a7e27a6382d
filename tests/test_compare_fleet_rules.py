"""The fleet doctor's rules at their edges, on SYNTHETIC fleets (invented numbers, built in memory):
a machine broken in a few cells is named with the cells; a healthy fleet names nobody; the unstable
rule's factor and floor; the driver as a candidate cause, and a fact the group splits on as none; a
single-repeat machine is never slow; two inputs of one run id with different environments stay two.
Every assertion compares small values (names, counts, lines), never fleet objects: a failing test on
a fleet of 250 machines must print a few lines, not the fleet."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from fixtures.fleet_grid import BROKEN, findings, fleet, machine
from kit.compare.engine import build_comparison
from kit.compare.fleet.grouped import summarise_fleet
from kit.compare.load import Source
from kit.results.stats import summarise_repeats

@pytest.fixture(scope="module")
def broken_in_three():
    """250 machines; synthetic-node042 at 0.6x its group in exactly three cells, each of another
    model, precision and engine (no facet holds half of them)."""
    slow = {cell: 0.6 for cell in BROKEN}
    cmp = build_comparison(fleet(250, m42={"slow_cells": slow}))
    return cmp, summarise_fleet(cmp, "gpu", 5.0)


def test_a_machine_broken_in_three_cells_is_named_with_the_cells(broken_in_three):
    _, summary = broken_in_three
    assert findings(summary) == [("synthetic-node042", "slow", "slow: 3 cells")]
    [f] = summary.findings
    assert f.pattern.facet == "cells" and f.pattern.flagged == 3 and round(f.figure) == 40
    for model, precision, engine in BROKEN:
        assert re.search(rf"cifar/{model}/{precision}/{engine} 0\.(5[89]|6[01])×", f.line), f.line
    assert f.line.startswith("synthetic-node042: slow in 3 cells, 40% below the other 249 NVIDIA H200 machines there")
    assert sorted(k[:4] for k in f.cell_keys) == sorted(("cifar",) + c for c in BROKEN)


def test_a_cell_above_the_floor_is_not_named_alone():
    """Three cells 10% below (significant, but above the 15% floor) name nobody; 20% below, they do."""
    slow10 = build_comparison(fleet(60, seed=4, m7={"slow_cells": {c: 0.9 for c in BROKEN}}))
    assert findings(summarise_fleet(slow10, "gpu", 5.0)) == []
    slow20 = build_comparison(fleet(60, seed=4, m7={"slow_cells": {c: 0.8 for c in BROKEN}}))
    assert findings(summarise_fleet(slow20, "gpu", 5.0)) == [("synthetic-node007", "slow", "slow: 3 cells")]


def test_one_hundred_fifty_healthy_machines_name_nobody():
    cmp = build_comparison(fleet(150, seed=7))
    assert findings(summarise_fleet(cmp, "gpu", 5.0)) == []


def test_a_noisy_machine_is_unstable_never_slow():
    cmp = build_comparison(fleet(150, seed=8, m5={"noise": 0.12}))
    assert findings(summarise_fleet(cmp, "gpu", 5.0)) == [("synthetic-node005", "unstable", "unstable")]


def test_a_single_repeat_machine_twenty_percent_slower_is_never_named_slow():
    """One repeat has no spread, so Welch's test gives no p-value: nothing says the 20% is more than noise."""
    cmp = build_comparison(fleet(40, seed=9, m3={"speed": 0.8, "repeats": 1}))
    summary = summarise_fleet(cmp, "gpu", 5.0)
    assert findings(summary) == []
    mine = [m.vs_rest for gc in summary.cells for m in gc.members if m.source.index == 3]
    assert len(mine) == 30 and all(e.p_value is None and e.ratio < 0.85 for e in mine)


# --- the unstable rule at its edges ---------------------------------------------------------------

def _cv_fleet(group_noise: float, mine: float, seed: int = 11):
    """30 machines whose repeats spread ``group_noise`` (each repeat a fixed multiplier, so each cell's
    CV is exactly that), one (node004) whose repeats spread ``mine``."""
    rng = random.Random(seed)
    return build_comparison([_jittered(i, rng, mine if i == 4 else group_noise) for i in range(30)])


def _jittered(i: int, rng: random.Random, cv: float) -> Source:
    """A machine whose three repeats are base x (1 - d, 1, 1 + d), d chosen so their CV (sample
    standard deviation / mean) is ``cv``: d = cv (the mean is 1, the deviations -d, 0, d)."""
    src = machine(i, rng, speed=rng.uniform(0.999, 1.001), noise=0.0)
    for c in src.results.cells:
        for rep, scale in zip(c.repeats, (1 - cv, 1.0, 1 + cv)):
            rep["throughput_items_per_s"] *= scale
            rep["epoch_seconds"] = [x / scale for x in rep["epoch_seconds"]]
            rep["epoch_seconds_median"] /= scale
        c.summary = summarise_repeats(c.repeats)
    return src


@pytest.mark.parametrize("group_cv, mine, unstable", [
    (0.01, 0.025, False),   # 2.5x the group's CV
    (0.01, 0.035, True),    # 3.5x
    (0.001, 0.005, False),  # 5x, but under the 2% floor
    (0.001, 0.021, True),   # over the floor and 3x
])
def test_the_unstable_rule_at_its_factor_and_its_floor(group_cv, mine, unstable):
    summary = summarise_fleet(_cv_fleet(group_cv, mine), "gpu", 5.0)
    assert findings(summary) == ([("synthetic-node004", "unstable", "unstable")] if unstable else [])


# --- candidate causes -----------------------------------------------------------------------------

def test_a_slow_machine_on_another_driver_gets_the_driver_as_a_candidate_cause():
    out = fleet(20, seed=12, m6={"speed": 0.8, "driver": "575.57.08"})
    summary = summarise_fleet(build_comparison(out), "gpu", 5.0)
    [f] = summary.findings
    assert (f.source.env.machine, f.kind) == ("synthetic-node006", "slow")
    assert [c.line for c in f.causes] == ["candidate cause: driver 575.57.08 vs the group's 580.159.04 (19 of 19)"]


def test_a_fact_split_half_and_half_in_the_group_is_no_cause():
    """The slow machine on driver 570; of the other twenty, ten on 575 and ten on 580: the group does
    not agree on a driver, so the slow machine's says nothing about it. Eleven against nine is a
    majority, and the slow machine's driver is then a candidate cause."""
    def drivers(n_575: int) -> dict:
        special = {f"m{i}": {"driver": "575.57.08" if i < n_575 else "580.159.04"} for i in range(21) if i != 15}
        special["m15"] = {"speed": 0.8, "driver": "570.86.10"}
        return special

    [f] = summarise_fleet(build_comparison(fleet(21, seed=13, **drivers(10))), "gpu", 5.0).findings
    assert (f.source.env.machine, f.causes) == ("synthetic-node015", ())
    [f] = summarise_fleet(build_comparison(fleet(21, seed=13, **drivers(11))), "gpu", 5.0).findings
    assert [c.line for c in f.causes] == ["candidate cause: driver 570.86.10 vs the group's 575.57.08 (11 of 20)"]


def test_a_slow_machine_that_measured_other_work_says_so_never_that_nothing_differs():
    """A machine slow because its cells ran another batch size on real data, in convergence mode:
    the finding names each as a candidate cause (a cell's setting with how many of the cells it shares
    with the group differ), not "nothing differs". A machine that differs in nothing still says that."""
    from kit.compare.fleet.causes import NO_CAUSE

    out = fleet(20, seed=15, m9={"speed": 0.7, "params": {"batch_size": 64}},
                m4={"speed": 0.7, "env_extra": {"data_source": "real"}})
    out[4].results.config.data = "real"
    out[4].results.config.mode = "convergence"
    summary = summarise_fleet(build_comparison(out), "gpu", 5.0)
    lines = {f.source.env.machine: f.lines for f in summary.findings}
    assert sorted(lines) == ["synthetic-node004", "synthetic-node009"]
    assert lines["synthetic-node009"][1:] == [
        "  candidate cause: batch size 64 vs the group's 256 (19 of 19) in 30 of 30 cells it shares with them "
        "(cifar/resnet18/fp32/torch first)"]
    assert lines["synthetic-node004"][1:] == [
        "  candidate cause: data real vs the group's synthetic (19 of 19)",
        "  candidate cause: mode convergence vs the group's throughput (19 of 19)"]
    [f] = summarise_fleet(build_comparison(fleet(20, seed=15, m9={"speed": 0.7})), "gpu", 5.0).findings
    assert f.lines[1:] == [f"  {NO_CAUSE}"]


def test_one_run_id_with_the_same_results_and_another_environment_is_two_inputs_and_a_warning():
    """Two bundles of run id X whose results.json are byte for byte the same but whose env.json differ
    (another torch): not a copy, so both stay, under the HIGH "same run" warning."""
    import copy

    from kit.bundle.envinfo import summarise_environment
    from kit.results.schema import RunResults

    a = machine(0, random.Random(14), run_id="SYNTHETIC-SAME-RUN")
    results = RunResults.from_dict(copy.deepcopy(a.results.to_dict()))
    env = dict(a.environment, torch="2.12.0")
    b = Source(1, "B", Path("copy-with-other-env.tar.gz"), "bundle", results, env,
               summarise_environment(env, results.config, results.cells), False)
    assert a.results.to_dict() == b.results.to_dict() and a.environment != b.environment
    cmp = build_comparison([a, b])
    assert [s.label for s in cmp.sources] == ["A", "B"] and cmp.counted_once == []
    same = [w.message for w in cmp.warnings if w.kind == "same run"]
    assert len(same) == 1 and "are the same run (run id SYNTHETIC-SAME-RUN)" in same[0]
    # the same bundle under two names (env.json the same too) is counted once
    c = Source(1, "B", Path("copy.tar.gz"), "bundle", RunResults.from_dict(copy.deepcopy(a.results.to_dict())),
               dict(a.environment), a.env, False)
    assert len(build_comparison([a, c, machine(2, random.Random(15))]).counted_once) == 1


# --- a failing fleet test prints little ----------------------------------------------------------

def test_the_fleet_objects_print_in_a_few_lines(broken_in_three):
    """pytest shows the operands of a failing comparison with repr(): a fleet's objects print short."""
    cmp, summary = broken_in_three
    for obj in (cmp, summary, cmp.sources[0], cmp.rows[0], summary.cells[0], summary.findings, summary.findings[0]):
        assert len(repr(obj)) < 2_000, type(obj).__name__
