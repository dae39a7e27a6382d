"""scripts/check_locks.py: lock parsing and wheel-tag matching, with index answers given in-process (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.modules import load_script

ROOT = Path(__file__).resolve().parents[1]
check_locks = load_script("check_locks", register=True)  # dataclasses look their module up in sys.modules

Target = check_locks.Target
PY311 = Target((3, 11), (2, 36))
PY37 = Target((3, 7), (2, 27))

LOCK = """\
# a fixture lock
# stack: demo
# python: 3.11
# glibc: 2.36
# arch: x86_64
torch==2.14.1
Typing_Extensions==4.16.0  # trailing comment
nvidia-ml-py3==7.352.0 ; sys_platform == "linux"
"""


def test_lock_header_and_pins_are_parsed():
    lock = check_locks.parse_lock(LOCK, "demo.txt")
    assert lock.stack == "demo"
    assert (lock.target.python, lock.target.glibc, lock.target.arch) == ((3, 11), (2, 36), "x86_64")
    assert [(p.name, p.version, p.line) for p in lock.pins] == [
        ("torch", "2.14.1", 6), ("typing-extensions", "4.16.0", 7), ("nvidia-ml-py3", "7.352.0", 8)]


@pytest.mark.parametrize("bad", ["torch>=2.0", "torch", "torch==2.1\ntorch==2.2"])
def test_a_lock_that_is_not_exact_pins_is_refused(bad):
    with pytest.raises(ValueError):
        check_locks.parse_lock("# python: 3.11\n# glibc: 2.36\n" + bad)


def test_a_lock_without_its_target_is_refused():
    with pytest.raises(ValueError, match="python"):
        check_locks.parse_lock("torch==2.14.1\n")


def test_every_real_lock_parses_and_names_its_target():
    for path in sorted((ROOT / "docker" / "locks").glob("*.txt")):
        lock = check_locks.parse_lock(path.read_text(), str(path))
        assert lock.stack == path.stem and lock.pins


@pytest.mark.parametrize("filename,target,fits", [
    ("torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", PY311, True),
    ("torch-2.14.1-cp312-cp312-manylinux_2_28_x86_64.whl", PY311, False),       # other Python
    ("torch-2.14.1-cp311-cp311-manylinux_2_28_aarch64.whl", PY311, False),      # other arch
    ("torch-2.14.1-cp311-cp311-win_amd64.whl", PY311, False),
    ("x-1.0-cp311-cp311-manylinux_2_39_x86_64.whl", PY311, False),              # needs a newer glibc than bookworm's
    ("x-1.0-py3-none-any.whl", PY311, True),
    ("x-1.0-py2.py3-none-any.whl", PY37, True),
    ("x-1.0-cp37-abi3-manylinux1_x86_64.whl", PY311, True),                     # stable ABI from 3.7 on
    ("x-1.0-cp312-abi3-manylinux1_x86_64.whl", PY311, False),
    ("torch-1.4.0-cp37-cp37m-manylinux1_x86_64.whl", PY37, True),
    ("x-1.0-cp37-cp37-manylinux1_x86_64.whl", PY37, False),                     # 3.7 is the 'm' ABI
    ("x-1.0-cp37-cp37m-manylinux2014_x86_64.whl", PY37, True),                  # glibc 2.17 <= 2.27
    ("x-1.0-cp37-cp37m-manylinux_2_28_x86_64.whl", PY37, False),                # Ubuntu 18.04 has 2.27
    ("x-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", PY311, True),
])
def test_wheel_tags_are_matched_against_the_stack(filename, target, fits):
    assert check_locks.wheel_fits(filename, target) is fits


def _simple(files):
    return json.dumps({"meta": {"api-version": "1.1"}, "name": "x", "files": files}).encode()


def test_judging_a_pin_from_an_index_page():
    pin = check_locks.Pin("fastai", "2.8.12", 1)
    page = check_locks.parse_simple_json(_simple([
        {"filename": "fastai-2.8.12-py3-none-any.whl", "requires-python": ">=3.10", "yanked": False},
        {"filename": "fastai-2.8.12.tar.gz", "requires-python": ">=3.10", "yanked": False},
        {"filename": "fastai-1.0.61-py3-none-any.whl", "requires-python": ">=3.6", "yanked": False},
    ]))
    assert check_locks.judge(pin, page, PY311).how == "wheel"
    old_python = check_locks.judge(pin, page, PY37)
    assert not old_python.ok and ">=3.10" in old_python.how
    missing = check_locks.judge(check_locks.Pin("fastai", "9.9.9", 1), page, PY311)
    assert not missing.ok and "not on the index" in missing.how


def test_sdist_only_pins_pass_with_a_warning_and_yanked_ones_are_flagged():
    pin = check_locks.Pin("nvidia-ml-py3", "7.352.0", 1)
    page = check_locks.parse_simple_json(_simple([{"filename": "nvidia-ml-py3-7.352.0.tar.gz", "yanked": "broken"}]))
    v = check_locks.judge(pin, page, PY37)
    assert v.ok and v.how == "sdist"
    assert any("yanked" in w for w in v.warnings) and any("sdist" in w for w in v.warnings)


def test_release_json_api_is_read_too():
    data = json.dumps({"urls": [{"filename": "rich-15.0.0-py3-none-any.whl", "requires_python": ">=3.8", "yanked": False}]}).encode()
    (f,) = check_locks.parse_release_json(data)
    assert (f.filename, f.requires_python, f.yanked) == ("rich-15.0.0-py3-none-any.whl", ">=3.8", False)


def test_check_reports_every_pin_with_a_fake_index():
    lock = check_locks.parse_lock(LOCK)
    pages = {
        "torch": [check_locks.DistFile("torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", ">=3.10")],
        "typing-extensions": [check_locks.DistFile("typing_extensions-4.16.0-py3-none-any.whl")],
        "nvidia-ml-py3": [],
    }
    verdicts = check_locks.check(lock, fetch=lambda pin, *_a: pages[pin.name], jobs=2)
    assert [v.ok for v in verdicts] == [True, True, False]
