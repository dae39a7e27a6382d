"""A cell's profile (``CellResult.profile``) from the events of its profiled window.

The window is a few training steps run under ``torch.profiler`` after the timed repeats
(kit.bench.profile_window runs it and hands the events here). Per step it gives:

- ``step_s``: the host's wall time per step over the window, the device synchronised at both ends
  (the profiler's own cost included: it is the step as profiled, not the timed step, which the
  engine sets beside it as ``timed_step_s``: :func:`with_timed_step`);
- ``device_s``: the summed time of the device's events (kernels, copies, sets) per step;
- ``busy_s``: where the events' start and end are known, the time per step at least one of them ran
  (their union): below ``device_s`` when streams overlap;
- ``idle_s``: ``step_s - device_s`` within the window, never negative. Where ``device_s`` exceeds
  ``step_s`` (kernels on overlapping streams, or events that reach past the window)
  ``device_exceeds_step`` is true and ``note`` says so, instead of a negative idle time. The views
  read the host gap of the timed step instead (:func:`host_gap_s`): the window's step carries the
  profiler's own host cost;
- ``device_s_by_class``: ``device_s`` by kit.results.kernel_classes' classes;
- ``largest_kernels``: the :data:`LARGEST` device events with the most time, their calls of one
  name together (:func:`largest`): what a class's time is made of, and the names the classification
  rules meet on a real GPU.

On a CPU there is no device time to measure: the profile says ``available: false`` with the
reason, and keeps only what was measured and is labelled as what it is (``step_s`` and the CPU
operators' own time, ``host_op_s``, ``host_op_s_by_class`` and ``largest_host_ops``), never as
device time.

Torch-free and Python 3.7 syntax (the cuda10 image reads results).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from kit.results import kernel_classes as kc
from kit.results.ratios import finite_number, positive_at

#: steps a profiled window runs by default (kit run --profile-window): enough for a per-step mean
#: of a few replays, few enough to cost a small share of a cell
DEFAULT_STEPS = 5
#: warm steps before the window where the engine needs them to reach its steady step (a fresh
#: loader's first batches in the fastai engine)
DEFAULT_WARMUP = 2
#: events :func:`largest` keeps: enough to name what fills most of a step, few enough for a bundle
LARGEST = 8
#: characters of an event's name kept (a templated kernel's name runs to thousands); the class is
#: taken from the whole name before it is cut
NAME_CHARS = 160


def busy_seconds(intervals: Iterable[Tuple[float, float]]) -> float:
    """Seconds covered by at least one of the ``(start, end)`` intervals (their union)."""
    total, end_so_far = 0.0, None
    start_so_far = None
    for start, end in sorted((float(a), float(b)) for a, b in intervals if b > a):
        if end_so_far is None or start > end_so_far:
            if end_so_far is not None:
                total += end_so_far - start_so_far
            start_so_far, end_so_far = start, end
        else:
            end_so_far = max(end_so_far, end)
    if end_so_far is not None:
        total += end_so_far - start_so_far
    return total


def _seconds(x: Any) -> bool:
    v = finite_number(x)
    return v is not None and v >= 0


def largest(events: Sequence[Tuple[str, float]], steps: int, n: int = LARGEST) -> List[Dict[str, Any]]:
    """The ``n`` names with the most time among ``(name, seconds)`` events, each name's events summed:
    ``{"name"`` (cut to :data:`NAME_CHARS`), ``"class"`` (kit.results.kernel_classes', from the whole
    name), ``"s"`` and ``"calls"`` (per step)``}``, the most time first (ties by name)."""
    total: Dict[str, List[float]] = {}
    for name, t in events:
        acc = total.setdefault(name, [0.0, 0])
        acc[0] += t
        acc[1] += 1
    ranked = sorted(total.items(), key=lambda kv: (-kv[1][0], kv[0]))[:n]
    return [{"name": name[:NAME_CHARS], "class": kc.classify(name), "s": t / steps, "calls": calls / steps}
            for name, (t, calls) in ranked]


def device_profile(kernels: Sequence[Tuple[str, float]], wall_s: float, steps: int, source: str,
                   intervals: Optional[Iterable[Tuple[float, float]]] = None,
                   window_wall_s: Optional[float] = None) -> Dict[str, Any]:
    """The profile of a window on a GPU: ``kernels`` are its device events as ``(name, seconds)``,
    ``wall_s`` the synchronised host wall time of its ``steps`` steps, ``intervals`` the events'
    ``(start, end)`` in seconds where known (for ``busy_s``), ``window_wall_s`` what the whole
    window cost (warm-up and the profiler's start and stop included)."""
    if steps < 1 or not _seconds(wall_s) or wall_s <= 0:
        return unavailable(f"the window timed no step ({steps} steps in {wall_s!r} s)", source)
    kernels = [(str(n), float(t)) for n, t in kernels if _seconds(t)]
    if not kernels:
        return unavailable("the profiler recorded no device event in the window (no kernel was traced)",
                           source, steps=steps, step_s=wall_s / steps, window_wall_s=window_wall_s)
    step_s = wall_s / steps
    device_s = sum(t for _, t in kernels) / steps
    by_class = {k: v / steps for k, v in kc.device_time_by_class(kernels).items()}
    out: Dict[str, Any] = {
        "available": True,
        "steps": steps,
        "step_s": step_s,
        "device_s": device_s,
        "idle_s": max(step_s - device_s, 0.0),
        "device_s_by_class": by_class,
        "largest_kernels": largest(kernels, steps),
        "device_exceeds_step": device_s > step_s,
        "source": source,
    }
    if intervals is not None:
        out["busy_s"] = busy_seconds(intervals) / steps
    if device_s > step_s:
        out["note"] = (f"the device's events add up to {device_s * 1e3:.3f} ms per step, more than the step's "
                       f"{step_s * 1e3:.3f} ms: kernels overlapped (several streams) or ran past the window, so "
                       "device and idle time do not add up to the step; idle time is shown as 0")
    if window_wall_s is not None:
        out["window_wall_s"] = window_wall_s
    return out


def host_profile(ops: Sequence[Tuple[str, float]], wall_s: float, steps: int, source: str, reason: str,
                 window_wall_s: Optional[float] = None) -> Dict[str, Any]:
    """The profile of a window with no device to time (the CPU): ``available`` false with
    ``reason``, and the host's measured pieces under their own names: ``step_s`` and the CPU
    operators' own (self) time per step, ``host_op_s``, ``host_op_s_by_class`` and the operators with the
    most of it, ``largest_host_ops`` (:func:`largest`)."""
    extra: Dict[str, Any] = {}
    if steps >= 1 and _seconds(wall_s) and wall_s > 0:
        ops = [(str(n), float(t)) for n, t in ops if _seconds(t)]
        extra.update(steps=steps, step_s=wall_s / steps, host_op_s=sum(t for _, t in ops) / steps,
                     host_op_s_by_class={k: v / steps for k, v in kc.device_time_by_class(ops).items()},
                     largest_host_ops=largest(ops, steps))
    if window_wall_s is not None:
        extra["window_wall_s"] = window_wall_s
    return unavailable(reason, source, **extra)


def unavailable(reason: str, source: Optional[str] = None, **measured: Any) -> Dict[str, Any]:
    """A profile that could not measure the device: ``available`` false, the ``reason``, and
    whatever host-side figures were measured (``measured``), under their own names."""
    out: Dict[str, Any] = {"available": False, "reason": reason}
    if source:
        out["source"] = source
    out.update({k: v for k, v in measured.items() if v is not None})
    return out


def step_of(profile: Dict[str, Any]) -> Optional[float]:
    """The step a profile's parts decompose, seconds: the timed repeats' (``timed_step_s``, measured
    without the profiler) where recorded, else the window's own (``step_s``, which carries the
    profiler's own host cost: up to 90% longer than the timed step in a host-bound cell on an H100,
    references/h100/explain/). The device's time comes from the window either way: a kernel's time does
    not depend on how long the host took to launch it."""
    return positive_at(profile, "timed_step_s") or positive_at(profile, "step_s")


def busy_of(profile: Dict[str, Any]) -> Optional[float]:
    """Seconds per step in which the device ran at least one event: ``busy_s`` (the union of the
    window's events) where recorded, else ``device_s`` (their sum, the same where no two overlapped)."""
    return positive_at(profile, "busy_s") or positive_at(profile, "device_s")


def host_gap_s(profile: Dict[str, Any]) -> Optional[float]:
    """The host gap of a step: :func:`step_of` - :func:`busy_of`, seconds per step in which no kernel ran
    (never below zero); None where either is missing. The kit's one reading of it: the verdicts, the
    ladders and the report's bars."""
    step, busy = step_of(profile), busy_of(profile)
    return None if step is None or busy is None else max(step - busy, 0.0)


def profiler_cost(profile: Dict[str, Any]) -> Optional[float]:
    """How much longer the window's own step was than the timed one (``step_s / timed_step_s - 1``):
    what profiling cost the step; None where either is missing."""
    step, timed = positive_at(profile, "step_s"), positive_at(profile, "timed_step_s")
    return None if step is None or timed is None else step / timed - 1.0


def adds_up(profile: Dict[str, Any], tolerance: float = 0.05) -> bool:
    """Whether the step's parts, the device's busy time and the host gap, add up to the step
    (:func:`step_of`) within ``tolerance`` (relative): the window's busy time per step fits in the
    timed step, or overshoots it by at most ``tolerance`` of it."""
    step, busy = step_of(profile), busy_of(profile)
    return step is not None and busy is not None and busy <= (1.0 + tolerance) * step


def timed_step_s(repeats: List[dict]) -> Optional[float]:
    """The timed repeats' mean step in seconds (median over repeats of steady seconds ÷ steady
    steps), to set beside the profiled step: the difference is what profiling cost the step."""
    per = []
    for r in repeats:
        if not isinstance(r, dict):
            continue
        seconds, steps = r.get("steady_seconds"), r.get("steps")
        warm = r.get("warmup_steps", r.get("warmup_batches"))
        if _seconds(seconds) and isinstance(steps, int) and isinstance(warm, int) and steps > warm and seconds > 0:
            per.append(seconds / (steps - warm))
    if not per:
        return None
    per.sort()
    mid = len(per) // 2
    return per[mid] if len(per) % 2 else (per[mid - 1] + per[mid]) / 2


def with_timed_step(profile: Optional[Dict[str, Any]], repeats: List[dict]) -> Optional[Dict[str, Any]]:
    """A window's profile (None where no window ran: an empty or missing one) with the timed
    repeats' step (:func:`timed_step_s`) beside its own as ``timed_step_s``."""
    if not profile:
        return None
    timed = timed_step_s(repeats)
    if timed is not None:
        profile["timed_step_s"] = timed
    return profile
