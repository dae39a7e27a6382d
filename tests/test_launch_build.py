"""Image specs and builds, with a fake Docker client (no engine needed)."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

from kit import __version__
from kit.errors import DockerError, UsageError
from kit.facts.stacks import APEX_REF_COMMITS, STACKS
from kit.launch import stacks as stk
from kit.launch.build import build_context, build_image, image_state, list_images
from kit.launch.stacks import EXTRA_CA_PATH, file_sha256, image_spec, read_ca_cert

ROOT = Path(__file__).resolve().parents[1]

# A syntactically real PEM block (the content is not a usable key; only the
# framing matters to the kit).
FAKE_PEM = "-----BEGIN CERTIFICATE-----\nMIIBfixture0000\n-----END CERTIFICATE-----\n"


def test_each_stack_builds_from_its_facts_and_its_lock():
    for name, facts in STACKS.items():
        spec = image_spec(name, ROOT)
        assert spec.tag == f"mpkit:{name}-{__version__}"
        assert spec.build_args["BASE"] == facts.base_image
        assert spec.build_args["STACK"] == name
        assert spec.build_args["LOCK"] == facts.lock_name
        assert spec.lock == ROOT / "docker" / "locks" / f"{facts.lock_name}.txt"
        assert spec.build_args["LOCK_SHA256"] == file_sha256(spec.lock) == spec.lock_sha256


def test_cuda12_needs_no_cuda_base_and_builds_an_apex_with_amp_python_only():
    """cuda12 = a plain Ubuntu 24.04 with Apex 25.01 python-only (apex.amp, apex.fp16_utils: the
    apex-o1/o2 cells run); the fused kernels are the opt-in cuda12-fused variant on NVIDIA's
    devel base (nvcc), sharing cuda12's lock."""
    cuda12 = image_spec("cuda12", ROOT).build_args
    assert (cuda12["BUILD_APEX"], cuda12["APEX_REF"], cuda12["APEX_BUILD_OPTS"]) == ("1", "25.01", "")
    assert cuda12["BASE"] == "ubuntu:24.04" and "nvidia/cuda" not in cuda12["BASE"]
    assert cuda12["APEX_COMMIT"] == APEX_REF_COMMITS["25.01"]
    fused = image_spec("cuda12-fused", ROOT)
    assert (fused.build_args["APEX_REF"], fused.build_args["APEX_BUILD_OPTS"]) == ("25.07", "--cpp_ext --cuda_ext")
    assert fused.base.startswith("nvidia/cuda:12.8.1-cudnn-devel")
    assert fused.lock == image_spec("cuda12", ROOT).lock and fused.tag != image_spec("cuda12", ROOT).tag


def test_cuda10_builds_apex_python_only():
    # (both GPU stacks' Apex builds can add the compiler and headers: the Dockerfile adds them with Apex)
    # nvcc builds against Python's headers: the Dockerfile adds them with Apex
    assert re.search(r'if \[ "\$BUILD_APEX" = 1 \]; then build_apt="[^"]*\$PYTHON-dev', (ROOT / "docker" / "Dockerfile").read_text())
    cuda10 = image_spec("cuda10", ROOT).build_args
    assert cuda10["BUILD_APEX"] == "1" and cuda10["APEX_REF"] == STACKS["cuda10"].apex_ref
    assert cuda10["APEX_BUILD_OPTS"] == ""
    cpu = image_spec("cpu", ROOT).build_args
    assert cpu["BUILD_APEX"] == "0" and cpu["APEX_REF"] == ""
    assert "-dev" not in cpu["PYTHON_APT"]


def test_a_build_without_apex_shares_the_os_layers_arguments():
    """compose.cuda10.yaml with KIT_BUILD_APEX=0 and `kit image build --stack cuda10 --no-apex`
    give the OS layer the same arguments, so Docker builds it (and the stack's pip layer) once."""
    for name in ("cuda10", "cuda12"):
        with_apex, without = image_spec(name, ROOT).build_args, image_spec(name, ROOT, apex=False).build_args
        assert with_apex["PYTHON_APT"] == without["PYTHON_APT"] and "-dev" not in with_apex["PYTHON_APT"]


def test_cuda10_carries_a_runner_instead_of_the_kit():
    args = image_spec("cuda10", ROOT).build_args
    # Python 3.7 cannot install the kit (3.10+): the image runs the legacy runner module.
    assert args["INSTALL_KIT"] == "0" and args["KIT_RUNNER"] == stk.LEGACY_RUNNER
    assert args["PYTHON"] == "python3.7" and args["VENV_PIP"] == "24.0"
    for name in ("cuda12", "cuda12-fused", "cpu"):
        a = image_spec(name, ROOT).build_args
        assert a["INSTALL_KIT"] == "1" and a["KIT_RUNNER"] == "kit"


def test_every_build_argument_is_declared_in_the_dockerfile():
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    declared = set(re.findall(r"^ARG ([A-Z_0-9]+)", dockerfile, re.M))
    spec = image_spec("cuda12", ROOT, pip_index_url="https://m/simple", pip_extra_index_url="http://127.0.0.1:1/simple", pip_trusted_host="m")
    missing = set(spec.build_args) - declared
    assert not missing, f"build args the Dockerfile does not declare (Docker would ignore them): {sorted(missing)}"


def test_lock_headers_match_the_stack_facts():
    for name, facts in STACKS.items():
        text = (ROOT / "docker" / "locks" / f"{facts.lock_name}.txt").read_text()
        assert re.search(rf"^# stack: {facts.lock_name}$", text, re.M)
        assert re.search(rf"^# python: {re.escape(facts.python)}$", text, re.M)
        pins = dict(re.findall(r"^([a-z0-9-]+)==(\S+)$", text, re.M))
        assert pins["torch"] == facts.torch and pins["torchvision"] == facts.torchvision and pins["fastai"] == facts.fastai


def test_mirror_options_are_passed_only_when_given():
    plain = image_spec("cpu", ROOT).build_args
    assert not {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"} & set(plain)
    mirrored = image_spec("cpu", ROOT, pip_extra_index_url="http://127.0.0.1:8000/simple").build_args
    assert mirrored["PIP_EXTRA_INDEX_URL"] == "http://127.0.0.1:8000/simple"


def test_ca_certificate_travels_in_the_context_not_in_build_args(tmp_path):
    pem = tmp_path / "proxy.pem"
    pem.write_text(FAKE_PEM)
    spec = image_spec("cpu", ROOT, extra_ca_pem=read_ca_cert(pem))
    assert spec.extra_files == {EXTRA_CA_PATH: FAKE_PEM}
    assert not any("CERTIFICATE" in v for v in spec.build_args.values())
    names = tarfile.open(fileobj=build_context(ROOT, spec.extra_files)).getnames()
    assert EXTRA_CA_PATH in names


def test_a_file_that_is_not_a_pem_certificate_is_refused(tmp_path):
    der = tmp_path / "proxy.der"
    der.write_bytes(b"0\x82\x01\x0a")
    with pytest.raises(UsageError):
        read_ca_cert(der)
    notpem = tmp_path / "notes.txt"
    notpem.write_text("hello")
    with pytest.raises(UsageError, match="no PEM certificate"):
        read_ca_cert(notpem)
    with pytest.raises(UsageError, match="no such file"):
        read_ca_cert(tmp_path / "missing.pem")


def test_build_context_leaves_out_data_results_venv_and_git(tmp_path):
    root = tmp_path / "checkout"
    for rel in ("docker/Dockerfile", "docker/entrypoint.sh", "docker/pip-install.sh", "docker/locks/cpu.txt",
                "pyproject.toml", "README.md", "kit/__init__.py", "kit/launch/stacks.py",
                "data/cifar-100-python.tar.gz", "results/run1/journal.jsonl", ".venv/bin/python", ".git/HEAD",
                "kit/__pycache__/x.pyc", "tests/test_x.py"):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    (root / ".dockerignore").write_text((ROOT / ".dockerignore").read_text())
    names = set(tarfile.open(fileobj=build_context(root)).getnames())
    assert {"docker/Dockerfile", "docker/locks/cpu.txt", "kit/launch/stacks.py", "pyproject.toml", "README.md"} <= names
    for banned in ("data", "results", ".venv", ".git", "tests"):
        assert not any(n == banned or n.startswith(banned + "/") for n in names), banned
    assert not any(n.endswith(".pyc") for n in names)


# -- builds through a fake engine ---------------------------------------------------


class FakeAPI:
    def __init__(self, events):
        self.events = events
        self.kwargs = None

    def build(self, **kwargs):
        self.kwargs = kwargs
        yield from self.events


class FakeImage:
    def __init__(self, tag, labels, size=1_000_000_000):
        self.tags = [tag]
        self.labels = labels
        self.attrs = {"Size": size, "Created": "2026-11-30T10:00:00.123Z"}
        self.short_id = "sha256:abcdef012345"


class FakeImages:
    def __init__(self, images=()):
        self.images = {i.tags[0]: i for i in images}

    def get(self, tag):
        if tag not in self.images:
            raise type("ImageNotFound", (Exception,), {})(f"No such image: {tag}")
        return self.images[tag]

    def list(self, filters=None):
        return list(self.images.values())


class FakeClient:
    def __init__(self, events=(), images=()):
        self.api = FakeAPI(list(events))
        self.images = FakeImages(images)


class RecordingUI:
    def __init__(self):
        self.steps, self.lines, self.finished = [], [], None

    def start(self, spec, log_path):
        self.log_path = log_path

    def step(self, number, total, instruction):
        self.steps.append((number, total))

    def line(self, text):
        self.lines.append(text)

    def finish(self, ok):
        self.finished = ok


def _steps(n):
    for i in range(1, n + 1):
        yield {"stream": f"Step {i}/{n} : RUN echo {i}\n"}
        yield {"stream": " ---> Using cache\n" if i % 2 else f" ---> Running in {i:012x}\n"}


def test_build_shows_step_numbers_and_returns_the_image(tmp_path):
    events = list(_steps(4)) + [{"aux": {"ID": "sha256:feedbeef"}}, {"stream": "Successfully built feedbeef\n"}]
    client, ui = FakeClient(events), RecordingUI()
    result = build_image(image_spec("cpu", ROOT), ROOT, client, ui=ui, log_dir=tmp_path)
    assert ui.steps == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert ui.finished is True
    assert (result.image_id, result.steps, result.cached_steps) == ("sha256:feedbeef", 4, 2)
    kw = client.api.kwargs
    assert kw["network_mode"] == "host" and kw["custom_context"] is True and kw["dockerfile"] == "docker/Dockerfile"
    assert kw["tag"] == f"mpkit:cpu-{__version__}" and kw["buildargs"]["STACK"] == "cpu"
    assert "Step 4/4" in result.log_path.read_text()


def test_build_that_runs_out_of_disk_says_so_with_the_log_tail(tmp_path):
    events = list(_steps(2)) + [
        {"stream": "Installing collected packages: nvidia-cudnn-cu12, torch\n"},
        {"error": "failed to register layer: write /opt/venv/lib/x.so: no space left on device",
         "errorDetail": {"message": "no space left on device"}},
    ]
    ui = RecordingUI()
    with pytest.raises(DockerError) as info:
        build_image(image_spec("cuda12", ROOT), ROOT, FakeClient(events), ui=ui, log_dir=tmp_path)
    assert "disk is full" in info.value.message
    assert "Installing collected packages" in info.value.message  # the log tail is shown
    assert ui.finished is False


def test_build_whose_pip_cannot_reach_the_index_suggests_proxy_options(tmp_path):
    events = list(_steps(1)) + [
        {"stream": "ERROR: Could not find a version that satisfies the requirement torch==2.14.1 (from versions: none)\n"},
        {"error": "The command '/bin/sh -c pip-install.sh ...' returned a non-zero code: 1"},
    ]
    with pytest.raises(DockerError) as info:
        build_image(image_spec("cpu", ROOT), ROOT, FakeClient(events), log_dir=tmp_path)
    assert "--ca-cert" in info.value.remedy and "--pip-index-url" in info.value.remedy


def test_image_built_from_another_lock_is_stale():
    spec = image_spec("cpu", ROOT)
    current = FakeImage(spec.tag, {stk.LABEL_LOCK: spec.lock_sha256, stk.LABEL_SOURCE: spec.source_sha256, stk.LABEL_STACK: "cpu"})
    older_code = FakeImage(spec.tag, {stk.LABEL_LOCK: spec.lock_sha256, stk.LABEL_SOURCE: "1" * 64, stk.LABEL_STACK: "cpu"})
    assert image_state(FakeClient(images=[older_code]), spec) == "stale"
    old = FakeImage(spec.tag, {stk.LABEL_LOCK: "0" * 64, stk.LABEL_STACK: "cpu"})
    assert image_state(FakeClient(), spec) == "missing"
    assert image_state(FakeClient(images=[current]), spec) == "current"
    assert image_state(FakeClient(images=[old]), spec) == "stale"


def test_image_built_on_another_base_is_stale_only_when_a_base_is_asked_for():
    spec = image_spec("cpu", ROOT, base="kit-base/debian:bookworm")
    labels = {stk.LABEL_LOCK: spec.lock_sha256, stk.LABEL_SOURCE: spec.source_sha256, stk.LABEL_STACK: "cpu"}
    on_hub_base = FakeImage(spec.tag, {**labels, stk.LABEL_BASE: "debian:bookworm"})
    on_local_base = FakeImage(spec.tag, {**labels, stk.LABEL_BASE: "kit-base/debian:bookworm"})
    assert image_state(FakeClient(images=[on_hub_base]), spec, check_base=True) == "stale"
    assert image_state(FakeClient(images=[on_local_base]), spec, check_base=True) == "current"
    assert image_state(FakeClient(images=[on_hub_base]), spec) == "current"  # no --base: any base will do


def test_image_list_reads_the_labels():
    img = FakeImage("mpkit:cuda12-0.1.0", {stk.LABEL_STACK: "cuda12", stk.LABEL_VERSION: "0.1.0", stk.LABEL_LOCK: "ab" * 32,
                                          stk.LABEL_APEX_BUILT: "1", stk.LABEL_APEX_REF: "25.07"}, size=17_000_000_000)
    (info,) = list_images(FakeClient(images=[img]))
    assert (info.stack, info.apex_built, info.apex_ref, info.size_bytes) == ("cuda12", True, "25.07", 17_000_000_000)
    assert info.created == "2026-11-30 10:00:00"


# -- a wheel download that fails mid-build ------------------------------------------

_TORCH_WHEEL = "torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl"


def _pip_dies_downloading_torch():
    yield from _steps(17)
    yield {"stream": "Collecting nvidia-cublas-cu12==12.8.4.1 (from -r /opt/kit/lock.txt (line 53))\n"}
    yield {"stream": "  Downloading nvidia_cublas_cu12-12.8.4.1-py3-none-manylinux_2_27_x86_64.whl (594.3 MB)\n"}
    yield {"stream": "Collecting torch==2.9.1 (from -r /opt/kit/lock.txt (line 95))\n"}
    yield {"stream": f"  Downloading {_TORCH_WHEEL} (899.7 MB)\n"}
    yield {"stream": "ERROR: Exception:\nTraceback (most recent call last):\n"}
    yield {"stream": "pip._vendor.urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='files.pythonhosted.org', "
                     "port=443): Read timed out.\n"}
    yield {"error": "The command '/bin/sh -c set -eu; pip-install.sh --no-deps -r /opt/kit/lock.txt' returned a non-zero code: 2",
           "errorDetail": {"message": "returned a non-zero code: 2"}}


class _IdImage(FakeImage):
    def __init__(self, tag, image_id, labels=None):
        super().__init__(tag, labels or {})
        self.id = image_id


class _TaggingEngine(FakeClient):
    """An engine that (wrongly) tags the failed build's last layer: the kit must take the tag back."""

    def __init__(self, events, images=()):
        events = list(events)
        super().__init__(events, images)
        self.removed, self.retagged = [], []
        outer = self

        class API(FakeAPI):
            def build(self, **kwargs):
                for event in super().build(**kwargs):
                    if "error" in event:
                        outer.images.images[kwargs["tag"]] = _IdImage(kwargs["tag"], "sha256:halfbuilt")
                    yield event

            def tag(self, image, repository, tag):
                outer.retagged.append((image, f"{repository}:{tag}"))
                outer.images.images[f"{repository}:{tag}"] = _IdImage(f"{repository}:{tag}", image)

        self.api = API(list(events))
        images_obj = self.images

        def remove(tag, noprune=False):
            outer.removed.append(tag)
            images_obj.images.pop(tag, None)

        images_obj.remove = remove


def test_failed_wheel_download_names_the_package_and_tags_nothing(tmp_path):
    spec = image_spec("cuda12", ROOT)
    client, ui = FakeClient(_pip_dies_downloading_torch()), RecordingUI()
    with pytest.raises(DockerError) as info:
        build_image(spec, ROOT, client, ui=ui, log_dir=tmp_path)
    message = info.value.message.splitlines()[0]
    assert message.startswith("Network failure during the image build: pip._vendor.urllib3.exceptions.ReadTimeoutError")
    assert f"pip was downloading torch==2.9.1 ({_TORCH_WHEEL}, 899.7 MB)" in message
    assert f"Nothing was tagged {spec.tag}." in message
    assert "--pip-index-url" in info.value.remedy
    assert ui.finished is False
    with pytest.raises(Exception, match="No such image"):
        client.images.get(spec.tag)
    assert "Read timed out" in ui.log_path.read_text()  # the whole log is kept


def test_failed_build_never_leaves_the_tag_on_a_half_built_image(tmp_path):
    spec = image_spec("cuda12", ROOT)
    earlier = _IdImage(spec.tag, "sha256:earlier", {stk.LABEL_STACK: "cuda12"})
    client = _TaggingEngine(_pip_dies_downloading_torch(), images=[earlier])
    with pytest.raises(DockerError) as info:
        build_image(spec, ROOT, client, log_dir=tmp_path)
    assert client.removed == [spec.tag] and client.retagged == [("sha256:earlier", spec.tag)]
    assert client.images.get(spec.tag).id == "sha256:earlier"
    assert f"{spec.tag} is still the earlier complete image" in info.value.message
    fresh = _TaggingEngine(_pip_dies_downloading_torch())
    with pytest.raises(DockerError) as info:
        build_image(spec, ROOT, fresh, log_dir=tmp_path)
    assert fresh.removed == [spec.tag] and not fresh.retagged and spec.tag not in fresh.images.images
    assert f"Nothing was tagged {spec.tag}." in info.value.message


def test_pip_activity_forgets_the_download_once_pip_installs():
    from kit.launch.build import PipActivity

    pip = PipActivity()
    for line in ("Collecting fastai==2.8.12 (from -r /opt/kit/lock.txt (line 20))",
                 "  Downloading fastai-2.8.12-py3-none-any.whl (235 kB)",
                 "Installing collected packages: fastai"):
        pip.see(line)
    assert pip.describe() == ""
    pip.see("Collecting torch==2.9.1")
    assert pip.describe() == "pip was looking for torch==2.9.1"


# -- no base image and no registry ---------------------------------------------------

_NO_REGISTRY = ('Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: '
                "no such host")


@pytest.mark.parametrize("stack, command", [
    ("cuda12", "sudo bash scripts/make_base_image.sh kit-base/ubuntu:24.04 noble"),
    ("cuda10", "sudo bash scripts/make_base_image.sh kit-base/ubuntu:18.04 bionic"),
    ("cpu", "sudo bash scripts/make_base_image.sh kit-base/debian:bookworm bookworm"),
])
def test_missing_base_without_a_registry_is_one_line_naming_the_local_base(tmp_path, stack, command):
    """What the classic builder says when FROM cannot be pulled here (measured on this engine)."""
    spec = image_spec(stack, ROOT)
    events = [{"stream": "Step 1/46 : ARG BASE\n"}, {"stream": f"Step 2/46 : FROM {spec.base}\n"}, {"error": _NO_REGISTRY}]
    with pytest.raises(DockerError) as info:
        build_image(spec, ROOT, FakeClient(events), log_dir=tmp_path)
    message = info.value.message
    assert "\n" not in message, message
    assert f"Docker cannot get the base image {spec.base}" in message
    assert command in message and f"--base {STACKS[stack].local_base[0]}" in message


def test_through_make_a_missing_base_names_the_base_variable(tmp_path, monkeypatch):
    """`make run` sets KIT_LAUNCH_VIA=make: the local base is given as BASE=, as make takes it."""
    monkeypatch.setenv("KIT_LAUNCH_VIA", "make")
    spec = image_spec("cpu", ROOT)
    events = [{"stream": f"Step 2/46 : FROM {spec.base}\n"}, {"error": _NO_REGISTRY}]
    with pytest.raises(DockerError) as info:
        build_image(spec, ROOT, FakeClient(events), log_dir=tmp_path)
    assert info.value.message.endswith(
        ": make a local one with `sudo bash scripts/make_base_image.sh kit-base/debian:bookworm bookworm` and add "
        "BASE=kit-base/debian:bookworm to the make command.")
    assert "any local copy of the same OS works with BASE=NAME." in info.value.remedy
    assert "--base" not in info.value.message + info.value.remedy


def test_through_make_a_build_that_cannot_reach_the_index_names_ca_cert(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_LAUNCH_VIA", "make")
    events = list(_steps(1)) + [
        {"stream": "WARNING: Retrying after connection broken by 'SSLError(SSLCertVerificationError(1, '[SSL: "
                   "CERTIFICATE_VERIFY_FAILED] certificate verify failed'))': /simple/torch/\n"},
        {"error": "The command '/bin/sh -c pip-install.sh ...' returned a non-zero code: 1"},
    ]
    with pytest.raises(DockerError) as info:
        build_image(image_spec("cpu", ROOT), ROOT, FakeClient(events), log_dir=tmp_path)
    assert "add CA_CERT=/path/to/proxy-ca.pem to the make command (make run CA_CERT=/path/to/proxy-ca.pem)" in info.value.remedy
    assert "--ca-cert" not in info.value.remedy


def test_missing_fused_base_points_at_the_cuda12_stack(tmp_path):
    spec = image_spec("cuda12-fused", ROOT)
    events = [{"stream": f"Step 2/46 : FROM {spec.base}\n"}, {"error": _NO_REGISTRY}]
    with pytest.raises(DockerError) as info:
        build_image(spec, ROOT, FakeClient(events), log_dir=tmp_path)
    assert "\n" not in info.value.message
    assert "--stack cuda12, which needs no CUDA base" in info.value.message and "docker load" in info.value.message


def test_a_first_build_says_what_it_downloads_before_it_starts(tmp_path):
    """`make run GPU=0` on a fresh host builds the cuda12 image: the build UI says first how much
    it downloads (a measurement in kit/facts/stacks.py) and how long that takes."""
    from rich.console import Console

    from kit.facts.stacks import FIRST_BUILDS
    from kit.launch.stacks import first_build_note
    from kit.launch.ui import RichBuildUI

    m = FIRST_BUILDS["cuda12"]
    note = first_build_note("cuda12")
    assert f"about {m.download_bytes / 1e9:.1f} GB to download" in note and "at 100 MB/s" in note and m.where in note
    console = Console(record=True, width=200)
    ui = RichBuildUI(console)
    events = list(_steps(2)) + [{"aux": {"ID": "sha256:feedbeef"}}, {"stream": "Successfully built feedbeef\n"}]
    build_image(image_spec("cuda12", ROOT), ROOT, FakeClient(events), ui=ui, log_dir=tmp_path)
    text = console.export_text()
    assert text.index("GB to download") < text.index("step 1/2")
    assert first_build_note("no-such-stack") == ""


class LocalEngine(FakeClient):
    """A fake engine on this machine's unix socket, keeping its data in ``root``."""

    def __init__(self, root, events=(), images=(), base_url="http+docker://localhost"):
        super().__init__(events, images)
        self.api.base_url = base_url
        self.root = root

    def info(self):
        return {"DockerRootDir": str(self.root)}


def test_a_first_build_on_a_disk_too_small_for_it_is_warned_about_before_it_starts(tmp_path, monkeypatch):
    """The last CI run filled its disk building an image: a first build now says first when the
    disk where the engine keeps its data has less free than such a build took at its peak
    (a measurement); a rebuild, an engine elsewhere or a roomy disk say nothing."""
    import shutil as shutil_mod
    from collections import namedtuple

    from rich.console import Console

    from kit.facts.stacks import BUILD_DISK_PEAKS
    from kit.launch.engine import local_free_bytes
    from kit.launch.ui import RichBuildUI

    peak = BUILD_DISK_PEAKS["cuda12"].peak_bytes
    usage = namedtuple("usage", "total used free")
    free = {"bytes": peak // 2}
    monkeypatch.setattr(shutil_mod, "disk_usage", lambda path: usage(10**12, 0, free["bytes"]))
    events = list(_steps(2)) + [{"aux": {"ID": "sha256:feedbeef"}}, {"stream": "Successfully built feedbeef\n"}]

    def build(client):
        console = Console(record=True, width=400)
        build_image(image_spec("cuda12", ROOT), ROOT, client, ui=RichBuildUI(console), log_dir=tmp_path)
        return console.export_text()

    text = build(LocalEngine(tmp_path, events))
    assert f"only {peak / 2e9:.1f} GB is free where Docker keeps its data" in text, text
    assert f"took {peak / 1e9:.1f} GB there at its peak" in text and "docker system df" in text
    assert text.index("GB is free") < text.index("step 1/2")
    # a rebuild (the tag exists: its layers are cached), an engine on another machine, enough room
    existing = [FakeImage(stk.image_tag("cuda12"), {})]
    existing[0].id = "sha256:0123"
    assert "GB is free" not in build(LocalEngine(tmp_path, events, images=existing))
    assert local_free_bytes(LocalEngine(tmp_path, base_url="http://build-host:2375")) is None
    assert "GB is free" not in build(LocalEngine(tmp_path, events, base_url="http://build-host:2375"))
    free["bytes"] = peak + 1
    assert "GB is free" not in build(LocalEngine(tmp_path, events))
    assert local_free_bytes(FakeClient()) is None  # an engine that does not say


def test_image_list_says_how_apex_was_built():
    labels = {stk.LABEL_STACK: "cuda12", stk.LABEL_APEX_BUILT: "1", stk.LABEL_APEX_REF: "25.01", stk.LABEL_APEX_OPTS: ""}
    fused = {stk.LABEL_STACK: "cuda12-fused", stk.LABEL_APEX_BUILT: "1", stk.LABEL_APEX_REF: "25.07",
             stk.LABEL_APEX_OPTS: "--cpp_ext --cuda_ext"}
    older = {stk.LABEL_STACK: "cuda10", stk.LABEL_APEX_BUILT: "1", stk.LABEL_APEX_REF: "241dd6c4"}  # before the label
    images = [FakeImage("mpkit:cuda12-0.1.0", labels), FakeImage("mpkit:cuda12-fused-0.1.0", fused),
              FakeImage("mpkit:cuda10-0.1.0", older), FakeImage("mpkit:cpu-0.1.0", {stk.LABEL_STACK: "cpu"})]
    got = {i.stack: i.apex_build for i in list_images(FakeClient(images=images))}
    assert got == {"cuda12": "python-only", "cuda12-fused": "fused kernels (--cpp_ext --cuda_ext)", "cuda10": "?", "cpu": ""}
