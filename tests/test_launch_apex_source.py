"""`--apex-src`: an NVIDIA Apex source from a folder or a `git archive` tarball, for machines
without GitHub. The host checks it before anything is built, and the image build checks and
unpacks it with the same code (kit/launch/apex_archive.py)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from fixtures.originals import APEX_DIR, missing_apex
from kit.errors import UsageError
from kit.launch import apex_archive
from kit.launch import stacks as stk
from kit.launch.build import build_context, image_state
from kit.launch.stacks import image_spec, read_apex_source

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = APEX_DIR
COMMIT_2018 = "241dd6c4fce8667b15aaf7196b39d801b084f9ae"


def _tar(path: Path, members: dict[str, bytes | None], *, commit: str = "", links: dict[str, str] | None = None,
         mode: str = "w:gz") -> Path:
    """A tar archive as `git archive --prefix` writes one: files, folders (None), optional links."""
    with tarfile.open(path, mode, format=tarfile.PAX_FORMAT, pax_headers={"comment": commit} if commit else {}) as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            t.addfile(info)
    return path


def _apex_members(prefix: str = "apex-x/") -> dict[str, bytes | None]:
    return {
        prefix: None,
        prefix + "setup.py": b"from setuptools import setup\nsetup(name='apex')\n",
        prefix + "apex/": None,
        prefix + "apex/__init__.py": b"",
        prefix + "apex/amp/__init__.py": b"",
    }


# -- what a source may be --------------------------------------------------------------


def test_a_git_archive_gives_its_commit_and_loses_its_prefix(tmp_path):
    src = read_apex_source(_tar(tmp_path / "apex.tar.gz", _apex_members(), commit=COMMIT_2018))
    assert src.kind == "archive" and src.commit == COMMIT_2018 and src.files == 3
    with tarfile.open(fileobj=io.BytesIO(src.data)) as t:
        names = t.getnames()
        assert t.pax_headers.get("comment") == COMMIT_2018  # the re-packed tar still says which commit
    assert "setup.py" in names and "apex/amp/__init__.py" in names and not any(n.startswith("apex-x") for n in names)
    assert "241dd6c4fce8" in src.describe() and src.sha256[:12] in src.describe()


def test_the_same_source_packs_to_the_same_bytes(tmp_path):
    """Same source -> same hash -> the image is not rebuilt; a changed file -> rebuilt."""
    a = read_apex_source(_tar(tmp_path / "a.tar.gz", _apex_members(), commit=COMMIT_2018))
    b = read_apex_source(_tar(tmp_path / "b.tar", _apex_members(), commit=COMMIT_2018, mode="w"))
    assert a.sha256 == b.sha256
    changed = _apex_members()
    changed["apex-x/apex/__init__.py"] = b"# edited\n"
    assert read_apex_source(_tar(tmp_path / "c.tar.gz", changed, commit=COMMIT_2018)).sha256 != a.sha256


def test_a_folder_is_accepted_without_its_git_folder(tmp_path):
    root = tmp_path / "apex"
    (root / "apex" / "amp").mkdir(parents=True)
    (root / "setup.py").write_text("x = 1\n")
    (root / "apex" / "__init__.py").write_text("")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    src = read_apex_source(root)
    with tarfile.open(fileobj=io.BytesIO(src.data)) as t:
        names = t.getnames()
    assert src.kind == "folder" and "setup.py" in names and not any(n.startswith(".git") for n in names)
    assert src.commit == ""  # not a real checkout: the commit is unknown, and the record says so
    assert "commit unknown" in src.describe()


@pytest.mark.parametrize("case, expect", [
    ("missing", "no such file or folder"),
    ("not-a-tar", "neither a folder nor a readable tar archive"),
    ("no-setup", "no setup.py and apex/"),
    ("symlink", "holds a link"),
    ("dotdot", "leaves its folder"),
    ("absolute", "absolute path"),
    ("fifo", "neither a file nor a folder"),
])
def test_a_source_that_is_not_a_clean_apex_tree_is_refused_in_one_line(tmp_path, case, expect):
    path = tmp_path / "apex.tar.gz"
    if case == "missing":
        path = tmp_path / "nope"
    elif case == "not-a-tar":
        path.write_bytes(b"PK\x03\x04 this is a zip, or anything else")
    elif case == "no-setup":
        _tar(path, {"apex-x/": None, "apex-x/README.md": b"hi"})
    elif case == "symlink":
        _tar(path, _apex_members(), links={"apex-x/apex/evil": "/etc/passwd"})
    elif case == "dotdot":
        _tar(path, {**_apex_members(), "apex-x/../../outside.py": b"x"})
    elif case == "absolute":
        _tar(path, {**_apex_members(), "/etc/cron.d/x": b"x"})
    elif case == "fifo":
        with tarfile.open(path, "w:gz") as t:
            for name, data in _apex_members().items():
                info = tarfile.TarInfo(name)
                info.type = tarfile.DIRTYPE if data is None else tarfile.REGTYPE
                info.size = len(data or b"")
                t.addfile(info, io.BytesIO(data or b""))
            fifo = tarfile.TarInfo("apex-x/apex/pipe")
            fifo.type = tarfile.FIFOTYPE
            t.addfile(fifo)
    with pytest.raises(UsageError) as info:
        read_apex_source(path)
    assert expect in info.value.message and "\n" not in info.value.message
    assert "nothing was built" in (info.value.remedy or "")


def test_a_folder_holding_a_link_is_refused(tmp_path):
    root = tmp_path / "apex"
    (root / "apex").mkdir(parents=True)
    (root / "setup.py").write_text("")
    os.symlink("/etc", root / "apex" / "etc")
    with pytest.raises(UsageError, match="holds a link"):
        read_apex_source(root)


@pytest.mark.parametrize("argv", [
    ["image", "build", "--stack", "cuda10", "--apex-src"],
    ["launch", "--stack", "cuda10", "--skip-checks", "--apex-src"],
])
def test_a_bad_apex_src_stops_before_docker_is_asked_anything(tmp_path, argv):
    """Exit 2 with one line, and no engine contacted (an unreachable engine would be exit 7)."""
    bad = tmp_path / "not-apex"
    bad.mkdir()
    (bad / "README").write_text("hello")
    env = {**os.environ, "DOCKER_HOST": "tcp://127.0.0.1:9", "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "kit", *argv, str(bad)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "--apex-src" in proc.stderr and "no setup.py and apex/" in proc.stderr


# -- what the image is built from ------------------------------------------------------


def test_a_local_source_goes_into_the_context_and_the_build_arguments(tmp_path):
    src = read_apex_source(_tar(tmp_path / "apex.tar.gz", _apex_members(), commit=COMMIT_2018))
    spec = image_spec("cuda10", ROOT, apex_src=src)
    args = spec.build_args
    assert args["BUILD_APEX"] == "1" and args["APEX_FROM"] == "archive" and args["APEX_REF"] == "241dd6c4"
    assert args["APEX_COMMIT"] == COMMIT_2018 and args["APEX_SHA256"] == src.sha256 == spec.apex_sha256
    assert args["APEX_SOURCE"] == src.describe()
    assert spec.extra_files[apex_archive.CONTEXT_NAME] == src.data
    github = image_spec("cuda10", ROOT).build_args
    assert github["APEX_FROM"] == "github" and github["APEX_COMMIT"] == COMMIT_2018 and github["APEX_SHA256"] == ""
    assert "github.com/NVIDIA/apex" in github["APEX_SOURCE"]


def test_a_source_of_another_commit_is_refused_unless_that_ref_is_asked_for(tmp_path):
    other = "e552ad997605dd883825106776eba230a6820345"  # 25.01
    src = read_apex_source(_tar(tmp_path / "apex.tar.gz", _apex_members(), commit=other))
    with pytest.raises(UsageError) as info:
        image_spec("cuda10", ROOT, apex_src=src)
    assert "e552ad997605" in info.value.message and "241dd6c4" in info.value.message
    assert "--apex-ref" in info.value.remedy
    for ref in ("25.01", "e552ad99"):
        args = image_spec("cuda10", ROOT, apex_src=src, apex_ref=ref).build_args
        assert args["APEX_REF"] == ref and args["APEX_COMMIT"] == other
    with pytest.raises(UsageError, match="--apex-ref 25.07"):
        image_spec("cuda10", ROOT, apex_src=src, apex_ref="25.07")


def test_apex_src_is_refused_where_it_cannot_apply(tmp_path):
    src = read_apex_source(_tar(tmp_path / "apex.tar.gz", _apex_members(), commit=COMMIT_2018))
    with pytest.raises(UsageError, match="cpu stack has no Apex"):
        image_spec("cpu", ROOT, apex_src=src)
    with pytest.raises(UsageError, match="contradict"):
        image_spec("cuda10", ROOT, apex_src=src, apex=False)


def test_the_context_carries_the_given_source_and_never_one_left_in_the_checkout(tmp_path):
    root = tmp_path / "kit"
    (root / "docker").mkdir(parents=True)
    (root / "docker" / "Dockerfile").write_text("FROM scratch\n")
    (root / ".dockerignore").write_text("*\n!docker/Dockerfile\n!docker/apex-src.tar*\n")
    (root / "docker" / "apex-src.tar.gz").write_bytes(b"left here for compose")
    plain = tarfile.open(fileobj=build_context(root))
    assert "docker/Dockerfile" in plain.getnames() and not any("apex-src" in n for n in plain.getnames())
    with_src = tarfile.open(fileobj=build_context(root, {apex_archive.CONTEXT_NAME: b"\x00tar bytes", "docker/x.pem": "pem"}))
    names = with_src.getnames()
    assert "docker/apex-src.tar" in names and "docker/x.pem" in names and "docker/apex-src.tar.gz" not in names
    assert with_src.extractfile("docker/apex-src.tar").read() == b"\x00tar bytes"


def test_an_image_built_from_another_apex_source_is_rebuilt(tmp_path):
    from tests.test_launch_build import FakeClient, FakeImage

    src = read_apex_source(_tar(tmp_path / "apex.tar.gz", _apex_members(), commit=COMMIT_2018))
    spec = image_spec("cuda10", ROOT, apex_src=src)
    labels = {stk.LABEL_LOCK: spec.lock_sha256, stk.LABEL_SOURCE: spec.source_sha256, stk.LABEL_STACK: "cuda10"}
    assert image_state(FakeClient(images=[FakeImage(spec.tag, {**labels, stk.LABEL_APEX_SHA: src.sha256})]), spec) == "current"
    assert image_state(FakeClient(images=[FakeImage(spec.tag, {**labels, stk.LABEL_APEX_SHA: ""})]), spec) == "stale"
    # no --apex-src: whatever Apex the image has will do
    plain = image_spec("cuda10", ROOT)
    assert image_state(FakeClient(images=[FakeImage(plain.tag, {**labels, stk.LABEL_APEX_SHA: src.sha256})]), plain) == "current"


def test_the_dockerfile_copies_the_checker_and_records_what_it_built():
    text = (ROOT / "docker" / "Dockerfile").read_text()
    assert "kit/launch/apex_archive.py" in text and "docker/apex-src.tar*" in text
    assert "/opt/kit/apex.json" in text and "KIT_APEX_INFO=/opt/kit/apex.json" in text
    assert "!docker/apex-src.tar*" in (ROOT / ".dockerignore").read_text()


# -- the in-image half: the same checks, run as the Dockerfile runs them --------------


def _unpack(archive: Path, dest: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "kit" / "launch" / "apex_archive.py"), "unpack", str(archive), str(dest)],
                          capture_output=True, text=True, timeout=60)


def test_the_build_step_unpacks_a_snapshot_and_prints_its_commit(tmp_path):
    proc = _unpack(_tar(tmp_path / "apex.tar.gz", _apex_members(), commit=COMMIT_2018), tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    commit, sha, files = proc.stdout.split()
    assert commit == COMMIT_2018 and len(sha) == 64 and files == "3"
    assert (tmp_path / "out" / "setup.py").is_file() and (tmp_path / "out" / "apex" / "amp" / "__init__.py").is_file()


def test_the_build_step_refuses_a_hostile_archive_and_writes_nothing(tmp_path):
    proc = _unpack(_tar(tmp_path / "apex.tar.gz", {**_apex_members(), "apex-x/../../evil.py": b"x"}), tmp_path / "out")
    assert proc.returncode == 2 and "leaves its folder" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "evil.py").exists()


@pytest.mark.skipif(not all((SNAPSHOTS / f"apex-{r}.tar.gz").is_file() for r in ("241dd6c4", "25.01", "25.07")),
                    reason=missing_apex("241dd6c4", "25.01", "25.07"))
def test_the_shipped_snapshots_are_accepted_with_their_commits():
    want = {"apex-241dd6c4": "241dd6c4", "apex-25.01": "25.01", "apex-25.07": "25.07"}
    from kit.facts.stacks import APEX_REF_COMMITS

    for name, ref in want.items():
        src = read_apex_source(SNAPSHOTS / f"{name}.tar.gz")
        assert src.commit == APEX_REF_COMMITS[ref], name
        assert src.files > 30
    assert image_spec("cuda10", ROOT, apex_src=read_apex_source(SNAPSHOTS / "apex-241dd6c4.tar.gz")).build_args["APEX_COMMIT"] == COMMIT_2018


# -- the record ------------------------------------------------------------------------


def test_the_environment_names_the_images_apex_ref_and_source(tmp_path):
    from kit.env.record import apex_info

    info_file = tmp_path / "apex.json"
    info_file.write_text(json.dumps({"built": True, "ref": "241dd6c4", "commit": COMMIT_2018,
                                     "source": "local archive apex-src.tar (241dd6c4fce8, sha256 0123)", "build_options": ""}))
    out = apex_info({"KIT_APEX_INFO": str(info_file)})
    assert out["ref"] == "241dd6c4" and out["commit"] == COMMIT_2018 and out["source"].startswith("local archive")
    assert out["image"]["built"] is True
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert "image" in apex_info({"KIT_APEX_INFO": str(broken)})  # recorded as unknown, never a crash
