"""StepClock on a fake clock: warm-up excluded, time between epochs excluded, no invented numbers."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from kit.bench.timing import StepClock, warmup_steps_for  # noqa: E402


class FakeTime:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


def _two_epochs(ft: FakeTime) -> StepClock:
    """2 epochs of 4 steps of 32 items, warm after 2 steps, on the fake clock (the steady spans too)."""
    clock = StepClock("cpu", warmup_steps=2, time_fn=ft, mono_fn=ft)
    clock.start()
    for epoch in range(2):
        clock.epoch_start()
        for step in range(4):
            # the first step is slow (compilation), later ones take 1 s
            ft.advance(10.0 if (epoch, step) == (0, 0) else 1.0)
            clock.step_done(32)
        clock.epoch_end()
        ft.advance(50.0)  # evaluation between epochs must not count
    return clock


def test_steady_throughput_excludes_warmup_steps_and_time_between_epochs():
    s = _two_epochs(FakeTime()).summary()
    assert s["time_to_first_step_s"] == pytest.approx(10.0)
    assert s["epoch_seconds"] == [pytest.approx(13.0), pytest.approx(4.0)]
    # steady: steps 3-4 of epoch 0 and all 4 of epoch 1 -> 6 steps, 6 s, 192 images
    assert s["steady_items"] == 6 * 32
    assert s["steady_seconds"] == pytest.approx(6.0)
    assert s["throughput_items_per_s"] == pytest.approx(32.0)
    assert s["epoch_seconds_median"] == pytest.approx(8.5)


def test_the_steady_spans_are_recorded_on_the_telemetry_clock():
    """[start, end] of each steady segment, so the runner can take the GPU's energy over exactly
    the steps throughput counts (kit.env.telemetry_summary.steady_energy)."""
    clock = _two_epochs(FakeTime())
    windows = clock.summary()["steady_windows"]
    assert windows == [[pytest.approx(111.0), pytest.approx(113.0)], [pytest.approx(163.0), pytest.approx(167.0)]]
    assert sum(b - a for a, b in windows) == pytest.approx(clock.summary()["steady_seconds"])


def test_no_steady_steps_means_no_throughput_rather_than_a_guess():
    ft = FakeTime()
    clock = StepClock("cpu", warmup_steps=5, time_fn=ft)
    clock.start()
    clock.epoch_start()
    for _ in range(3):
        ft.advance(1.0)
        clock.step_done(8)
    clock.epoch_end()
    s = clock.summary()
    assert s["throughput_items_per_s"] is None and s["steady_seconds"] is None
    assert s["time_to_first_step_s"] == pytest.approx(1.0)


def test_warmup_never_takes_more_than_half_the_run():
    assert warmup_steps_for(4, 10) == 2
    assert warmup_steps_for(1000, 10) == 10
    assert warmup_steps_for(1, 10) == 1
