"""The profiled window of a cell: a few training steps under ``torch.profiler``, after the timed
repeats, turned into the cell's profile (kit.results.step_profile derives it; explain reads it).

    timed repeats (clocks closed, records made)
      -> [warm-up steps, unprofiled]  -> profiler started (the device's activity on a GPU, the
         operators on a CPU: ACTIVITIES)
      -> sync, t0 -> N steps of the same step function the repeats ran -> sync, t1
      -> profiler stopped -> its device events (name, duration, start) -> the profile

The window runs after every figure of the repeats was taken, so it cannot change them; it
changes no setting of the cell's method (kit.results.method), and runs where the run's config says
(by default on a GPU: ``RunConfig.profiles``, ``CellContext.profile_steps``). A failure in the
window costs the profile, never the cell: the profile says what failed.

What is read from the profiler: every event whose device type is CUDA (kernels, copies and sets, as
CUPTI reports them) with its own duration, but for user annotations (:func:`device_events`). Kernels
that run inside a CUDA-graph replay are reported by CUPTI as kernels of their own, under the replay's
``cudaGraphLaunch``: the H200
tables recorded from replays of the graphed LSTM step with this same profiler
(references/h200/lstm/probe/prof/, torch 2.11 + CUDA 13.0: every kernel row's count is a multiple
of the 40 replays, with no CPU time of its own) show them. On other stacks it is assumed, and
checked by tests/test_profile_window_gpu.py on the GPU it runs on (a captured step's device time
must fill most of its timed step); a window whose profiler saw no device event says so
(``available: false``) instead of reporting a device that did nothing.

CUPTI, the library the profiler traces the device with, stays attached to the process after a
profile unless it is torn down, and slows what runs after it: the window asks for the teardown
(:func:`release_cupti_reason`), so that the cells timed after it in the same process run as if no
window had run (tests/test_profile_window_gpu.py times a cell before and after a window). Where
the teardown is not safe (CUDA before 12.6, beside CUDA graphs) a GPU cell runs no window and its
profile says why.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import time
from typing import Any, Callable, Iterator

from kit.bench import timing
from kit.bench.distributed import state as data_parallel
from kit.results import step_profile

log = logging.getLogger("kit.bench.profile_window")


#: what the window traces on each kind of device. On a GPU only the device's activity (CUPTI: kernels,
#: copies, sets and the runtime calls that launch them), not the CPU operators: the device's events are
#: all the profile reads there. Windows that traced every operator on the host as well ran up to 90%
#: longer than the timed step in a host-bound fastai cell on an H100 (references/h100/explain/), and up to
#: 44% traced on the device alone (references/h100/explain/r7/). On a CPU the operators are all there is
#: to trace.
ACTIVITIES = {"cuda": ("CUDA",), "cpu": ("CPU",)}


def _activities(device: str) -> tuple:
    return ACTIVITIES["cuda" if device.startswith("cuda") else "cpu"]


def source(steps: int, where: str = "after the timed repeats", device: str = "cuda") -> str:
    """How the window was taken on ``device``, as the profile names it (the activities traced included)."""
    return f"torch.profiler ({'+'.join(_activities(device))} activity), {steps} steps {where}"


#: the CUDA release from which CUPTI can be finalized after a window and set up again for the next
#: one in a process that replays CUDA graphs (PyTorch turns the teardown off below it: "crashes on
#: 2nd non-lazy CUPTI re-init after teardown (CUDA 12)", torch/profiler/profiler.py; fixed in 12.6,
#: github.com/pytorch/pytorch/pull/146604)
TEARDOWN_FROM_CUDA = (12, 6)


def _cuda_release() -> tuple | None:
    import torch

    try:
        return tuple(int(x) for x in str(torch.version.cuda).split(".")[:2])
    except (TypeError, ValueError):
        return None


def release_cupti_reason() -> str | None:
    """Make the profiler release CUPTI when a window stops, or say why it cannot (None: it will).

    Kineto keeps CUPTI attached after a profile unless ``TEARDOWN_CUPTI=1`` (libkineto's
    CuptiActivityProfiler reads it when the trace stops), and an attached CUPTI slows the work that
    follows it in the process (github.com/pytorch/pytorch/issues/144455: 10-20% in training): the
    next cells of the run would be timed under it. So the window asks for the teardown, and runs
    only where the teardown is safe with CUDA graphs."""
    said = os.environ.get("TEARDOWN_CUPTI")
    if said is not None and said != "1":
        return (f"TEARDOWN_CUPTI={said} is set: the profiler would stay attached after the window and slow "
                "the cells timed after it in this process")
    release = _cuda_release()
    if release is None or release < TEARDOWN_FROM_CUDA:
        shown = ".".join(map(str, release)) if release else "unknown"
        return (f"CUDA {shown}: before CUDA {'.'.join(map(str, TEARDOWN_FROM_CUDA))} the profiler cannot release CUPTI "
                "after a window in a process that replays CUDA graphs without risking a crash, and CUPTI left "
                "attached would slow the cells timed after it")
    os.environ["TEARDOWN_CUPTI"] = "1"
    return None


def not_profiled_reason(device: str) -> str | None:
    """Why no window can be profiled here (None: it can)."""
    if data_parallel.active() is not None:
        return "data-parallel cells are not profiled (every rank would have to run the window's steps together)"
    try:
        import torch.profiler  # noqa: F401
        from torch.autograd import kineto_available
    except Exception as exc:  # an old or stripped build
        return f"torch.profiler is not available in this PyTorch ({exc.__class__.__name__}: {exc})"
    if not kineto_available():
        return "this PyTorch was built without Kineto, which torch.profiler needs to trace the device"
    if device.startswith("cuda"):
        return release_cupti_reason()
    return None


@contextlib.contextmanager
def _native_stderr_to_log() -> Iterator[None]:
    """Kineto, the profiler's C++ side, writes status lines (``profiler_start``, ``profiler_stop``,
    a CPU-only machine's failed GPU count) straight to the process's stderr, in the middle of the
    run's progress display: while the profiler starts and stops they go to the run's log instead."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no real stderr (a test's capture): leave it be
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace").strip()
            if text:
                log.info("torch.profiler (Kineto) said:\n%s", text)


class Window:
    """A profiled window driven from outside (a fastai callback): :meth:`start` before the first
    of ``steps`` steps, :meth:`stop` after the last; :meth:`stop` returns the profile."""

    def __init__(self, device: str, steps: int, where: str = "after the timed repeats"):
        self.device, self.steps = device, steps
        self.cuda = device.startswith("cuda")
        self.source = source(steps, where, device)
        self.t_created = time.perf_counter()
        self._prof: Any = None
        self._t0: float | None = None

    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        timing.sync(self.device)  # nothing of the steps before the window runs inside it
        self._t_started = time.perf_counter()
        activities = [getattr(ProfilerActivity, a) for a in _activities(self.device)]
        self._prof = profile(activities=activities, record_shapes=False, profile_memory=False, with_stack=False)
        with _native_stderr_to_log():
            self._prof.start()
        self._t0 = timing.now(self.device)
        self._t0_host = time.perf_counter()

    def stop(self) -> dict:
        wall = timing.now(self.device) - self._t0  # every kernel of the window has finished
        t_steps_done = time.perf_counter()
        with _native_stderr_to_log():
            self._prof.stop()
            t_stopped = time.perf_counter()
            profile = (self._device_profile(device_events(self._prof), wall) if self.cuda
                       else self._host_profile(self._prof.events(), wall))
        done = time.perf_counter()
        profile["window_wall_s"] = done - self.t_created
        profile["window_phases_s"] = {"before": self._t_started - self.t_created,
                                      "profiler_start": self._t0_host - self._t_started,
                                      "steps": t_steps_done - self._t0_host,
                                      "profiler_stop": t_stopped - t_steps_done,
                                      "read": done - t_stopped, "after": 0.0}
        return profile

    def ended(self, profile: dict) -> dict:
        """Count into ``profile``'s window what its caller ran after :meth:`stop` until now (a fastai
        window's fit ending: its loader's workers shut down), as the phase ``after``."""
        if isinstance(profile.get("window_wall_s"), float):
            wall = time.perf_counter() - self.t_created
            profile.setdefault("window_phases_s", {})["after"] = wall - profile["window_wall_s"]
            profile["window_wall_s"] = wall
        return profile

    def abandon(self) -> None:
        """Stop a started profiler without a profile (the window failed)."""
        if self._prof is not None:
            try:
                with _native_stderr_to_log():
                    self._prof.stop()
            except Exception:  # already stopped, or never fully started
                pass

    def _device_profile(self, events: list, wall: float) -> dict:
        """The profile of a GPU window from its device events (:func:`device_events`)."""
        kernels = [(name, end - start) for name, start, end in events]
        intervals = [(start, end) for _, start, end in events]
        return step_profile.device_profile(kernels, wall, self.steps, self.source, intervals=intervals)

    def _host_profile(self, events: Any, wall: float) -> dict:
        """The profile of a CPU window from the profiler's operator events (their own time: the event tree
        ``prof.events()`` builds)."""
        ops = [(e.name, e.self_cpu_time_total * 1e-6) for e in events
               if getattr(getattr(e, "device_type", None), "name", "") == "CPU" and not getattr(e, "is_async", False)]
        return step_profile.host_profile(
            ops, wall, self.steps, self.source,
            "the device is the CPU: no device kernels to time (step_s and the CPU operators' own time, "
            "host_op_s, are host time)")


def device_events(prof: Any) -> list:
    """The device's work in a stopped profiler, as ``(name, start_s, end_s)``: every event whose device
    type is CUDA, but for user annotations (a range the profiler mirrors onto the device's timeline,
    ``Optimizer.step#SGD.step``, spans kernels already counted; torch's own device totals leave them out
    the same way) and the events the profiler hides.

    Read from the profiler's results as Kineto hands them over (``prof.profiler.kineto_results``), the
    records ``prof.events()`` is built from: that call also builds the operators' event tree in Python,
    which the device's events do not need, at about 45 microseconds an event (1.9 s for 42,000 events on
    the CI machine's CPU), and an eager step of a host-bound cell makes tens of thousands of them.
    Where a PyTorch has no such results, ``prof.events()`` gives the same events."""
    import torch

    return _events_of(prof, torch.autograd.DeviceType.CUDA)


def _events_of(prof: Any, device_type: Any) -> list:
    import torch

    results = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    try:
        if results is not None:
            t0 = results.trace_start_ns()  # the records' clock is the epoch's, in integer nanoseconds: seconds
            names: dict = {}               # from the trace's start keep them to the nanosecond
            out = []
            for e in results.events():
                if e.device_type() != device_type or e.is_user_annotation() or getattr(e, "is_hidden_event", bool)():
                    continue
                raw = e.name()
                name = names.get(raw)
                if name is None:
                    name = names[raw] = torch._C._demangle(raw)
                out.append((name, (e.start_ns() - t0) * 1e-9, (e.end_ns() - t0) * 1e-9))
            return out
    except AttributeError:  # a PyTorch whose records lack one of these readers: its event list has them
        pass
    return [(str(e.name), e.time_range.start * 1e-6, e.time_range.end * 1e-6) for e in prof.events()
            if e.device_type == device_type and not getattr(e, "is_user_annotation", False)]


def run(step: Callable[[], Any], device: str, steps: int, warmup: int = 0,
        where: str = "after the timed repeats") -> dict:
    """Profile ``steps`` calls of ``step`` (after ``warmup`` unprofiled ones); the profile, or one
    that says why there is none. ``step`` must be the step the timed repeats ran."""
    t0 = time.perf_counter()
    why = not_profiled_reason(device)
    if why:
        return step_profile.unavailable(why, source(steps, where, device))
    window = Window(device, steps, where)
    window.t_created = t0
    try:
        for _ in range(warmup):
            step()
        window.start()
        for _ in range(steps):
            step()
        return window.stop()
    except KeyboardInterrupt:
        window.abandon()
        raise
    except Exception as exc:  # the window is an extra: its failure must not cost the cell's figures
        window.abandon()
        log.warning("profiled window failed: %s: %s", exc.__class__.__name__, exc)
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return step_profile.unavailable(f"the profiled window failed: {exc.__class__.__name__}: {first}",
                                        window.source, window_wall_s=time.perf_counter() - t0)


def into(profile: dict, device: str, steps: int, none_left: str = "no step of the timed shape left to profile",
         where: str = "after the timed repeats") -> Callable[..., None]:
    """The ``after`` callback an engine hands its last repeat: called with the repeat's own step
    function (and, where the data bounds it, how many steps of the timed shape there are), it
    profiles ``steps`` of them (:func:`run`) into ``profile``; with none left, ``profile`` says so
    (``none_left``)."""
    def after(step: Callable[[], Any], available: int | None = None) -> None:
        n = steps if available is None else min(steps, available)
        profile.clear()
        profile.update(run(step, device, n, where=where) if n > 0 else
                       step_profile.unavailable(none_left, source(steps, where, device)))
    return after

