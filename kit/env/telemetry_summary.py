"""What a cell's telemetry says: its summary, and energy per unit of work.

:func:`summarise` turns what the sampler (kit.env.telemetry.Sampler) recorded into the
summary dict the cell's result carries (power, energy and where it came from, clocks,
heat, utilisation, throttling, other processes, the sampler's own cost); a metric that
was not measured is unknown with the reason. :func:`combine_gpus` makes one summary of a
data-parallel cell's GPUs. :func:`attach_energy` adds, after the cell, energy per epoch
and items per joule to the result.
"""

from __future__ import annotations

from typing import Any

from kit.env.probe import unknown
from kit.facts.hardware import THROTTLE_REASONS

#: A throttle reason counts when it is present in more than this fraction of
#: samples (a policy: a single sample at a phase change is not throttling).
THROTTLE_FRACTION = 0.05


def summarise(sampler: Any, t1: float, end_mj: int | None, steady_windows: list | None = None) -> dict:
    """The cell's telemetry summary from what ``sampler`` (kit.env.telemetry.Sampler)
    recorded, ending at clock time ``t1`` with the energy counter at ``end_mj``; with
    ``steady_windows``, the energy over the cell's timed steps too (:func:`steady_energy`)."""
    duration = max(t1 - sampler.t0, 0.0)
    n = len(sampler.times)
    out: dict[str, Any] = {"available": True, "gpu": sampler.gpu, "interval_s": sampler.interval_s, "samples": n, "duration_s": duration}

    watts = [w for _, w in sampler.power_w]
    out["power_mean_w"] = _mean(watts) if watts else unknown(sampler.unsupported.get("power", "no power samples"))
    out["power_max_w"] = max(watts) if watts else unknown(sampler.unsupported.get("power", "no power samples"))

    if sampler.energy_start_mj is not None and end_mj is not None and end_mj >= sampler.energy_start_mj:
        out["energy_j"] = (end_mj - sampler.energy_start_mj) / 1000.0
        out["energy_source"] = "counter"
    elif len(sampler.power_w) >= 1:
        out["energy_j"] = _integrate(sampler.power_w, sampler.t0, t1)
        out["energy_source"] = "integrated"
        out["energy_note"] = (
            "the driver has no total-energy counter for this GPU "
            f"({sampler.unsupported.get('energy_counter', 'counter went backwards')}); "
            f"energy is sampled power integrated over time at {1 / sampler.interval_s:g} Hz"
        )
    else:
        out["energy_j"] = unknown("no energy counter and no power samples: " + sampler.unsupported.get("power", ""))
        out["energy_source"] = "none"

    if steady_windows:
        out.update(steady_energy(sampler, steady_windows))

    out["sm_clock_mean_mhz"] = _mean(sampler.sm_mhz) if sampler.sm_mhz else unknown(sampler.unsupported.get("sm_clock", "no samples"))
    out["sm_clock_min_mhz"] = min(sampler.sm_mhz) if sampler.sm_mhz else unknown(sampler.unsupported.get("sm_clock", "no samples"))
    out["mem_clock_mean_mhz"] = _mean(sampler.mem_mhz) if sampler.mem_mhz else unknown(sampler.unsupported.get("mem_clock", "no samples"))
    out["temp_max_c"] = max(sampler.temp_c) if sampler.temp_c else unknown(sampler.unsupported.get("temperature", "no samples"))
    out["temp_mean_c"] = _mean(sampler.temp_c) if sampler.temp_c else unknown(sampler.unsupported.get("temperature", "no samples"))
    out["util_mean_pct"] = _mean(sampler.util_gpu) if sampler.util_gpu else unknown(sampler.unsupported.get("utilization", "no samples"))
    out["mem_util_mean_pct"] = _mean(sampler.util_mem) if sampler.util_mem else unknown(sampler.unsupported.get("utilization", "no samples"))

    if sampler.reasons:
        fractions = {name: sum(1 for r in sampler.reasons if r & bit) / len(sampler.reasons) for name, bit in THROTTLE_REASONS.items()}
        out["throttle_fraction"] = fractions
        out["throttle_reasons"] = [name for name, f in fractions.items() if f > THROTTLE_FRACTION]
        out["throttled"] = bool(out["throttle_reasons"])
    else:
        why = unknown(sampler.unsupported.get("clock_event_reasons", "no samples"))
        out["throttle_fraction"] = why
        out["throttle_reasons"] = why
        out["throttled"] = why

    if "processes" in sampler.unsupported and not sampler.other_pids:
        out["other_processes"] = unknown(sampler.unsupported["processes"])
    else:
        out["other_processes"] = bool(sampler.other_pids)
    out["other_pids"] = sorted(sampler.other_pids)

    out["sampler_busy_s"] = sampler.busy_s
    out["sampler_overhead_s_per_s"] = sampler.busy_s / duration if duration > 0 else unknown("zero duration")
    out["unsupported"] = dict(sampler.unsupported)
    if sampler.error:
        out["sampler_error"] = sampler.error
    return out


def _mean(xs: list[float] | list[int]) -> float:
    return sum(xs) / len(xs)


def _integrate(samples: list[tuple[float, float]], t0: float, t1: float) -> float:
    """Trapezoidal energy (J) from (time, watts) samples, held flat to the ends of [t0, t1]."""
    pts = sorted(samples)
    if len(pts) == 1:
        return pts[0][1] * max(t1 - t0, 0.0)
    energy = pts[0][1] * max(pts[0][0] - t0, 0.0) + pts[-1][1] * max(t1 - pts[-1][0], 0.0)
    for (ta, wa), (tb, wb) in zip(pts, pts[1:]):
        energy += (wa + wb) / 2.0 * (tb - ta)
    return energy


#: The timed spans must add up to at least this many sampling intervals (and a second) for
#: their energy to stand on its own: at each end of a span the counter is interpolated
#: between two samples, so a span much shorter than the interval would mostly measure the
#: power of what came before and after it (warm-up, compilation, the next repeat's set-up).
STEADY_MIN_INTERVALS = 5
STEADY_MIN_S = 1.0
#: ... and each span at least this many: a shorter one is mostly the interpolation at its two ends
SPAN_MIN_INTERVALS = 2


def _at(series: list[tuple[float, float]], t: float) -> float | None:
    """The counter at time ``t``, linear between the samples around it (None outside them)."""
    if not series or t < series[0][0] or t > series[-1][0]:
        return None
    for (ta, va), (tb, vb) in zip(series, series[1:]):
        if ta <= t <= tb:
            return va if tb == ta else va + (vb - va) * (t - ta) / (tb - ta)
    return series[-1][1] if t == series[-1][0] else None


def steady_energy(sampler: Any, windows: list) -> dict:
    """The GPU's energy and mean power over ``windows`` ([start, end] on the sampler's clock:
    each repeat's steady state, kit.bench.timing.StepClock.steady_windows), from the energy
    counter read at every sample (linear between samples), else from the sampled power;
    unknown, with the reason, where the spans are too short for the sampling interval."""
    spans = [(float(a), float(b)) for a, b in windows if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > a]
    seconds = sum(b - a for a, b in spans)
    out: dict[str, Any] = {"steady_seconds": seconds, "steady_windows": len(spans)}
    need = max(STEADY_MIN_S, STEADY_MIN_INTERVALS * sampler.interval_s)
    span_need = SPAN_MIN_INTERVALS * sampler.interval_s
    shortest = min((b - a for a, b in spans), default=0.0)
    if seconds < need or shortest < span_need:
        out["steady_power_w"] = unknown(
            f"the timed steps lasted {seconds:.2f} s in all (the shortest span {shortest:.2f} s), under the {need:g} s "
            f"in all and {span_need:g} s a span their energy needs at {1 / sampler.interval_s:g} Hz; energy per item "
            "uses the cell's mean power")
        return out
    counter = [(t, mj / 1000.0) for t, mj in sampler.energy_mj]
    if len(counter) >= 2 and all(b[1] >= a[1] for a, b in zip(counter, counter[1:])):
        ends = [(_at(counter, a), _at(counter, b)) for a, b in spans]
        if all(x is not None and y is not None for x, y in ends):
            joules = sum(y - x for x, y in ends)
            out.update(steady_energy_j=joules, steady_power_w=joules / seconds, steady_energy_source="counter")
            return out
    if len(sampler.power_w) >= 2:
        def inside(a: float, b: float) -> list:  # the samples in [a, b], else the one nearest to it
            return ([p for p in sampler.power_w if a <= p[0] <= b]
                    or [min(sampler.power_w, key=lambda p: abs(p[0] - (a + b) / 2))])

        joules = sum(_integrate(inside(a, b), a, b) for a, b in spans)
        out.update(steady_energy_j=joules, steady_power_w=joules / seconds, steady_energy_source="integrated")
        return out
    out["steady_power_w"] = unknown("no energy counter readings or power samples over the timed steps")
    return out


# -- energy per unit of work --------------------------------------------------


ENERGY_ATTRIBUTION = (
    "estimate: the cell's mean board power x each epoch's time (the cell also spans warm-up, "
    "compilation and evaluation, whose power may differ)"
)
ENERGY_ATTRIBUTION_STEADY = (
    "the GPU's mean board power over the repeats' timed steps (the energy counter between their "
    "ends) x each epoch's time; items per joule = steady throughput / that power"
)


#: what adds up over a data-parallel cell's GPUs (the cell's throughput is all ranks' together)
_SUMMED = ("energy_j", "power_mean_w", "power_max_w", "steady_energy_j", "steady_power_w")


def combine_gpus(parts: list[dict]) -> dict:
    """One summary for a cell that ran on several GPUs (``kit run --gpus N``): GPU 0's summary
    (clocks, heat, the runner's device, as before) with power and energy summed over all the
    GPUs, throttling if any GPU throttled, mean utilisation over them, and each GPU's own
    summary under ``per_gpu``. Energy per item is the cell's total throughput over the total
    power, so a sum that misses a GPU would overstate it: where any GPU did not measure power
    or energy, the total is unknown with the reason."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    if not first.get("available"):
        return first
    out = dict(first)
    out["gpus_sampled"] = len(parts)
    out["per_gpu"] = parts
    for key in _SUMMED:
        if key.startswith("steady_") and not any(key in p for p in parts):
            continue  # no timed spans were given: nothing to add up
        values = [p.get(key) if p.get("available") else None for p in parts]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out[key] = float(sum(values))
        else:
            missing = [i for i, v in enumerate(values) if not isinstance(v, (int, float)) or isinstance(v, bool)]
            out[key] = unknown(f"GPU {', '.join(map(str, missing))} of the cell's {len(parts)} did not measure it, "
                               "so the cell's total is not known")
    if any(p.get("energy_source") == "integrated" for p in parts if p.get("available")):
        out["energy_source"] = "integrated"
    utils = [p.get("util_mean_pct") for p in parts if p.get("available")]
    if utils and all(isinstance(u, (int, float)) for u in utils) and len(utils) == len(parts):
        out["util_mean_pct"] = sum(utils) / len(utils)
    flags = [p.get("throttled") for p in parts if p.get("available")]
    if any(f is True for f in flags):
        out["throttled"] = True
        out["throttle_reasons"] = sorted({r for p in parts if isinstance(p.get("throttle_reasons"), list)
                                          for r in p["throttle_reasons"]})
    others = [p.get("other_processes") for p in parts if p.get("available")]
    if any(o is True for o in others):
        out["other_processes"] = True
        out["other_pids"] = sorted({pid for p in parts for pid in (p.get("other_pids") or [])})
    return out


def attach_energy(result: Any) -> None:
    """Add energy per epoch to each repeat and items per joule, from ``result.telemetry``.

    The mean power is the GPU's over the repeats' timed steps where the summary has it
    (``steady_power_w``: :func:`steady_energy`, the steady state that throughput is measured
    over), else the energy counter's joules over the whole cell's duration (or the sampled
    mean when only that exists), warm-up and compilation included. ``energy_basis`` says
    which; per-epoch energy and items per joule are labelled estimates either way.
    """
    tele = getattr(result, "telemetry", None)
    if not isinstance(tele, dict) or not tele.get("available"):
        return
    energy = tele.get("energy_j")
    duration = tele.get("duration_s")
    steady = tele.get("steady_power_w")
    basis, attribution = "cell", ENERGY_ATTRIBUTION
    cell_w = None
    if isinstance(energy, (int, float)) and isinstance(duration, (int, float)) and duration > 0:
        cell_w = energy / duration
    elif isinstance(tele.get("power_mean_w"), (int, float)):
        cell_w = float(tele["power_mean_w"])
    if cell_w is not None:
        tele["cell_mean_power_w"] = cell_w
    if isinstance(steady, (int, float)) and not isinstance(steady, bool) and steady > 0:
        mean_w = float(steady)
        basis, attribution = "steady", ENERGY_ATTRIBUTION_STEADY
    elif cell_w is not None:
        mean_w = cell_w
    else:
        tele["energy_j_per_epoch"] = unknown("no energy or power measurement for this GPU")
        return
    if mean_w <= 0:
        tele["energy_j_per_epoch"] = unknown("measured power was zero")
        return
    unit = getattr(result, "throughput_unit", "items") or "items"
    per_epoch: list[float] = []
    per_joule: list[float] = []
    for rep in getattr(result, "repeats", None) or []:
        secs = rep.get("epoch_seconds")
        if isinstance(secs, list) and secs and all(isinstance(s, (int, float)) for s in secs):
            rep["energy_j_per_epoch"] = [mean_w * s for s in secs]
            per_epoch.extend(rep["energy_j_per_epoch"])
        tput = rep.get("throughput_items_per_s")
        if isinstance(tput, (int, float)) and tput > 0:
            rep["items_per_j"] = tput / mean_w
            per_joule.append(rep["items_per_j"])
    tele["energy_attribution"] = attribution
    tele["energy_basis"] = basis
    tele["energy_j_per_epoch"] = _median(per_epoch) if per_epoch else unknown("no per-epoch times in the repeats")
    tele["items_per_j"] = _median(per_joule) if per_joule else unknown("no throughput in the repeats")
    tele["items_per_j_unit"] = f"{unit} per joule"


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2.0
