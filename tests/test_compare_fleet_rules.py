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

from kit.bundle.envinfo import summarise_environment
from kit.compare.engine import build_comparison
from kit.compare.fleet import summarise_fleet
from kit.compare.load import Source, _label
from kit.results.schema import CellResult, RunConfig, RunResults
from kit.results.stats import summarise_repeats

SYNTHETIC = "synthetic: invented numbers for a test of the fleet doctor, not a measurement"
MODELS = ("resnet18", "resnet34", "resnet50")
PRECISIONS = ("fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-master")
ENGINES = ("torch", "fastai")
#: (model, precision, engine): 30 cells; the smallest facet value (a precision) holds 6, a model 10
CELLS = [(m, p, e) for e in ENGINES for m in MODELS for p in PRECISIONS]
#: three cells that share no model, precision or engine
BROKEN = (("resnet18", "amp-fp16", "torch"), ("resnet34", "fp32", "fastai"), ("resnet50", "amp-bf16", "torch"))


def machine(i: int, rng: random.Random, speed: float = 1.0, noise: float = 0.01, repeats: int = 3,
            slow_cells: dict | None = None, gpu: str = "NVIDIA H200", driver: str = "580.159.04",
            env_extra: dict | None = None, run_id: str | None = None) -> Source:
    """One synthetic machine's run of the 30 cells: throughput = base x ``speed`` (x ``slow_cells``'
    factor in those cells), each repeat with ``noise`` (a fraction, Gaussian)."""
    slow = slow_cells or {}
    cells = []
    for k, (model, precision, engine) in enumerate(CELLS):
        base = 20_000.0 / (1 + k % 7)
        factor = speed * slow.get((model, precision, engine), 1.0)
        reps = []
        for _ in range(repeats):
            tp = base * factor * (1.0 + rng.gauss(0.0, noise))
            reps.append({"epoch_seconds": [15_360.0 / tp], "epoch_seconds_median": 15_360.0 / tp,
                         "throughput_items_per_s": tp, "metrics": {}})
        paced = {"paced_by": "host"} if engine == "fastai" else {}
        cells.append(CellResult("cifar", model, precision, engine, "ok",
                                params={"batch_size": 256, "image_size": 32, "epochs": 1, "steps": 60},
                                throughput_unit="images", repeats=reps, summary=summarise_repeats(reps),
                                data={"source": "synthetic"}, notes=[SYNTHETIC],
                                method={"engine": f"cifar/{engine}", "revision": 1, "settings": {}, **paced}))
    host = f"synthetic-node{i:03d}"
    env = {"_synthetic": SYNTHETIC, "host": {"name": host, "host_id": f"h-{i:016x}"},
           "nvml": {"available": True, "driver_version": driver, "gpus": [{"name": gpu, "power_limit_w": 700.0}]},
           "cpu": {"model": "Synthetic Xeon", "usable_cores": 32}, "stack": "cuda12", "torch": "2.11.0",
           "data_source": "synthetic", "kit_version": "0.3.0", **(env_extra or {})}
    config = RunConfig(suite="cifar", data="synthetic", repeats=repeats, command_line=["kit", "run", "(synthetic)"])
    res = RunResults(run_id=run_id or f"SYNTHETIC-RULES-{i:04d}", config=config, environment=env, status="complete",
                     started_at=1796000000.0 + i * 3600, finished_at=1796000600.0 + i * 3600, cells=cells)
    return Source(i, _label(i), Path(f"{host}.tar.gz"), "bundle", res, env,
                  summarise_environment(env, config, cells), False)


def fleet(n: int, seed: int = 0, spread: float = 0.015, **special) -> list[Source]:
    """``n`` machines of one GPU model within +-``spread`` of each other; ``special``: index -> the
    keyword arguments of :func:`machine` for that machine (its speed is still drawn)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kw = dict(special.get(f"m{i}", {}))
        kw["speed"] = kw.get("speed", 1.0) * rng.uniform(1 - spread, 1 + spread)
        out.append(machine(i, rng, **kw))
    return out


def findings(summary) -> list[tuple]:
    """The findings as small values: (machine, kind, short form)."""
    return [(f.source.env.machine, f.kind, f.short) for f in summary.findings]


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
    """Ten of the other machines on one driver, nine on another: the group does not agree on a driver,
    so the slow machine's driver says nothing about it."""
    special = {f"m{i}": {"driver": "575.57.08"} for i in range(10)}
    special["m15"] = {"speed": 0.8, "driver": "575.57.08"}
    summary = summarise_fleet(build_comparison(fleet(20, seed=13, **special)), "gpu", 5.0)
    [f] = summary.findings
    assert f.source.env.machine == "synthetic-node015" and f.causes == ()
    # nine of the others on the slow machine's driver, ten on another: still no majority against it
    special = {f"m{i}": {"driver": "575.57.08"} for i in range(9)}
    special["m15"] = {"speed": 0.8, "driver": "575.57.08"}
    [f] = summarise_fleet(build_comparison(fleet(20, seed=13, **special)), "gpu", 5.0).findings
    assert [c.what for c in f.causes] == ["driver"]  # 10 of 19 share another driver: a majority


def test_one_run_id_with_the_same_results_and_another_environment_is_two_inputs_and_a_warning():
    rng = random.Random(14)
    a = machine(1, rng, run_id="SYNTHETIC-SAME-RUN")
    b = machine(1, random.Random(14), run_id="SYNTHETIC-SAME-RUN", env_extra={"torch": "2.12.0"})
    a.index, a.label, b.path = 0, "A", Path("copy-with-other-env.tar.gz")
    assert [c.to_dict() for c in a.results.cells] == [c.to_dict() for c in b.results.cells]
    cmp = build_comparison([a, b])
    assert [s.label for s in cmp.sources] == ["A", "B"] and cmp.counted_once == []
    same = [w.message for w in cmp.warnings if w.kind == "same run"]
    assert len(same) == 1 and "are the same run (run id SYNTHETIC-SAME-RUN)" in same[0]


# --- a failing fleet test prints little ----------------------------------------------------------

def test_the_fleet_objects_print_in_a_few_lines(broken_in_three):
    """pytest shows the operands of a failing comparison with repr(): a fleet's objects print short."""
    cmp, summary = broken_in_three
    for obj in (cmp, summary, cmp.sources[0], cmp.rows[0], summary.cells[0], summary.findings, summary.findings[0]):
        assert len(repr(obj)) < 2_000, type(obj).__name__
