"""kit.compare.halves.map_text: a large comparison's text written on two CPUs gives the text one
process gives, and a child that fails in any way costs only time."""

from __future__ import annotations

import json
import os

import pytest

from kit.compare import halves

ITEMS = [{"i": i, "x": i / 7, "name": f"node{i:03d}", "text": "ü\u2028"} for i in range(301)]


def _text(item) -> str:
    return json.dumps(item)


@pytest.fixture
def forking(monkeypatch):
    if not hasattr(os, "fork") or halves._cpus() < 2:
        pytest.skip("no fork or one CPU: map_text writes everything in one process")
    monkeypatch.setattr(halves, "MIN_WORK", 0)


def test_the_forked_halves_are_the_text_of_one_process(forking):
    assert halves.map_text(_text, ITEMS) == [_text(x) for x in ITEMS]
    assert halves.map_text(_text, ITEMS[:2]) == [_text(x) for x in ITEMS[:2]]


def test_a_child_that_fails_leaves_the_parent_to_write_its_half(forking):
    parent = os.getpid()

    def only_here(item) -> str:
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        return _text(item)

    assert halves.map_text(only_here, ITEMS) == [_text(x) for x in ITEMS]
    assert not _zombies(), "the child was not reaped"


def _zombies() -> list[str]:
    """This process's children that exited and were never waited for (Linux's /proc; [] elsewhere)."""
    out = []
    for stat in __import__("glob").glob("/proc/[0-9]*/stat"):
        try:
            fields = open(stat).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            out.append(stat)
    return out


def test_an_error_of_the_work_itself_is_raised_as_in_one_process(forking):
    def bad(item) -> str:
        if item["i"] == 250:  # in the child's half, and so again in the parent's retry
            raise ValueError("item 250")
        return _text(item)

    with pytest.raises(ValueError, match="item 250"):
        halves.map_text(bad, ITEMS)


def test_small_work_stays_in_one_process(monkeypatch):
    monkeypatch.setattr(os, "fork", lambda: pytest.fail("forked for a small job"))
    assert halves.map_text(_text, ITEMS, size=1) == [_text(x) for x in ITEMS]


@pytest.mark.parametrize("group_by", [None, "gpu"], ids=["ungrouped", "grouped"])
def test_a_fleets_tables_in_a_pipe_are_the_text_of_one_process(forking, monkeypatch, group_by):
    """kit.compare.fleet.views.print_rows writes a pipe's per-cell tables on two CPUs: the same text,
    grouped or not, as when one process writes them all."""
    import io

    from rich.console import Console

    from fixtures.fleet import fleet
    from kit.compare.engine import build_comparison
    from kit.compare.fleet.grouped import View
    from kit.compare.fleet.views import print_rows

    cmp = build_comparison(fleet(12))

    def text() -> str:
        out = io.StringIO()
        print_rows(cmp, Console(file=out, width=100, color_system=None), View(group_by=group_by, rows=True))
        return out.getvalue()

    forked = text()
    monkeypatch.setattr(halves, "_cpus", lambda: 1)
    alone = text()
    assert forked == alone and forked.count("fixture-node011") >= 6
