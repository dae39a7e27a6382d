"""Reading headline facts out of environment records of any age, defensively."""

from __future__ import annotations

from kit.bundle.envinfo import safe_name, summarise_environment
from kit.env.probe import UNKNOWN

# The shape kit.env.record.collect() writes (values are fixture data).
RECORD_SHAPE = {
    "record_version": 1,
    "host": {"name": "fixture-node", "host_id": "h-0000", "anonymized": False},
    "nvml": {"available": True, "driver_version": "580.159", "gpus": [{"index": 0, "name": "NVIDIA H200"}, {"index": 1, "name": "NVIDIA H200"}]},
    "cuda_runtime": {"cuda": "13.0", "cudnn": "9.19.0"},
    "python": {"version": "3.12.3"},
    "packages": {"torch": "2.11.0", "fastai": "2.8.12", "apex": "not installed"},
    "kit": {"version": "0.1.0"},
    "container": {"inside": True, "stack": "cuda12", "image_id": {"value": "unknown", "reason": "fixture"},
                  "image_digest": "sha256:fixture"},
    "data": {"source": "synthetic", "synthetic": True},
}


def test_the_environment_record_shape_is_understood():
    s = summarise_environment(RECORD_SHAPE)
    assert (s.machine, s.gpu, s.gpu_count, s.driver) == ("fixture-node", "NVIDIA H200", 2, "580.159")
    assert (s.cuda, s.cudnn, s.torch, s.fastai, s.python) == ("13.0", "9.19.0", "2.11.0", "2.8.12", "3.12.3")
    assert (s.stack, s.image, s.data_source, s.kit_version) == ("cuda12", "sha256:fixture", "synthetic", "0.1.0")


def test_failed_probes_and_missing_keys_read_as_unknown():
    s = summarise_environment({"container": {"stack": {"value": "unknown", "reason": "KIT_STACK not set"}}, "nvml": {"gpus": []}})
    assert s.stack == UNKNOWN and s.gpu == UNKNOWN and s.driver == UNKNOWN and s.torch == UNKNOWN
    assert summarise_environment(None).machine == UNKNOWN


def test_a_run_outside_containers_is_native():
    assert summarise_environment({"container": {"inside": False, "stack": {"value": "unknown", "reason": "x"}}}).stack == "native"


def test_flat_older_records_are_understood():
    s = summarise_environment({"hostname": "fixture-old", "gpus": [{"name": "GPU X"}], "driver": "418.39", "stack": "cuda10", "torch": "1.4.0"})
    assert (s.machine, s.gpu, s.driver, s.stack, s.torch) == ("fixture-old", "GPU X", "418.39", "cuda10", "1.4.0")


def test_the_data_source_falls_back_to_the_config():
    assert summarise_environment({}, config={"data": "real"}).data_source == "real"


def test_safe_name_keeps_only_portable_characters():
    assert safe_name("NVIDIA GeForce RTX 2080 Ti") == "NVIDIA-GeForce-RTX-2080-Ti"
    assert safe_name("../../etc") == "etc"
    assert safe_name("///") == "unknown"


def test_a_live_record_from_this_machine_has_a_machine_and_torch():
    from kit.env.record import collect

    s = summarise_environment(collect(None, nvml={"available": False, "gpus": []}))
    assert s.machine != UNKNOWN and s.python != UNKNOWN
