"""Why a precision is (not) faster in a cell: a verdict per cell and a speedup ladder per precision pair.

Every figure here is read from what a run measured; a piece that was not measured is a line saying
so and why, never a guess.

- **Ceilings** (kit.results.ceilings): the most a precision could buy over fp32 on this GPU, from
  the calibration of the session that measured the cell; the top rung of every ladder.
- **A cell's profile** (``CellResult.profile``, optional: the profiled window of a few steps under
  ``torch.profiler``, outside the timed repeats, kit.results.step_profile): per step, the device's
  time by kernel class (``device_s_by_class``), summed (``device_s``) and as the time at least one
  kernel ran (``busy_s``). The step those parts decompose is the timed repeats' (``timed_step_s``,
  measured without the profiler; the window's own ``step_s`` where older profiles lack it), and its
  host gap, the time no kernel ran, is that step less the busy time (step_profile.host_gap_s): the
  window's own step carries the profiler's host cost, which inflates a host-bound step. Bundles
  without a profile lack the rungs that need it; a window that measured no device time (a CPU)
  says why.
- **Verdict** (:func:`verdict`): host-bound with the GPU-idle share (the step's host gap), else
  compute-bound on or off the tensor cores or memory-bound (whichever of the matmul kernels and the
  memory-bound kernels together took more device time); without a
  profile, loader-bound (data wait against compute, medians over repeats), else host-bound where
  NVML's utilisation, sampled over the whole cell, leaves the GPU idle for at least 30% of the timed
  steps however the idle time falls (:func:`idle_within_steps`) and the timed steps lasted long
  enough for NVML's utilisation to cover them (:data:`NVML_MIN_STEPS_S`); otherwise "not measured"
  and what is missing.
- **Ladder** (:func:`ladder`): peak ratio -> matmul kernels' time ratio -> device-time ratio ->
  step-time ratio -> the measured speedup (kit.results.ratios' one definition), each rung with what
  it lost against the rung above where both are measured.

Torch-free and Python 3.7 syntax (the cuda10 image reads results).
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from kit.results import kernel_classes as kc
from kit.results import ratios, step_profile
from kit.results.ceilings import calibration_for, ceilings, efficiency
from kit.results.ratios import positive_at as _num
from kit.results.cell_ids import key_of, matches
from kit.results.precisions import BY_NAME
from kit.results.schema import CellResult, RunResults

#: A run that waited for data this share of its training time was loader-bound (data_wait_s
#: against compute_s, median over repeats).
DATA_BOUND_FRACTION = 0.30
#: A step whose device was idle this share of it is host-bound (the profile's idle gap, or the least
#: idle share NVML's utilisation allows within the timed steps: :func:`idle_within_steps`).
HOST_BOUND_IDLE = 0.30
#: The least time the timed steps must last, in all, for NVML's mean utilisation over the cell to say
#: anything about them. NVML's utilisation is the share of its own sample period (1/6 s to 1 s by the
#: NVML reference, depending on the product) in which a kernel ran, read at the kit's sampling
#: interval: a burst of steps shorter than a few of those periods can fall between readings. Seen on
#: an H200 (references/h200/remeasure/): captured-step ResNet-18 cells whose 0.3-0.4 s of timed steps
#: were 2-9% of the cell read 0.1-2% utilisation, which the rule alone would call host-bound.
NVML_MIN_STEPS_S = 5.0
#: the kernel classes whose time the peak ratio bounds
MATMUL_CLASSES = (kc.TENSOR_CORE_MATMUL, kc.OTHER_MATMUL)
#: the kernel classes of memory-bound work
MEMORY_CLASSES = (kc.NORM_ELEMENTWISE, kc.CASTS_COPIES)
NO_WINDOW = "no profiled window"
NO_PROFILE = NO_WINDOW + " (kernel time by class, host and device time per step)"
#: the rungs of a ladder (:func:`ladder`), top to bottom
PEAK, KERNELS, DEVICE, STEP, MEASURED = ("peak ratio", "matmul kernels' time ratio", "device-time ratio",
                                         "step-time ratio", "measured speedup")
#: a ladder whose every measured rung keeps at least this share of the rung above lost nothing worth naming
KEPT_ALL = 0.90


def profile_of(cell: CellResult) -> Optional[Dict[str, Any]]:
    """The cell's profile where it holds a usable step (step_s and device_s), else None."""
    p = getattr(cell, "profile", None)
    if not isinstance(p, dict) or p.get("available") is False or not (_num(p, "step_s") and _num(p, "device_s")):
        return None
    return p


def profile_reason(cell: CellResult) -> Optional[str]:
    """Why the cell's profiled window measured no device time, where one ran and said so (a CPU
    device, no profiler, a failed window); None where the cell has a usable profile or none at all."""
    p = getattr(cell, "profile", None)
    if isinstance(p, dict) and p.get("available") is False:
        reason = p.get("reason")
        return reason if isinstance(reason, str) and reason else "the window measured no device time"
    return None


def window_cost(cell: CellResult) -> Optional[Tuple[float, float]]:
    """What the cell's profiled window cost it: its seconds (``window_wall_s``: warm-up, profiler, steps
    and reading the events) and their share of the cell's wall time (started to finished, the window
    included); None where either is unknown. The window runs after the timed repeats: the cost is wall
    time, not a change in any figure."""
    p = getattr(cell, "profile", None)
    window = _num(p, "window_wall_s") if isinstance(p, dict) else None
    started, finished = getattr(cell, "started_at", None), getattr(cell, "finished_at", None)
    if not window or not isinstance(started, (int, float)) or not isinstance(finished, (int, float)) \
            or finished <= started:
        return None
    return window, window / (finished - started)


def idle_s(p: Dict[str, Any]) -> float:
    """The host gap of a profiled step (:func:`profile_of`'s), seconds per step in which no kernel ran
    (step_profile.host_gap_s: the timed step less the device's busy time)."""
    return step_profile.host_gap_s(p) or 0.0


#: the step a profiled cell's parts decompose (the timed repeats' where recorded), and the seconds per
#: step in which a kernel ran: step_profile's readings (a profile_of profile always has both)
step_s, busy_s = step_profile.step_of, step_profile.busy_of


#: the name of the host gap where a step's parts are listed beside the kernel classes
HOST_GAP = "host gap (GPU idle)"


def step_parts(cell: CellResult) -> Optional[List[Tuple[str, float]]]:
    """A profiled step's parts, seconds per step: each kernel class's device time (kit.results.kernel_classes'
    order, the classes with time only), then the host gap (:data:`HOST_GAP`); they add up to the step
    (:func:`step_s`) where no two kernels overlapped, else to more by the overlap (``device_s`` less
    ``busy_s``). None without a profile. Device time the profile does not put in a class is "other"."""
    p = profile_of(cell)
    if p is None:
        return None
    by = _by_class(p)
    unclassed = _num(p, "device_s") - sum(by.values())
    if unclassed > 1e-12:
        by[kc.OTHER] = by.get(kc.OTHER, 0.0) + unclassed
    parts = [(k, by[k]) for k in kc.CLASSES if by.get(k, 0.0) > 0]
    return parts + [(HOST_GAP, idle_s(p))]


def largest_kernels(cell: CellResult) -> List[Dict[str, Any]]:
    """The profiled step's largest device events (kit.results.step_profile.largest), each with its
    ``share`` of the step's device time, and ``class_today`` where today's rules class its name
    otherwise than the run's kit did (its step's classes are summed as measured; a name the window cut
    only where it was stored as "other"); [] without a profile
    or where the window did not record them. A stranger's bundle: entries that are not a name, a known
    class and a time are dropped."""
    p = profile_of(cell)
    rows = p.get("largest_kernels") if p else None
    if not isinstance(rows, list):
        return []
    device = _num(p, "device_s")
    out = []
    for r in rows[:step_profile.LARGEST]:
        t = _num(r, "s")
        name, klass = (r.get(k) if isinstance(r, dict) else None for k in ("name", "class"))
        share = ratios.finite_number(t / device) if t else None
        if t and share is not None and isinstance(name, str) and klass in kc.CLASSES:
            row = {"name": name[:step_profile.NAME_CHARS], "class": klass, "s": t, "calls": _num(r, "calls"),
                   "share": share}
            today = kc.classify(name)
            # a name cut to NAME_CHARS may have lost what its class was read from (a GradScaler kernel's
            # template arguments): only a class the whole name did not have is news
            if today != klass and (len(name) < step_profile.NAME_CHARS or klass == kc.OTHER):
                row["class_today"] = today
            out.append(row)
    return out


def _matmul_s(p: Dict[str, Any]) -> float:
    """A profiled step's matmul and convolution kernel time, seconds per step (:data:`MATMUL_CLASSES`)."""
    return sum(_by_class(p).get(k, 0.0) for k in MATMUL_CLASSES)


def _by_class(p: Dict[str, Any]) -> Dict[str, float]:
    d = p.get("device_s_by_class")
    return {k: float(v) for k, v in d.items() if k in kc.CLASSES and _num(d, k)} if isinstance(d, dict) else {}


def data_wait_fraction(cell: CellResult) -> Optional[float]:
    """Share of training time spent waiting for the next batch (medians over repeats; the kit's one
    definition: the report, the insights and the verdicts read it)."""
    wait = ratios.median_of(ratios.metric_values(cell, "data_wait_s"))
    compute = ratios.median_of(ratios.metric_values(cell, "compute_s"))
    if wait is None or compute is None or wait + compute <= 0:
        return None
    return wait / (wait + compute)


def util_pct(cell: CellResult) -> Optional[float]:
    """NVML's mean GPU utilisation over the cell, where telemetry recorded it (the kit's one reading of
    it: the report, the insights and the verdicts); older bundles named it otherwise."""
    t = cell.telemetry if isinstance(cell.telemetry, dict) and cell.telemetry.get("available", True) is not False else {}
    for key in ("util_mean_pct", "gpu_util_mean_pct", "utilization_mean_pct"):
        v = ratios.finite_number(t.get(key))
        if v is not None:
            return v
    return None


def steps_seconds(cell: CellResult) -> float:
    """The timed steps' time in all: the repeats' steady_seconds summed (0 where none is recorded)."""
    return sum(ratios.finite_values(r.get("steady_seconds") for r in cell.repeats if isinstance(r, dict)))


def steps_share(cell: CellResult) -> Optional[float]:
    """The timed steps' share of the time NVML sampled: :func:`steps_seconds` ÷ the telemetry's
    duration_s (None where either is missing)."""
    steady = steps_seconds(cell)
    duration = _num(cell.telemetry, "duration_s")
    return steady / duration if steady > 0 and duration else None


def idle_within_steps(util: float, share: float) -> float:
    """The least share of the timed steps the GPU was idle, from NVML's mean utilisation ``util`` (%,
    the share of sampled time a kernel ran) over a cell whose timed steps were ``share`` of the
    sampled time: were every idle moment outside the steps, (1 - util) - (1 - share) of the cell
    would still be idle within them."""
    share = min(share, 1.0)
    return max(share - util / 100.0, 0.0) / share


#: the kinds of verdict (:attr:`Verdict.kind`): what bound a cell
HOST_BOUND = "host-bound"
LOADER_BOUND = "loader-bound"
COMPUTE_TENSOR_CORES = "compute-bound on the tensor cores"
COMPUTE_OFF_TENSOR_CORES = "compute-bound off the tensor cores"
MEMORY_BOUND = "memory-bound"
DEVICE_BOUND = "device-bound"
NOT_MEASURED = "not measured"
KINDS = (HOST_BOUND, LOADER_BOUND, COMPUTE_TENSOR_CORES, COMPUTE_OFF_TENSOR_CORES, MEMORY_BOUND, DEVICE_BOUND,
         NOT_MEASURED)


class Verdict(NamedTuple):
    """What bound a cell: its ``kind`` (one of :data:`KINDS`), the ``short`` form the tables put beside
    a cell's ratios ("host-bound 62% idle", "compute-bound (TC)"), and the full line with its figures
    (``text``, what `kit explain` and the report print). One rule set makes all three."""

    kind: str
    short: str
    text: str


def bound(cell: CellResult) -> Verdict:
    """What bound the cell, from its measured pieces (or what is missing): see the module's docstring."""
    p = profile_of(cell)
    if p is not None:
        step, device, idle = step_s(p), _num(p, "device_s"), idle_s(p)
        if idle / step >= HOST_BOUND_IDLE:
            of = ("the timed" if _num(p, "timed_step_s") else "the profiled")
            return Verdict(HOST_BOUND, f"host-bound {idle / step:.0%} idle",
                           f"host-bound: the GPU idle {idle / step:.0%} of the step "
                           f"({idle * 1e3:.2f} of {of} {step * 1e3:.2f} ms)")
        by = _by_class(p)
        if by:
            return _device_verdict(by, device)
    wait = data_wait_fraction(cell)
    util = util_pct(cell)
    if wait is not None and wait >= DATA_BOUND_FRACTION:
        return Verdict(LOADER_BOUND, f"loader-bound {wait:.0%} wait", f"loader-bound: waited for data {wait:.0%} of "
                       "training time" + (f" (NVML utilisation {util:.0f}%)" if util is not None else ""))
    share = steps_share(cell)
    waited = "data wait " + ("not measured" if wait is None else format(wait, ".0%"))
    long_enough = steps_seconds(cell) >= NVML_MIN_STEPS_S
    if util is not None and share is not None and long_enough and idle_within_steps(util, share) >= HOST_BOUND_IDLE:
        least = idle_within_steps(util, share)
        return Verdict(HOST_BOUND, f"host-bound ≥{least:.0%} idle",
                       f"host-bound: the GPU idle at least {least:.0%} of the timed steps (NVML utilisation "
                       f"{util:.0f}% over the cell, the timed steps {min(share, 1.0):.0%} of it; {waited})")
    seen = [f"NVML utilisation {util:.0f}%" if util is not None else "no NVML utilisation",
            f"timed steps {share:.0%} of the cell" if share is not None else "no step time against NVML's", waited]
    if share is not None and not long_enough:
        seen.insert(2, f"the timed steps {steps_seconds(cell):.1f} s in all, under the {NVML_MIN_STEPS_S:g} s "
                       "NVML's utilisation needs to cover them")
    why = profile_reason(cell)
    window = f"the profiled window measured no device time ({why})" if why else "no profiled window of the steps"
    t = cell.telemetry
    if isinstance(t, dict) and t.get("available") is False:  # a CPU run, or no NVML: no GPU utilisation to cite
        return Verdict(NOT_MEASURED, NOT_MEASURED, f"not measured: {window}, and no GPU telemetry over the cell "
                       f"({t.get('reason') or 'not recorded'}; {waited})")
    return Verdict(NOT_MEASURED, NOT_MEASURED, f"not measured: {window}, and NVML over the whole cell cannot say "
                   f"({'; '.join(seen)})")



def _device_verdict(by: Dict[str, float], device: float) -> Verdict:
    """What bound a step whose GPU was seldom idle, from its kernel time by class: the larger of the
    matmul and convolution kernels together (on the tensor cores where most of their time was) and the
    memory-bound kernels together (normalisation, elementwise, casts and copies), each line naming the
    other's share too; where another class outweighs both (the optimizer, communication), that class."""
    mm = sum(by.get(k, 0.0) for k in MATMUL_CLASSES)
    mem = sum(by.get(k, 0.0) for k in MEMORY_CLASSES)
    rest = {k: v for k, v in by.items() if k not in MATMUL_CLASSES + MEMORY_CLASSES}
    top_rest = max(rest, key=rest.get) if rest else None
    if top_rest is not None and rest[top_rest] > max(mm, mem):
        return Verdict(DEVICE_BOUND, f"device-bound ({top_rest})", f"device-bound, mostly {top_rest}: "
                       f"{rest[top_rest] / device:.0%} of device time")
    mem_words = "normalisation, elementwise, casts and copies"
    if mm >= mem:
        tc = by.get(kc.TENSOR_CORE_MATMUL, 0.0)
        on = tc >= mm - tc
        head = (Verdict(COMPUTE_TENSOR_CORES, "compute-bound (TC)", "compute-bound on the tensor cores") if on else
                Verdict(COMPUTE_OFF_TENSOR_CORES, "compute-bound (no TC)", "compute-bound off the tensor cores"))
        return head._replace(text=f"{head.text}: {mm / device:.0%} of device time in matmuls and convolutions "
                             f"({tc / device:.0%} on the tensor cores); {mem / device:.0%} in {mem_words}")
    return Verdict(MEMORY_BOUND, "memory-bound", f"memory-bound: {mem / device:.0%} of device time in {mem_words}; "
                   f"{mm / device:.0%} in matmuls and convolutions")


def bound_short(short: str) -> str:
    """A verdict's short form where it stands beside a figure that was measured (a speedup): "not
    measured" there reads as if the figure were not, so it says what was not: "bound not measured"."""
    return "bound " + NOT_MEASURED if short == NOT_MEASURED else short


def verdict(cell: CellResult) -> str:
    """What bound the cell, in one line with its figures (:func:`bound`'s text)."""
    return bound(cell).text


def _rung(name: str, value: Optional[float], how: str) -> Dict[str, Any]:
    """A rung; a ratio that is no finite number (a stranger's 5e-324 seconds under a division) is none."""
    return {"rung": name, "ratio": ratios.finite_number(value), "how": how}


def ladder(cell: CellResult, base: CellResult, environment: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The rungs of ``cell``'s speedup over ``base`` (its fp32 cell), top to bottom, each with
    ``above`` (the measured rung above it), ``kept`` (its share of that rung's ratio) and ``lost``
    (what it lost against it, in words) where both are measured."""
    ceil = ceilings(environment, cell.precision)
    p, p32 = profile_of(cell), profile_of(base)
    rungs = [_rung(PEAK, ceil["compute"], ceil["compute_why"] + "; memory-bound work: at most "
                   + ratios.fmt_ratio(ceil["memory"]) + " (" + ceil["memory_why"] + ")")]
    if p and p32:
        mm, mm32 = _matmul_s(p), _matmul_s(p32)
        rungs.append(_rung(KERNELS, mm32 / mm if mm and mm32 else None,
                           f"fp32 {mm32 * 1e3:.2f} ms ÷ {mm * 1e3:.2f} ms per step" if mm and mm32
                           else "not measured: no matmul kernels in a profile"))
        d, d32 = _num(p, "device_s"), _num(p32, "device_s")
        b, b32 = busy_s(p), busy_s(p32)
        rungs.append(_rung(DEVICE, b32 / b, f"fp32 {b32 * 1e3:.2f} ms ÷ {b * 1e3:.2f} ms per step in which a kernel "
                           f"ran; other kernels {(d - mm) * 1e3:.2f} ms (fp32 {(d32 - mm32) * 1e3:.2f})"))
        timed = _num(p, "timed_step_s") and _num(p32, "timed_step_s")
        # one kind of step for both cells: the timed ones where both have them, else the windows' own
        s, s32 = (step_s(p), step_s(p32)) if timed else (_num(p, "step_s"), _num(p32, "step_s"))
        rungs.append(_rung(STEP, s32 / s, f"fp32 {s32 * 1e3:.2f} ms ÷ {s * 1e3:.2f} ms per "
                           + ("timed step" if timed else "profiled step")
                           + f"; GPU idle {idle_s(p) * 1e3:.2f} ms (fp32 {idle_s(p32) * 1e3:.2f})"))
    else:
        lacking = [x for x, q in ((base, p32), (cell, p)) if q is None]
        whys = sorted({r for x in lacking for r in [profile_reason(x)] if r})
        missing = ("not measured: " + NO_PROFILE + " for " + " and ".join(x.precision for x in lacking)
                   + ("; a window ran but measured no device time: " + "; ".join(whys) if whys else ""))
        rungs += [_rung(n, None, missing) for n in (KERNELS, DEVICE, STEP)]
    rungs.append(_rung(MEASURED, ratios.speedup_over_fp32(cell, base),
                       "median steady-state throughput ÷ fp32's, over repeats (the kit's " + ratios.SPEEDUP_NAME + ")"))
    above = None
    for r in rungs:
        if r["ratio"] is not None and above is not None and ratios.finite_number(r["ratio"] / above["ratio"]) is not None:
            r["above"] = above["rung"]
            r["kept"] = r["ratio"] / above["ratio"]
            r["lost"] = (f"keeps {r['kept']:.0%} of the {above['rung']}'s {ratios.fmt_ratio(above['ratio'])}"
                         + ("" if rungs.index(r) == rungs.index(above) + 1 else "; the rungs between are not measured"))
        if r["ratio"] is not None:
            above = r
    return rungs


def answer(cell: CellResult, base: CellResult, rungs: List[Dict[str, Any]]) -> str:
    """The ladder in one sentence: the measured speedup, then top to bottom each rung that kept less
    than :data:`KEPT_ALL` of the rung above it, with the measured pieces it is made of (``rungs``:
    :func:`ladder`'s, of ``cell`` against ``base``); a rung whose pieces were not measured says so."""
    measured = rungs[-1]["ratio"] if rungs else None
    if measured is None:
        return "not measured: " + (rungs[-1]["how"].replace("not measured: ", "") if rungs else "no ladder")
    head = f"{cell.precision} {ratios.fmt_ratio(measured)} over fp32"
    kept = [r for r in rungs if r.get("kept") is not None]
    if not kept:
        missing = ([] if rungs[0]["ratio"] is not None else ["no calibrated peak"]) + [NO_WINDOW]
        return head + "; where it lost against the ceiling is not measured (" + ", ".join(missing) + ")"
    p, p32 = profile_of(cell), profile_of(base)
    parts = []
    for r in kept:
        if r["kept"] >= KEPT_ALL:
            continue
        above = next(x for x in rungs if x["rung"] == r["above"])
        share = f"{r['kept']:.0%} of the {above['rung']}'s {ratios.fmt_ratio(above['ratio'])}"
        if r["rung"] == KERNELS:
            parts.append(f"the matmul kernels ran {_faster(r['ratio'])}, {share}")
        elif r["rung"] == DEVICE and p and p32:
            parts.append(f"the kernels' busy time {ratios.fmt_ratio(r['ratio'])} ({share}): those outside the matmuls took "
                         f"{(_num(p, 'device_s') - _matmul_s(p)) * 1e3:.2f} ms per step against fp32's "
                         f"{(_num(p32, 'device_s') - _matmul_s(p32)) * 1e3:.2f}")
        elif r["rung"] == STEP and p and p32:
            parts.append(f"the step {ratios.fmt_ratio(r['ratio'])} ({share}): the GPU sat idle {idle_s(p) * 1e3:.2f} of "
                         f"its {step_s(p) * 1e3:.2f} ms (fp32: {idle_s(p32) * 1e3:.2f} of "
                         f"{step_s(p32) * 1e3:.2f}), time in which no kernel ran")
        elif r["rung"] == MEASURED and above["rung"] == STEP:
            parts.append(f"the timed steps {ratios.fmt_ratio(r['ratio'])} ({share})")
        elif r["rung"] == MEASURED and above["rung"] == PEAK:
            parts.append(f"{share}; where the rest went is not measured ({NO_WINDOW})")
        else:
            parts.append(f"the {r['rung']} {ratios.fmt_ratio(r['ratio'])} ({share}; the rungs between are not measured)")
    if not parts:
        return head + f": every measured rung keeps {KEPT_ALL:.0%} or more of the one above it"
    return head + ": " + "; ".join(parts)


def _faster(ratio: float) -> str:
    """``5.40× faster`` or, below 1, ``2.00× slower``."""
    return (f"{ratios.fmt_ratio(ratio)} faster" if ratio >= 1 else f"{ratios.fmt_ratio(1 / ratio)} slower")


def ladder_lines(rungs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The rungs as views print them: consecutive rungs missing for the same reason said once, their
    names joined ("matmul kernels' time ratio, device-time ratio, step-time ratio"). Each line:
    {"name", "ratio" (None: not measured), "how", "lost" (or None)}."""
    out: List[Dict[str, Any]] = []
    for i, r in enumerate(rungs):
        if r["ratio"] is None and i and rungs[i - 1]["ratio"] is None and rungs[i - 1]["how"] == r["how"]:
            continue  # the same missing piece as the rung above: said once
        same = []
        for x in rungs[i:]:
            if x["ratio"] is not None or x["how"] != r["how"]:
                break
            same.append(x["rung"])
        name = ", ".join(same) if r["ratio"] is None and len(same) > 1 else r["rung"]
        out.append({"name": name, "ratio": r["ratio"], "how": r["how"], "lost": r.get("lost")})
    return out


def group_of(cell: CellResult) -> str:
    """The cells a precision is compared within: the cell's id without its precision
    ("cifar/resnet18/fastai", "cifar/resnet18/torch/224px")."""
    k = key_of(cell)
    return "/".join(k[:2] + k[3:])


def explain(results: RunResults, patterns: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    """Per cell (ok, matching any of the shell ``patterns`` on its id; all where None): its id, group (:func:`group_of`),
    precision, verdict (the line, its kind and short form: :func:`bound`), its profiled step's parts
    (:func:`step_parts`, seconds per step, None without a profile) with the step they decompose
    (``step_s``: the timed one where recorded), the window's own and the timed step (``profiled_step_s``,
    ``timed_step_s``), the kernels' summed and busy time (``device_s``, ``busy_s``), what the window cost
    (``window_cost``: [seconds, share of the cell], :func:`window_cost`) and largest kernels
    (:func:`largest_kernels`), its achieved TFLOP/s against the peak (:func:`efficiency`, None where
    unmeasured), the merged run whose calibration holds for it (``calibration_from``: None for the
    run's own, :func:`calibration_for`) and against its fp32 cell (same workload, model, engine and
    settings) the ladder."""
    cells = [c for c in results.cells if c.status == "ok" and c.precision in BY_NAME
             and matches(c.cell_id, patterns)]
    by_key = {key_of(c): c for c in results.cells if c.status == "ok"}
    out = []
    for c in cells:
        k = key_of(c)
        base = by_key.get(k[:2] + (ratios.BASE_PRECISION,) + k[3:])
        calibration = calibration_for(results.environment, c.cell_id)
        v = bound(c)
        parts, p = step_parts(c), profile_of(c)
        row: Dict[str, Any] = {"cell_id": c.cell_id, "group": group_of(c), "precision": c.precision,
                               "verdict": v.text, "verdict_kind": v.kind, "verdict_short": v.short,
                               "step_parts_s": None if parts is None else [[n, t] for n, t in parts],
                               "step_s": step_s(p) if p else None,
                               "profiled_step_s": _num(p, "step_s"),
                               "timed_step_s": _num(p, "timed_step_s"),
                               "device_s": _num(p, "device_s"), "busy_s": busy_s(p) if p else None,
                               "window_cost": window_cost(c),
                               "largest_kernels": largest_kernels(c),
                               "efficiency": efficiency(c, calibration["peak_tflops_measured"]),
                               "calibration_from": calibration["source"]}
        if c.precision != ratios.BASE_PRECISION:
            row["ladder"] = (ladder(c, base, calibration) if base is not None
                             else [_rung(MEASURED, None, "not measured: no fp32 cell of these settings")])
            row["answer"] = answer(c, base or c, row["ladder"])
        out.append(row)
    return out


def across_engines(results: RunResults, rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The article's question across engines: per workload, model and reduced precision that two
    engines or more measured (at the same image size and batch), each engine's measured speedup over
    its own fp32 cell and its verdict (short form), fastest first; from :func:`explain`'s ``rows``.
    Each: {"cells": "cifar/resnet18 amp-fp16" (with any size or batch part), "engines": [{"engine",
    "cell_id", "speedup", "verdict_short"}]}."""
    by_id = {c.cell_id: c for c in results.cells}
    groups: Dict[Tuple[str, ...], List[Dict[str, Any]]] = {}
    for r in rows:
        c = by_id.get(r["cell_id"])
        if c is None or "ladder" not in r:
            continue
        k = key_of(c)
        groups.setdefault(k[:3] + k[4:], []).append(
            {"engine": c.engine, "cell_id": c.cell_id, "speedup": r["ladder"][-1]["ratio"],
             "verdict_short": r["verdict_short"]})
    out = []
    for k, members in groups.items():
        if len({m["engine"] for m in members}) < 2:
            continue
        members.sort(key=lambda m: -(m["speedup"] or 0.0))
        out.append({"cells": "/".join(k[:2] + k[3:]) + " " + k[2], "engines": members})
    return out

