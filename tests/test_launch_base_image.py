"""scripts/make_base_image.sh with fake debootstrap and docker commands (no root, no network):
the suite, the mirror and the debootstrap script it picks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "make_base_image.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("tar") is None, reason="needs bash and tar")


def _fake_tools(tmp_path: Path, known_suites: tuple[str, ...]) -> tuple[dict[str, str], Path]:
    """A PATH with `debootstrap` and `docker` that record their arguments, and a debootstrap
    scripts folder that knows ``known_suites`` (plus gutsy, the shared Ubuntu script)."""
    bin_dir, scripts, calls = tmp_path / "bin", tmp_path / "debootstrap" / "scripts", tmp_path / "calls.txt"
    bin_dir.mkdir()
    scripts.mkdir(parents=True)
    (scripts / "gutsy").write_text("# the shared Ubuntu script\n")
    for suite in known_suites:
        (scripts / suite).symlink_to("gutsy")
    (bin_dir / "debootstrap").write_text(
        "#!/bin/sh\n"
        f'echo "debootstrap $*" >> "{calls}"\n'
        # the root file system: what the script then edits and imports
        'mkdir -p "$3/etc/apt" "$3/var/cache/apt/archives" "$3/var/lib/apt/lists"\n'
    )
    (bin_dir / "docker").write_text(
        "#!/bin/sh\n"
        f'echo "docker $1 $2" >> "{calls}"\n'
        'if [ "$1" = image ] && [ "$2" = inspect ]; then exit 1; fi\n'  # the image does not exist yet
        'if [ "$1" = import ]; then cat > /dev/null; fi\n'
    )
    for tool in ("debootstrap", "docker"):
        (bin_dir / tool).chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", DEBOOTSTRAP_DIR=str(tmp_path / "debootstrap"))
    return env, calls


def test_noble_falls_back_to_the_shared_ubuntu_script_on_an_older_debootstrap(tmp_path):
    """Debian 12's debootstrap (1.0.128) has no script for Ubuntu 24.04 'noble': the script
    passes the shared Ubuntu one (scripts/gutsy) and writes noble's apt sources."""
    env, calls = _fake_tools(tmp_path, known_suites=("bionic", "jammy"))
    proc = subprocess.run(["bash", str(SCRIPT), "kit-base/ubuntu:24.04", "noble"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no script for noble; using the shared Ubuntu one" in proc.stdout
    lines = calls.read_text().splitlines()
    boot = next(line for line in lines if line.startswith("debootstrap "))
    assert boot.startswith("debootstrap --variant=minbase noble ")
    assert boot.endswith(f"http://archive.ubuntu.com/ubuntu {tmp_path}/debootstrap/scripts/gutsy")
    assert any(line.startswith("docker import") for line in lines)
    assert "imported kit-base/ubuntu:24.04" in proc.stdout


def test_a_suite_debootstrap_knows_is_passed_as_it_is(tmp_path):
    env, calls = _fake_tools(tmp_path, known_suites=("bionic",))
    proc = subprocess.run(["bash", str(SCRIPT), "kit-base/ubuntu:18.04", "bionic"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    boot = next(line for line in calls.read_text().splitlines() if line.startswith("debootstrap "))
    assert boot.split()[-2:] == [boot.split()[-2], "http://archive.ubuntu.com/ubuntu"]  # no script argument after the mirror
    assert "no script for" not in proc.stdout
