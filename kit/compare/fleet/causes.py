"""The environment facts in which a machine differs from the rest of its group: candidate causes.

A slow or unstable machine is often explained by its setup rather than its silicon: a lower power
limit, a GPU whose clocks were held low (its maximum or application clock), a different driver, another host CPU or fewer cores for the
loader, cells the GPU throttled in, a busy host. Each fact is read from what a bundle records (the
environment record's ``nvml.gpus`` and ``cpu``, the summary's driver, each cell's telemetry and
host-load flags, :mod:`kit.compare.figures`), and a machine's value is set against the value most of
the other machines of its group share. What the run measured counts too: its data (real or synthetic),
its mode and kit version, and each cell's settings (batch size, image size, steps, BPTT, learner),
these compared cell by cell with the other machines' same cell (a machine that ran other work is not
slow for a reason of its environment, and its finding must not say that nothing differs). A difference is a *candidate* cause and is worded so
("candidate cause: power limit 500 W vs the group's 700 W"): the kit does not know it is the cause.
A fact a bundle does not record is left out, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kit.bundle.inert import inert
from kit.compare.load import Source
from kit.results.ratios import finite_number


def _gpu0(src: Source) -> dict:
    nvml = src.environment.get("nvml") if isinstance(src.environment, dict) else None
    gpus = nvml.get("gpus") if isinstance(nvml, dict) else None
    if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict):
        return gpus[0]
    return {}


def _number(value) -> float | None:
    return finite_number(value)


def _power_limit(src: Source) -> str | None:
    w = _number(_gpu0(src).get("power_limit_w"))
    return None if w is None else f"{w:,.0f} W"


def _clock(key: str) -> Callable[[Source], str | None]:
    """A clock of the first GPU's record (``clocks_mhz``: at the run's start, the most it may run at, the
    one applications are held to), in MHz."""
    def read(src: Source) -> str | None:
        clocks = _gpu0(src).get("clocks_mhz")
        mhz = _number(clocks.get(key)) if isinstance(clocks, dict) else None
        return None if mhz is None else f"{mhz:,.0f} MHz"
    return read


def _cpu(key: str) -> Callable[[Source], str | None]:
    def read(src: Source) -> str | None:
        cpu = src.environment.get("cpu") if isinstance(src.environment, dict) else None
        value = cpu.get(key) if isinstance(cpu, dict) else None
        if isinstance(value, (int, str)) and not isinstance(value, bool) and str(value).strip():
            return inert(str(value))
        return None
    return read


def _driver(src: Source) -> str | None:
    return None if src.env.driver == "unknown" else src.env.driver


def _run_field(read_field: Callable[[Source], object]) -> Callable[[Source], str | None]:
    def read(src: Source) -> str | None:
        value = read_field(src)
        return inert(str(value)) if isinstance(value, str) and value.strip() and value != "unknown" else None
    return read


def _flagged(test: Callable) -> Callable[[Source], str | None]:
    """``"none"`` or ``"N of M cells"``: the cells of the run the test holds for."""
    def read(src: Source) -> str | None:
        cells = [c for c in src.figures.cells if c.ok]
        if not cells:
            return None
        n = sum(1 for c in cells if test(c))
        return "none" if n == 0 else f"{n} of {len(cells)} cells"
    return read


#: (what, how it is read): the facts compared, in the order they are listed
FACTS: tuple[tuple[str, Callable[[Source], str | None]], ...] = (
    ("power limit", _power_limit),
    ("SM clock at the run's start", _clock("sm")),
    ("maximum SM clock", _clock("max_sm")),
    ("SM clock applications are held to", _clock("applications_sm")),
    ("driver", _driver),
    ("host CPU", _cpu("model")),
    ("usable CPU cores", _cpu("usable_cores")),
    ("GPU throttled (power or thermal) in", _flagged(lambda c: "throttled" in c.flags)),
    ("host busy in", _flagged(lambda c: bool(c.busy))),
    ("data", _run_field(lambda s: s.figures.data or s.env.data_source)),
    ("mode", _run_field(lambda s: s.figures.mode)),
    ("kit version", _run_field(lambda s: s.env.kit_version)),
)

#: a finding's line where no fact differs
NO_CAUSE = "no recorded fact of its environment, data or cells' settings differs from the group's"

#: a cell's settings compared with the other machines' same cell (kit.compare.comparability's list)
CELL_SETTINGS = ("batch_size", "image_size", "steps", "bptt", "learner")


def _settings(src: Source) -> dict:
    """Each measured cell's settings: cell key -> {setting: value as text} (None where not recorded)."""
    out = {}
    for c in src.figures.cells:
        if c.ok and isinstance(c.params, dict):
            out[c.key] = {k: None if c.params.get(k) is None else inert(str(c.params.get(k))) for k in CELL_SETTINGS}
    return out


@dataclass(frozen=True)
class Cause:
    """A fact in which a machine differs from most of its group."""

    what: str
    value: str
    group_value: str
    agree: int  # how many of the others share the group's value
    others: int
    where: str | None = None  # for a cell's setting: in how many of the shared cells, and the first

    @property
    def line(self) -> str:
        return (f"candidate cause: {self.what} {self.value} vs the group's {self.group_value} ({self.agree} of "
                f"{self.others})" + (f" in {self.where}" if self.where else ""))

    def to_dict(self) -> dict:
        return {"fact": self.what, "value": self.value, "group_value": self.group_value,
                "others_with_group_value": self.agree, "others": self.others, "where": self.where, "line": self.line}


def _majority(values: list) -> tuple | None:
    """The value more than half of ``values`` share, with its count; None where none does (a fact the
    group itself does not agree on says nothing about one machine)."""
    if not values:
        return None
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    common, n = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
    return (common, n) if 2 * n > len(values) else None


class GroupFacts:
    """Each fact of each machine of a group, read once; :meth:`causes` of one machine against the others."""

    def __init__(self, members: list[Source]):
        self.members = members
        self.values = {s.index: [read(s) for _, read in FACTS] for s in members}
        self.settings = {s.index: _settings(s) for s in members}

    def causes(self, src: Source) -> list[Cause]:
        out = []
        mine = self.values[src.index]
        for k, (what, _) in enumerate(FACTS):
            if mine[k] is None:
                continue
            theirs = [v[k] for i, v in self.values.items() if i != src.index and v[k] is not None]
            common = _majority(theirs)
            if common is not None and mine[k] != common[0]:
                out.append(Cause(what, mine[k], common[0], common[1], len(theirs)))
        return out + self._setting_causes(src)

    def _setting_causes(self, src: Source) -> list[Cause]:
        """A cell setting in which the machine's cells differ from the same cells of most of the others:
        one cause per setting, with how many of the cells it shares with them differ and the first."""
        mine = self.settings[src.index]
        others = [v for i, v in self.settings.items() if i != src.index]
        out = []
        for name in CELL_SETTINGS:
            shared, differing = 0, []
            for key, values in mine.items():
                theirs = [o[key][name] for o in others if key in o and o[key][name] is not None]
                common = _majority(theirs)
                if values[name] is None or common is None:
                    continue
                shared += 1
                if values[name] != common[0]:
                    differing.append((key, values[name], common, len(theirs)))
            if differing:
                key, value, (common, n), m = differing[0]
                first = "/".join(str(x) for x in key[:4])
                where = (f"{len(differing)} of {shared} cells it shares with them"
                         + (f" ({first} first)" if len(differing) > 1 else f" ({first})"))
                out.append(Cause(name.replace("_", " "), value, common, n, m, where))
        return out
