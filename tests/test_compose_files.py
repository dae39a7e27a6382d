"""The compose files build the same images as `kit image build`: their build
arguments must agree with kit.launch.stacks.image_spec for each stack."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

from kit.launch.stacks import image_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("STACK", "LOCK", "PYTHON", "PYTHON_APT", "VENV_PIP", "BUILD_APEX", "APEX_REF", "APEX_COMMIT", "APEX_FROM", "APEX_BUILD_OPTS", "INSTALL_KIT", "KIT_RUNNER", "BASE")


class _Loader(yaml.SafeLoader):
    """Compose's own tags (!reset, !override) read as plain values."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _args(*files: str) -> dict[str, str]:
    args: dict[str, str] = {}
    for f in files:
        doc = yaml.load((ROOT / f).read_text(), Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
        args.update(doc["services"]["bench"]["build"]["args"])
    # ${VAR:-default} -> default (what a user without the variable gets)
    return {k: re.sub(r"^\$\{[A-Z_]+:-(.*)\}$", r"\1", str(v)) for k, v in args.items()}


@pytest.mark.parametrize("stack, files", [
    ("cuda12", ["compose.yaml"]),
    ("cpu", ["compose.yaml", "compose.cpu.yaml"]),
    ("cuda10", ["compose.yaml", "compose.cuda10.yaml"]),
    ("cuda12-fused", ["compose.yaml", "compose.cuda12-fused.yaml"]),
])
def test_compose_build_args_match_kit_image_build(stack, files):
    want = image_spec(stack, ROOT).build_args
    got = _args(*files)
    diff = {k: (got.get(k), want.get(k)) for k in KEYS if str(got.get(k, "")) != str(want.get(k, ""))}
    assert not diff, f"{' + '.join(files)} vs kit image build --stack {stack}: {diff}"


def test_cpu_compose_run_says_no_gpu_was_used():
    """compose.cpu.yaml's run ends with the note `make run` gives without a GPU (the kit prints
    KIT_RUN_NOTE as its last line: tests/test_time_limit.py; tests/containers checks the output)."""
    doc = yaml.load((ROOT / "compose.cpu.yaml").read_text(), Loader=_Loader)  # noqa: S506
    note = doc["services"]["bench"]["environment"]["KIT_RUN_NOTE"]
    assert note.startswith("No GPU was used") and "not GPU results" in note
