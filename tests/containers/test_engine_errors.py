"""The errors a user meets before any image is involved: a stopped engine, a bad GPU index.
"""

from __future__ import annotations

import socket

import pytest

from container_support import KIT, ROOT, docker_client, kit_env, run_cmd

pytestmark = pytest.mark.docker


def test_stopped_engine_is_reported_with_a_remedy(tmp_path):
    dead = tmp_path / "dead.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(dead))
    s.close()  # the socket file stays; nothing listens: connection refused
    for host in (f"unix://{dead}", f"unix://{tmp_path / 'missing.sock'}"):
        proc = run_cmd(KIT + ["launch", "--stack", "cpu"], timeout=60, env=kit_env(DOCKER_HOST=host), cwd=tmp_path)
        assert proc.returncode == 7, proc.stderr
        assert "Docker engine is not running" in proc.stderr and "what to do:" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_bad_gpu_index_is_reported():
    proc = run_cmd(KIT + ["launch", "--gpu", "x"], timeout=60, env=kit_env())
    assert proc.returncode == 2 and "GPU index" in proc.stderr
    # A GPU host with one GPU (NVML answered from a fixture), the real engine:
    # the checks stop before any container starts.
    from fixtures.nvml_fake import FakeNVML
    from kit.errors import EnvironmentCheckError
    from kit.launch.launcher import launch

    nvml = FakeNVML.from_file(ROOT / "tests" / "fixtures" / "nvml" / "h200_580.json")
    with pytest.raises(EnvironmentCheckError, match="GPU 7"):
        launch("7", "cuda12", client=docker_client(), nvml=nvml)

