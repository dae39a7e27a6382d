"""How a cell was measured (its *method identity*), and the one rule that says whether two cells'
figures may be divided.

Every cell a run measures records, in ``CellResult.method``::

    {"engine": "cifar/torch", "revision": 6,
     "settings": {"step": "cuda-graph-inductor", "optimizer": "fused", "loss_scale": "dynamic, on the device",
                  "data": "device-resident uint8", "untimed_warmup_steps": 12, "excluded_steps": 11,
                  "timed_steps": 100, "batch_size": 256, "image_size": 32},
     "details": {"inductor": "used"}}

``engine`` names the suite and engine, ``revision`` the engine's revision (kit.bench.methods owns
the numbers and their changelog), ``settings`` what shapes the figure as it actually ran (graph
capture, Inductor, the optimizer's implementation, loss scaling, the data path, warm-up, how much was
timed, batch and image size, preset). ``details`` say more (why Inductor fell back) and are shown,
never compared: the same method may fail for different words on two machines. ``paced_by``: "host"
for the engines whose loop the host drives step by step (kit compare labels their cells "host-paced").

Two cells were measured the same way when their engine, revision and settings are equal. Cells of
bundles made before the kit recorded this have no method: *method unknown*. Two unknowns cannot be
told apart, so they compare as before; an unknown beside a known method is a method change (the
kit's methods changed while it recorded none, and a ratio across that could be measuring the change).

:func:`method_change` is the one rule; ``kit compare`` (kit.compare.engine), its warnings
(kit.compare.comparability) and ``kit index history`` (kit.index.history) all ask it.
"""

from __future__ import annotations

from typing import Any, Iterable

#: how a cell without a method record reads (made by a kit before 0.2.0)
UNKNOWN = "method unknown (made before the kit recorded methods)"


def method_of(cell: Any) -> dict | None:
    """The cell's method record (a CellResult or its JSON object), or None where it has none or it
    is not the kit's form (a stranger's bundle: an odd value is as good as none)."""
    m = cell.get("method") if isinstance(cell, dict) else getattr(cell, "method", None)
    if not isinstance(m, dict) or not isinstance(m.get("engine"), str) or type(m.get("revision")) is not int:
        return None
    return m


def host_paced(m: dict | None) -> bool:
    """Whether the cell's engine runs its loop on the host step by step, by design (kit.bench.methods
    names them): its figure measures the host's CPU as much as the GPU."""
    return m is not None and m.get("paced_by") == "host"


def _settings(m: dict) -> dict:
    s = m.get("settings")
    return s if isinstance(s, dict) else {}


def identity(m: dict | None) -> tuple | None:
    """What two cells must share to be measured the same way (None: unknown)."""
    if m is None:
        return None
    return (m["engine"], m["revision"], tuple(sorted((str(k), repr(v)) for k, v in _settings(m).items())))


def describe(m: dict | None, keys: Iterable[str] | None = None) -> str:
    """``cifar/torch r6 (step cuda-graph-inductor, optimizer fused)``: the engine, its revision and the
    settings named by ``keys`` (all of them where None); :data:`UNKNOWN` for none."""
    if m is None:
        return UNKNOWN
    settings = _settings(m)
    shown = [k for k in (settings if keys is None else keys) if k in settings]
    inside = ", ".join(f"{k.replace('_', ' ')} {settings[k]}" for k in shown)
    return f"{m['engine']} r{m['revision']}" + (f" ({inside})" if inside else "")


def differences(a: dict | None, b: dict | None) -> list[str]:
    """What differs between two methods, as the setting names (``revision``, ``engine``, ``step``, ...);
    ``["method"]`` where one is unknown; empty where they are the same."""
    if identity(a) == identity(b):
        return []
    if a is None or b is None:
        return ["method"]
    out = [k for k in ("engine", "revision") if a[k] != b[k]]
    sa, sb = _settings(a), _settings(b)
    out += [k for k in list(sa) + [k for k in sb if k not in sa] if sa.get(k) != sb.get(k)]
    return out


def method_change(methods: list[tuple[str, dict | None]]) -> str | None:
    """The one comparability rule: None when every labelled method is the same way of measuring (all
    unknown included), else one sentence naming what differs, e.g.
    ``A: cifar/torch r2 (step cuda-graph); B: cifar/torch r6 (step cuda-graph-inductor, optimizer
    fused): this ratio compares methods, not machines``."""
    if len({identity(m) for _, m in methods}) <= 1:
        return None
    ref = methods[0][1]
    keys: list[str] = []
    for _, m in methods[1:]:
        keys += [k for k in differences(ref, m) if k not in keys]
    shown = [k for k in keys if k not in ("engine", "revision", "method")]
    groups: dict[str, list[str]] = {}
    for label, m in methods:
        groups.setdefault(describe(m, shown), []).append(label)
    parts = [f"{join_labels(labels)}: {text}" for text, labels in groups.items()]
    return "; ".join(parts) + ": this ratio compares methods, not machines"


def join_labels(labels: list[str]) -> str:
    """``A+B``; for many inputs ``A+B+C and 61 more``: the inputs named in one line, as every
    comparability line (this rule's, kit.compare.comparability's) names them."""
    return "+".join(labels) if len(labels) <= 6 else "+".join(labels[:3]) + f" and {len(labels) - 3} more"
