"""The environment record: collected by code, explicit unknowns, anonymisable, torch-free."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fixtures.nvml_fake import FakeNVML
from kit.env import identity, record
from kit.env.probe import is_unknown
from kit.results.schema import RunConfig

FIXTURES = Path(__file__).parent / "fixtures" / "nvml"
H200 = FIXTURES / "h200_580.json"

TOP_LEVEL = {
    "record_version", "collected_at", "host", "os", "cpu", "memory", "nvml", "cuda_runtime", "python",
    "packages", "kit", "container", "command_line", "device_requested", "seed", "data",
}


def test_record_has_every_field_and_takes_run_facts_from_the_config():
    config = RunConfig.of(suite="cifar", data="synthetic", seed=7, device="cuda:0", command_line=["kit", "run", "--smoke"])
    rec = record.collect(config, nvml=FakeNVML.from_file(H200), env={})
    assert TOP_LEVEL <= set(rec)
    assert rec["command_line"] == ["kit", "run", "--smoke"]
    assert rec["seed"] == 7 and rec["device_requested"] == "cuda:0"
    assert rec["data"]["source"] == "synthetic" and rec["data"]["synthetic"] is True
    assert rec["nvml"]["driver_version"] == "580.65.06"
    assert rec["nvml"]["gpus"][0]["name"] == "NVIDIA H200"
    assert rec["python"]["version"].count(".") == 2
    assert rec["packages"]["mpkit"] == rec["kit"]["version"]
    assert isinstance(rec["cpu"]["logical_cores"], int)
    json.dumps(rec)  # plain JSON, nothing exotic


def test_missing_facts_are_unknown_with_a_reason_never_empty():
    rec = record.collect(None, nvml=FakeNVML.from_file(FIXTURES / "no_driver.json"), env={})
    assert rec["nvml"]["available"] is False and rec["nvml"]["state"] == "no_driver"
    for key in ("seed", "data", "device_requested"):
        assert is_unknown(rec[key])
    for key in ("image_id", "image_digest"):
        assert is_unknown(rec["container"][key]) and "kit launch" in rec["container"][key]["reason"]
    # not started in one of the kit's images: the run used the user's own environment
    assert rec["container"]["stack"] == "native"

    def walk(value, path="record"):
        assert value != "" and value != {} or path.endswith("unsupported"), f"{path} is empty"
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{path}.{k}")

    walk(rec)


def test_container_facts_come_from_the_launchers_environment():
    env = {"KIT_STACK": "cuda12", "KIT_IMAGE_ID": "sha256:abc", "KIT_IMAGE_DIGEST": "sha256:def", "KIT_HOST_NAME": "lab-box-3"}
    rec = record.collect(None, nvml={"available": False, "state": "no_driver", "reason": "x", "gpus": []}, env=env)
    assert rec["container"]["stack"] == "cuda12"
    assert rec["container"]["image_id"] == "sha256:abc" and rec["container"]["image_digest"] == "sha256:def"
    assert rec["host"]["name"] == "lab-box-3"


def test_anonymize_replaces_host_name_gpu_uuid_and_process_names(monkeypatch):
    monkeypatch.setattr(identity, "MACHINE_ID_FILES", ())  # a machine without a machine-id: the id comes from the name
    data = json.loads(H200.read_text())
    data["gpus"][0]["processes"] = [{"pid": 4242, "used_memory": 1}]
    env = {"KIT_ANONYMIZE": "1", "KIT_HOST_NAME": "alice-workstation"}
    rec = record.collect(None, nvml=FakeNVML(data), env=env)
    text = json.dumps(rec)
    assert "alice-workstation" not in text
    assert rec["host"] == {"name": identity.host_id("alice-workstation"), "host_id": identity.host_id("alice-workstation"),
                           "host_id_from": "host-name", "anonymized": True}
    assert rec["host"]["host_id"].startswith("h-") and len(rec["host"]["host_id"]) == 18
    assert "fixture-h200" not in text
    assert "python3" not in json.dumps(rec["nvml"])
    # The id is stable, so anonymised results from one host still group together.
    assert record.collect(None, nvml=FakeNVML(data), env=env)["host"]["host_id"] == rec["host"]["host_id"]


def test_git_commit_is_unknown_outside_a_checkout(monkeypatch):
    def no_git(*_a, **_k):
        raise FileNotFoundError(2, "No such file or directory: 'git'")

    monkeypatch.setattr(record.subprocess, "run", no_git)
    state = record.git_state({})
    assert is_unknown(state["git_commit"]) and "git" in state["git_commit"]["reason"]
    assert record.git_state({"KIT_GIT_COMMIT": "abc123"})["git_commit"] == "abc123"


def test_collect_never_imports_torch():
    code = (
        "import sys, json; from kit.env import record; "
        "rec = record.collect(None); "
        "print(json.dumps({'torch': 'torch' in sys.modules, 'fastai': 'fastai' in sys.modules, 'source': rec['cuda_runtime']['source']}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    got = json.loads(out.stdout)
    assert got["torch"] is False and got["fastai"] is False
    assert "torch not imported" in got["source"] or got["source"] == "none"


def test_runtime_versions_come_from_torch_once_it_is_imported(monkeypatch):
    class FakeTorch:  # stands in for an imported torch module
        __version__ = "2.9.1+cu128"

        class version:
            cuda = "12.8"

        class backends:
            class cudnn:
                @staticmethod
                def version():
                    return 91002

        class cuda:
            @staticmethod
            def is_available():
                return False

    # the fake is torch only while the record reads it: after the test, other hooks (pytest-randomly
    # reseeds torch in its teardown) must find the real module again
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "torch", FakeTorch)
        rt = record.runtime_versions()
    assert rt == {"source": "torch (imported)", "torch": "2.9.1+cu128", "cuda": "12.8", "cudnn": 91002, "cuda_available": False}


def test_an_apex_source_folder_on_the_path_is_recorded_without_importing_it(tmp_path, monkeypatch):
    """Apex used from a source folder (python-only, on PYTHONPATH) has no package metadata:
    the record must still say where it is and whether it has amp, and never import it."""
    import sys

    from kit.env import record

    pkg = tmp_path / "apex"
    (pkg / "amp").mkdir(parents=True)
    (pkg / "fp16_utils").mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (pkg / "amp" / "__init__.py").write_text("")
    (pkg / "fp16_utils" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    info = record.apex_info({"KIT_APEX_REF": "25.01", "KIT_APEX_SOURCE": "folder"})
    assert info["found"] and info["path"] == str(pkg)
    assert info["has_amp"] and info["has_fp16_utils"]
    assert info["ref"] == "25.01" and info["source"] == "folder"
    assert "apex" not in sys.modules
    (pkg / "amp" / "__init__.py").unlink()
    assert record.apex_info({})["has_amp"] is False  # Apex 25.07 and later


def test_no_apex_is_recorded_as_not_found(tmp_path, monkeypatch):
    import importlib.util

    from kit.env import record

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert record.apex_info({}) == {"found": False}


MACHINE_A, MACHINE_B = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"


def _machine_id_file(tmp_path, raw, name="machine-id"):
    path = tmp_path / name
    path.write_text(raw + "\n")
    return (str(path),)


def test_two_machines_of_one_name_get_two_host_ids_from_their_machine_ids(tmp_path):
    env = {"KIT_HOST_NAME": "vm"}
    a = identity.host_identity(env, False, inside_container=False, machine_id_files=_machine_id_file(tmp_path, MACHINE_A, "a"))
    b = identity.host_identity(env, False, inside_container=False, machine_id_files=_machine_id_file(tmp_path, MACHINE_B, "b"))
    assert a["name"] == b["name"] == "vm"
    assert a["host_id"] != b["host_id"] and a["host_id_from"] == b["host_id_from"] == "machine-id"
    assert MACHINE_A not in json.dumps(a)  # the machine-id itself is never recorded, only a hash of it
    # the same machine renamed keeps its id
    renamed = identity.host_identity({"KIT_HOST_NAME": "lab-box"}, False, inside_container=False,
                                   machine_id_files=_machine_id_file(tmp_path, MACHINE_A, "a"))
    assert renamed["host_id"] == a["host_id"]


def test_a_containers_own_machine_id_is_never_read(tmp_path):
    """An image's /etc/machine-id is shared by every machine that runs it: inside a container the id
    comes from KIT_HOST_ID (kit launch reads the host's) or else from the host name."""
    files = _machine_id_file(tmp_path, MACHINE_A)
    inside = identity.host_identity({"KIT_HOST_NAME": "vm"}, False, inside_container=True, machine_id_files=files)
    assert inside["host_id"] == identity.host_id("vm") and inside["host_id_from"] == "host-name"
    given = identity.host_identity({"KIT_HOST_NAME": "vm", "KIT_HOST_ID": "h-00112233445566aa"}, False,
                                 inside_container=True, machine_id_files=files)
    assert given["host_id"] == "h-00112233445566aa" and given["host_id_from"] == "machine-id"


def test_a_host_id_not_of_the_kits_form_is_ignored(tmp_path):
    rec = identity.host_identity({"KIT_HOST_NAME": "vm", "KIT_HOST_ID": "h-../../etc\x1b[31m"}, False,
                               inside_container=True, machine_id_files=())
    assert rec["host_id"] == identity.host_id("vm") and rec["host_id_from"] == "host-name"


def test_an_empty_or_malformed_machine_id_falls_back_to_the_name(tmp_path):
    for raw in ("", "uninitialized", "xyz"):
        rec = identity.host_identity({"KIT_HOST_NAME": "vm"}, False, inside_container=False,
                                   machine_id_files=_machine_id_file(tmp_path, raw))
        assert rec["host_id"] == identity.host_id("vm") and rec["host_id_from"] == "host-name"
