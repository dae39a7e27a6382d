"""The telemetry sampler against fake NVML timelines (hand-written fixtures, not measurements)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.nvml_fake import FakeNVML
from kit.env import telemetry
from kit.env.probe import is_unknown
from kit.env.telemetry_summary import attach_energy
from kit.results.schema import CellResult

FIXTURES = Path(__file__).parent / "fixtures" / "nvml"
NO_SUCH_PID = 4_194_400  # above Linux's largest pid_max (2**22): never a real process


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def play(fake: FakeNVML, ticks: int, dt: float = 0.2) -> dict:
    """Sample tick 0..ticks-1 of the fake's timeline, dt seconds apart, then stop."""
    clock = Clock()
    s = telemetry.Sampler(fake, index=0, clock=clock)
    s.start(thread=False)  # samples tick 0
    for i in range(1, ticks):
        clock.t += dt
        fake.tick = i
        s.sample_once()
    clock.t += dt
    return s.stop()


def test_throttle_reason_appearing_mid_run_is_counted_and_flags_the_cell():
    summary = play(FakeNVML(load("h200_580")), ticks=5)
    # reasons sampled: idle, 0, SW power cap, SW power cap, 0, and 0 again at stop.
    assert summary["samples"] == 6
    assert summary["throttle_fraction"]["sw_power_cap"] == pytest.approx(2 / 6)
    assert summary["throttle_fraction"]["hw_thermal"] == 0.0
    assert summary["throttle_reasons"] == ["sw_power_cap"]
    assert summary["throttled"] is True


def test_energy_comes_from_the_driver_counter_when_present():
    summary = play(FakeNVML(load("h200_580")), ticks=5)
    assert summary["energy_source"] == "counter"
    assert summary["energy_j"] == pytest.approx((10_570_000 - 10_000_000) / 1000)
    assert summary["duration_s"] == pytest.approx(1.0)
    assert summary["power_max_w"] == 700.0
    assert summary["power_mean_w"] == pytest.approx((100 + 500 + 690 + 700 + 650 + 650) / 6)
    assert summary["temp_max_c"] == 62
    assert summary["sm_clock_min_mhz"] == 1740
    assert summary["util_mean_pct"] == pytest.approx((0 + 95 + 99 + 99 + 97 + 97) / 6)
    assert summary["gpu"]["name"] == "NVIDIA H200"
    assert isinstance(summary["sampler_overhead_s_per_s"], float) and summary["sampler_overhead_s_per_s"] >= 0


def test_gpu_without_energy_counter_integrates_power_and_says_so():
    summary = play(FakeNVML(load("gtx1080ti_410")), ticks=3)
    assert summary["energy_source"] == "integrated"
    # trapezoids over (0 s, 60 W), (0.2, 240), (0.4, 250), (0.6, 250)
    assert summary["energy_j"] == pytest.approx(30 + 49 + 50)
    assert "Not Supported" in summary["energy_note"]
    assert summary["unsupported"]["energy_counter"] == "NVMLError_NotSupported: Not Supported"


def test_idle_and_rare_reasons_do_not_count_as_throttling():
    data = load("h200_580")
    data["gpus"][0]["timeline"] = [{"power_mw": 300000, "energy_mj": 0, "sm_clock": 1980, "mem_clock": 3201, "temperature": 40,
                                    "util_gpu": 90, "util_mem": 30, "clock_event_reasons": 0x1}] * 40
    data["gpus"][0]["timeline"][20] = dict(data["gpus"][0]["timeline"][20], clock_event_reasons=0x40)
    summary = play(FakeNVML(data), ticks=40)
    assert summary["throttle_fraction"]["hw_thermal"] == pytest.approx(1 / 41)
    assert summary["throttled"] is False and summary["throttle_reasons"] == []


def test_unsupported_metrics_are_unknown_and_asked_only_once():
    data = load("h200_580")
    for entry in data["gpus"][0]["timeline"]:
        entry["clock_event_reasons"] = {"error": "NotSupported"}
    fake = FakeNVML(data)
    summary = play(fake, ticks=5)
    assert is_unknown(summary["throttled"]) and "Not Supported" in summary["throttled"]["reason"]
    assert fake.calls["nvmlDeviceGetCurrentClocksEventReasons"] == 1


def test_older_nvml_bindings_fall_back_to_throttle_reasons():
    data = load("h200_580")
    data["no_clocks_event_reasons_api"] = True
    fake = FakeNVML(data)
    summary = play(fake, ticks=5)
    assert summary["throttled"] is True
    assert fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 6


def test_another_process_on_the_gpu_is_detected_but_not_our_own_or_our_children():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        data = load("h200_580")
        tl = data["gpus"][0]["timeline"]
        tl[0]["processes"] = [{"pid": os.getpid(), "used_memory": 1}, {"pid": child.pid, "used_memory": 1}]
        tl[1]["processes"] = tl[0]["processes"]
        summary = play(FakeNVML(data), ticks=2, dt=1.0)
        assert summary["other_processes"] is False and summary["other_pids"] == []

        tl[1]["processes"] = tl[0]["processes"] + [{"pid": NO_SUCH_PID, "used_memory": 1}]
        summary = play(FakeNVML(data), ticks=3, dt=1.0)
        assert summary["other_processes"] is True and summary["other_pids"] == [NO_SUCH_PID]
    finally:
        child.kill()
        child.wait()


def test_background_thread_samples_and_stop_is_idempotent():
    fake = FakeNVML(load("h200_580"))
    sampler = telemetry.start_for_device("cuda:0", nvml=fake, hz=100.0)
    assert isinstance(sampler, telemetry.Sampler)
    time.sleep(0.2)
    first = sampler.stop()
    assert first["available"] is True and first["samples"] >= 5
    assert sampler.stop() is first
    assert fake.initialised == 0, "stop() must shut NVML down"


def test_cpu_device_and_missing_driver_give_unavailable_with_a_reason():
    assert telemetry.start_for_device("cpu").stop() == {"available": False, "reason": "device 'cpu' is not an NVIDIA GPU"}
    out = telemetry.start_for_device("cuda", nvml=FakeNVML(load("no_driver"))).stop()
    assert out["available"] is False and "NVML Shared Library Not Found" in out["reason"]


@pytest.mark.parametrize(
    "device, visible, expected",
    [
        ("cuda", None, {"index": 0}),
        ("cuda:1", None, {"index": 1}),
        ("cuda:1", "2,3", {"index": 3}),
        ("cuda:0", "GPU-abc", {"uuid": "GPU-abc"}),
        ("cuda:1", "0", None),
        ("cuda:0", "MIG-xyz", None),
        ("cpu", None, None),
    ],
)
def test_device_strings_map_to_the_physical_gpu(device, visible, expected):
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    where, how = telemetry.resolve_gpu(device, env=env)
    assert where == expected, how


def _result_with(telemetry_summary: dict) -> CellResult:
    return CellResult(
        "cifar", "resnet18", "fp32", "torch", "ok", throughput_unit="images",
        repeats=[{"epoch_seconds": [10.0, 10.0], "throughput_items_per_s": 1000.0}, {"epoch_seconds": [12.0], "throughput_items_per_s": 800.0}],
        telemetry=telemetry_summary,
    )


def test_attach_energy_adds_per_epoch_energy_and_items_per_joule_labelled_as_estimates():
    # FIXTURE numbers: a made-up 30 s cell that used 6000 J (200 W mean).
    result = _result_with({"available": True, "energy_j": 6000.0, "duration_s": 30.0, "power_mean_w": 190.0})
    attach_energy(result)
    assert result.repeats[0]["energy_j_per_epoch"] == [2000.0, 2000.0]
    assert result.repeats[1]["energy_j_per_epoch"] == [2400.0]
    assert result.repeats[0]["items_per_j"] == pytest.approx(5.0)
    t = result.telemetry
    assert t["cell_mean_power_w"] == pytest.approx(200.0)
    assert t["items_per_j"] == pytest.approx((5.0 + 4.0) / 2)
    assert t["items_per_j_unit"] == "images per joule"
    assert t["energy_attribution"].startswith("estimate")


def test_attach_energy_leaves_unavailable_telemetry_alone():
    result = _result_with({"available": False, "reason": "cpu"})
    attach_energy(result)
    assert "energy_j_per_epoch" not in result.repeats[0]
    assert result.telemetry == {"available": False, "reason": "cpu"}


def test_a_torch_uuid_nvml_does_not_know_falls_back_to_the_index(monkeypatch):
    monkeypatch.setattr(telemetry, "_torch_uuid", lambda n: "GPU-not-a-real-uuid")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sampler = telemetry.start_for_device("cuda:0", nvml=FakeNVML(load("h200_580")), hz=50.0)
    summary = sampler.stop()
    assert summary["available"] is True
    assert summary["gpu"]["name"] == "NVIDIA H200" and summary["gpu"]["mapping"].startswith("cuda index = NVML index")


# -- a data-parallel cell's GPUs --------------------------------------------------


def test_a_data_parallel_cell_samples_every_rank_gpu_and_sums_their_energy(monkeypatch):
    """kit run --gpus 2: the ranks train on GPUs 0 and 1, and the cell's throughput is both
    ranks' together, so its energy must be both GPUs' too (sampling GPU 0 alone halved the
    joules per image it reported)."""
    from kit.results.schema import CellSpec
    from kit.runner.cell_run import cell_devices

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    two = load("h200_580")
    second = json.loads(json.dumps(two["gpus"][0]))
    second["uuid"] = second["uuid"][:-1] + "2"
    two["gpus"].append(second)
    spec = CellSpec("lstm", "tensor-core", "amp-bf16", "kit", {"world_size": 2})
    assert cell_devices(spec, "cuda") == ["cuda:0", "cuda:1"]
    assert cell_devices(spec, "cpu") == ["cpu"]  # gloo ranks on the CPU: nothing to sample
    assert cell_devices(CellSpec("lstm", "tensor-core", "amp-bf16", "kit", {}), "cuda:1") == ["cuda:1"]
    fake = FakeNVML(two)
    group = telemetry.start_for_devices(cell_devices(spec, "cuda"), nvml=fake, hz=100.0)
    time.sleep(0.2)
    out = group.stop()
    assert out["available"] and out["gpus_sampled"] == 2 and len(out["per_gpu"]) == 2
    each = [p["energy_j"] for p in out["per_gpu"]]  # the fake's counters stand still between ticks
    assert all(isinstance(e, float) for e in each) and out["energy_j"] == pytest.approx(sum(each))
    watts = [p["power_mean_w"] for p in out["per_gpu"]]
    assert all(w > 0 for w in watts) and out["power_mean_w"] == pytest.approx(sum(watts))
    assert fake.initialised == 0, "every sampler shut NVML down"


def test_the_total_of_a_data_parallel_cell_is_unknown_where_a_gpu_did_not_measure():
    from kit.env.telemetry_summary import combine_gpus

    # FIXTURE numbers: two GPUs of a made-up 30 s cell
    a = {"available": True, "energy_j": 6000.0, "power_mean_w": 200.0, "power_max_w": 300.0, "duration_s": 30.0,
         "util_mean_pct": 90.0, "throttled": False, "other_processes": False}
    b = dict(a, energy_j=5400.0, power_mean_w=180.0, util_mean_pct=70.0, throttled=True, throttle_reasons=["sw_power_cap"])
    both = combine_gpus([a, b])
    assert both["energy_j"] == 11400.0 and both["power_mean_w"] == 380.0 and both["util_mean_pct"] == 80.0
    assert both["throttled"] is True and both["throttle_reasons"] == ["sw_power_cap"]
    result = _result_with(both)
    attach_energy(result)
    assert result.telemetry["cell_mean_power_w"] == pytest.approx(380.0)  # both GPUs' power per image
    blind = combine_gpus([a, {"available": False, "reason": "NVML not usable"}])
    assert is_unknown(blind["energy_j"]) and "GPU 1 of the cell's 2" in blind["energy_j"]["reason"]
    result = _result_with(blind)
    attach_energy(result)
    assert is_unknown(result.telemetry["energy_j_per_epoch"])  # no per-image energy from half the GPUs
    assert combine_gpus([a]) is a


# -- energy over the timed steps ---------------------------------------------------


def _busy_between(first: int, last: int, ticks: int = 30, dt: float = 0.2, idle_w: float = 100.0, busy_w: float = 500.0):
    """FIXTURE timeline (invented): idle power, then busy from tick ``first`` to ``last``, then idle
    again; the energy counter adds each tick's power over ``dt``, as the driver's would."""
    fixture = load("h200_580")
    base = dict(fixture["gpus"][0]["timeline"][0])
    timeline, mj = [], 10_000_000.0
    for i in range(ticks):
        watts = busy_w if first <= i < last else idle_w
        timeline.append(dict(base, power_mw=int(watts * 1000), energy_mj=int(mj), clock_event_reasons=0))
        mj += watts * dt * 1000
    fixture["gpus"][0]["timeline"] = timeline
    return FakeNVML(fixture)


def _play_with_windows(fake: FakeNVML, ticks: int, windows_ticks: list, dt: float = 0.2) -> dict:
    clock = Clock()
    t0 = clock.t
    s = telemetry.Sampler(fake, index=0, clock=clock)
    s.start(thread=False)
    for i in range(1, ticks):
        clock.t += dt
        fake.tick = i
        s.sample_once()
    clock.t += dt
    return s.stop([[t0 + a * dt, t0 + b * dt] for a, b in windows_ticks])


def test_energy_per_item_comes_from_the_timed_steps_not_the_whole_cell():
    """A cell whose warm-up idles at 100 W and whose timed steps draw 500 W: items per joule is the
    steady throughput over the timed steps' 500 W, not over the cell's mean (which the warm-up pulls
    down, so items per joule read too high: 1.9x here)."""
    summary = _play_with_windows(_busy_between(10, 25), 30, [(10, 17), (18, 25)])
    assert summary["steady_energy_source"] == "counter" and summary["steady_windows"] == 2
    assert summary["steady_seconds"] == pytest.approx(2.8)
    assert summary["steady_power_w"] == pytest.approx(500.0)
    result = _result_with(summary)
    attach_energy(result)
    t = result.telemetry
    assert t["energy_basis"] == "steady" and "timed steps" in t["energy_attribution"]
    assert result.repeats[0]["items_per_j"] == pytest.approx(1000.0 / 500.0)
    assert result.repeats[0]["energy_j_per_epoch"] == [pytest.approx(5000.0)] * 2
    assert t["cell_mean_power_w"] < 300.0  # what the old figure divided by


def test_timed_steps_too_short_for_the_sampler_fall_back_to_the_cell_mean_and_say_why():
    summary = _play_with_windows(_busy_between(10, 25), 30, [(10, 12)])  # 0.4 s at 5 Hz
    assert is_unknown(summary["steady_power_w"]) and "under the 1 s" in summary["steady_power_w"]["reason"]
    result = _result_with(summary)
    attach_energy(result)
    assert result.telemetry["energy_basis"] == "cell" and result.telemetry["energy_attribution"].startswith("estimate")
    assert result.repeats[0]["items_per_j"] == pytest.approx(1000.0 / result.telemetry["cell_mean_power_w"])


def test_without_an_energy_counter_the_timed_steps_power_is_integrated():
    fake = _busy_between(5, 25)
    for tick in fake.data["gpus"][0]["timeline"]:
        tick.pop("energy_mj")
    summary = _play_with_windows(fake, 30, [(10, 20)])
    assert summary["steady_energy_source"] == "integrated"
    assert summary["steady_power_w"] == pytest.approx(500.0)


def test_the_runner_takes_the_repeats_timed_spans_out_of_the_results():
    from kit.runner.cell_run import timed_spans

    result = _result_with({"available": False, "reason": "cpu"})
    result.repeats[0]["steady_windows"] = [[1.0, 2.0]]
    result.repeats[1]["steady_windows"] = [[3.0, 4.5], "junk"]
    assert timed_spans(result) == [[1.0, 2.0], [3.0, 4.5]]
    assert all("steady_windows" not in r for r in result.repeats)
    assert timed_spans(result) is None


def test_a_data_parallel_cell_sums_its_gpus_energy_over_the_timed_steps():
    from kit.env.telemetry_summary import combine_gpus

    a = {"available": True, "energy_j": 6000.0, "power_mean_w": 200.0, "power_max_w": 300.0, "duration_s": 30.0,
         "steady_energy_j": 1000.0, "steady_power_w": 500.0}
    both = combine_gpus([a, dict(a, steady_energy_j=900.0, steady_power_w=450.0)])
    assert both["steady_power_w"] == 950.0 and both["steady_energy_j"] == 1900.0
    plain = {k: v for k, v in a.items() if not k.startswith("steady")}
    assert "steady_power_w" not in combine_gpus([plain, dict(plain)])
