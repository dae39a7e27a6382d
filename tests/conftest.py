import os
import shutil
from pathlib import Path

import pytest

# Tests never touch the network and never read the user's data or results folders.
os.environ.setdefault("KIT_NO_NETWORK_TESTS", "1")


def pytest_collection_modifyitems(config, items):
    """GPU tests need a CUDA device; browser tests need Chromium; docker tests need an engine."""
    has_gpu = _has_cuda()
    has_chromium = bool(shutil.which("chromium") or shutil.which("chromium-browser"))
    has_docker = os.environ.get("KIT_DOCKER_TESTS") == "1"
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU here"))
        if "browser" in item.keywords and not has_chromium:
            item.add_marker(pytest.mark.skip(reason="Chromium not installed (scripts/ci_setup.sh installs it)"))
        if "docker" in item.keywords and not has_docker:
            item.add_marker(pytest.mark.skip(reason="container tests run in .ci/run's container job (KIT_DOCKER_TESTS=1)"))


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """Run the CLI in an empty folder so ./data and ./results are the test's own."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KIT_RESULTS_DIR", str(tmp_path / "results"))
    return Path(tmp_path)


@pytest.fixture(scope="session")
def doc_outputs():
    """scripts/doc_outputs.py as a module (a script, not a package module: loaded from its file once)."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[1] / "scripts" / "doc_outputs.py"
    spec = importlib.util.spec_from_file_location("doc_outputs", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["doc_outputs"] = mod  # its dataclass looks its module up while the class is made
    spec.loader.exec_module(mod)
    return mod

