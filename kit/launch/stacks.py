"""From a stack name to an image: tag, lock file, build arguments, entrypoint.

The facts about each stack (base image, Python, torch, Apex ref) live in
kit/facts/stacks.py; this module only turns them into what the one
docker/Dockerfile takes as build arguments. Nothing here talks to Docker.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from kit import __version__
from kit.errors import UsageError
from kit.facts.stacks import APEX_REF_COMMITS, BUILD_DISK_PEAKS, FIRST_BUILDS, STACK_NAMES, STACKS, Stack
from kit.launch import apex_archive

#: Image repository; tags are "<stack>-<kit version>" (mpkit:cuda12-0.2.0).
IMAGE_REPO = "mpkit"
#: Labels the Dockerfile writes (read back by `kit image list` and the launcher).
LABEL_STACK = "mpkit.stack"
LABEL_LOCK = "mpkit.lock.sha256"
#: hash of the kit's own files in the image: an image built from older code is rebuilt
LABEL_SOURCE = "mpkit.source.sha256"
LABEL_VERSION = "mpkit.kit.version"
LABEL_APEX_BUILT = "mpkit.apex.built"
LABEL_APEX_REF = "mpkit.apex.ref"
#: Apex's pip build options: "" = python-only (apex.amp, apex.fp16_utils), "--cpp_ext --cuda_ext" = fused kernels
LABEL_APEX_OPTS = "mpkit.apex.build_options"
#: where the image's Apex came from: "github <repo> at <ref>" or "local archive <name> (<commit>, sha256 <hash>)"
LABEL_APEX_SOURCE = "mpkit.apex.source"
#: sha256 of the re-packed local Apex source ("" for a GitHub build): another source -> rebuild
LABEL_APEX_SHA = "mpkit.apex.sha256"
#: The repository a GitHub build clones (the Dockerfile's APEX_REPO default).
APEX_REPO = "https://github.com/NVIDIA/apex.git"
LABEL_BASE = "mpkit.base"

DOCKERFILE = "docker/Dockerfile"
#: Where the Dockerfile looks for an extra CA certificate (PEM) in the context.
EXTRA_CA_PATH = "docker/extra-ca.pem"

#: The module the cuda10 image runs instead of `kit` (its Python 3.7 cannot
#: install the kit's command line, which needs 3.10+): the same runner behind an
#: argparse front end; the host exports the bundle (docs/containers.md).
LEGACY_RUNNER = "kit.runner.legacy"

#: Apex pip build options per stack (None: no Apex). Empty = python-only build
#: (apex.amp, apex.fp16_utils); the fused kernels need nvcc, so only the
#: cuda12-fused variant on NVIDIA's CUDA devel base compiles them.
_APEX_BUILD_OPTS: dict[str, str | None] = {
    "cuda10": "",
    "cuda12": "",
    "cuda12-fused": "--cpp_ext --cuda_ext",
    "cpu": None,
}

#: pip version in the image's virtual environment. Ubuntu 18.04's venv pip (9.0)
#: cannot read today's index (manylinux2014 tags, requires-python); 24.0 is the
#: last pip that runs on Python 3.7. Empty: the OS's own pip.
_PIP_VERSION: dict[str, str] = {"cuda10": "24.0", "cuda12": "", "cuda12-fused": "", "cpu": ""}


@dataclass(frozen=True)
class ImageSpec:
    stack: str
    tag: str
    base: str
    lock: Path
    lock_sha256: str
    build_args: dict[str, str]
    #: Files added to the build context (path in the context -> text), e.g.
    #: the proxy CA certificate. They never touch the checkout.
    extra_files: dict[str, str] = field(default_factory=dict)
    #: sha256 over the kit's source files that the image copies (see source_sha256)
    source_sha256: str = ""
    #: sha256 of the local Apex source built in ("" when Apex comes from GitHub or is absent)
    apex_sha256: str = ""

    @property
    def apex_built(self) -> bool:
        return self.build_args.get("BUILD_APEX") == "1"


def stack_facts(name: str) -> Stack:
    if name not in STACKS:
        raise UsageError(f"unknown stack {name!r}; choose auto, {', '.join(STACK_NAMES)}")
    return STACKS[name]


def image_tag(stack: str, version: str = __version__) -> str:
    return f"{IMAGE_REPO}:{stack}-{version}"


def find_source_root(start: Path | None = None) -> Path:
    """The kit's source checkout (where docker/Dockerfile is): the build context.

    Looked for above the current folder first, then above the installed
    package (an editable install lives in the checkout).
    """
    candidates = []
    here = (start or Path.cwd()).resolve()
    candidates += [here, *here.parents]
    pkg = Path(__file__).resolve().parents[2]
    candidates += [pkg, *pkg.parents]
    for folder in candidates:
        if (folder / DOCKERFILE).is_file() and (folder / "kit" / "__init__.py").is_file():
            return folder
    raise UsageError(
        "cannot find the kit's source checkout (a folder with docker/Dockerfile and kit/): images are built from it",
        remedy="Run the command inside your clone of the kit (git clone ... && cd mpkit).",
    )


def lock_path(stack: str, root: Path) -> Path:
    """docker/locks/<lock>.txt: the stack's own, or the one it shares (cuda12-fused uses cuda12's)."""
    lock = STACKS[stack].lock_name if stack in STACKS else stack
    return root / "docker" / "locks" / f"{lock}.txt"


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source_sha256(root: Path) -> str:
    """One hash over every file of the kit that goes into an image (the package,
    pyproject.toml, the Dockerfile and its scripts), names included, so that
    `kit launch` notices an image built from older code and rebuilds it (the
    dependency layers stay cached, so that takes seconds)."""
    files = [root / "pyproject.toml", root / "docker" / "Dockerfile"]
    files += sorted((root / "docker").glob("*.sh"))
    files += sorted(p for p in (root / "kit").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    h = hashlib.sha256()
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def python_apt_packages(python: str) -> tuple[str, str]:
    """(interpreter, apt packages) for the stack's Python. (The -dev package that
    compiling Apex needs is added by the Dockerfile when BUILD_APEX=1, so that the
    same arguments serve a build with and without Apex, as in compose.cuda10.yaml.)

    Ubuntu 18.04 ships Python 3.6 as python3, so 3.7 comes as the versioned
    python3.7 packages; the other bases' python3 already is the wanted version.
    """
    name = "python3.7" if python == "3.7" else "python3"
    packages = f"{name} {name}-venv"
    if python == "3.7":
        # Ubuntu 18.04 splits distutils out of python3.7 into python3-distutils;
        # without it `python3.7 -m venv` fails in ensurepip ("cannot import sysconfig")
        packages += " python3-distutils"
    return name, packages


def image_spec(
    stack: str,
    root: Path,
    *,
    base: str | None = None,
    extra_ca_pem: str | None = None,
    pip_index_url: str | None = None,
    pip_extra_index_url: str | None = None,
    pip_trusted_host: str | None = None,
    apex: bool = True,
    apex_src: apex_archive.Source | None = None,
    apex_ref: str | None = None,
) -> ImageSpec:
    """Everything `docker build` needs for ``stack`` (no Docker call). ``apex=False``
    builds without NVIDIA Apex (no GitHub access; the image records it and the kit
    reports Apex precisions as skipped). ``apex_src`` (read_apex_source) builds Apex
    from that local source instead of cloning GitHub; ``apex_ref`` replaces the
    stack's pinned ref (checked against the source's commit when it has one)."""
    facts = stack_facts(stack)
    lock = lock_path(stack, root)
    if not lock.is_file():
        raise UsageError(f"the {stack} stack has no lock file at {lock}", remedy="Restore docker/locks/ from the kit's repository.")
    sha = file_sha256(lock)
    apex_opts = _APEX_BUILD_OPTS.get(stack)
    has_apex = apex_opts is not None and facts.apex_ref is not None
    if (apex_src is not None or apex_ref) and not has_apex:
        raise UsageError(f"the {stack} stack has no Apex: --apex-src/--apex-ref do not apply to it")
    if (apex_src is not None or apex_ref) and not apex:
        raise UsageError("--no-apex and --apex-src/--apex-ref contradict each other: choose one")
    build_apex = apex and has_apex
    ref = (apex_ref or facts.apex_ref or "") if build_apex else ""
    commit = check_apex_ref(stack, ref, apex_src, explicit=bool(apex_ref)) if build_apex else ""
    if not build_apex:
        apex_from, apex_source = "", ""
    elif apex_src is not None:
        apex_from, apex_source = "archive", apex_src.describe()
    else:
        apex_from, apex_source = "github", f"github {APEX_REPO} at {ref}"
    interpreter, apt = python_apt_packages(facts.python)
    kit_installable = tuple(int(x) for x in facts.python.split(".")[:2]) >= (3, 10)
    args = {
        "BASE": base or facts.base_image,
        "STACK": stack,
        "LOCK": facts.lock_name,
        "PYTHON": interpreter,
        "PYTHON_APT": apt,
        "VENV_PIP": _PIP_VERSION.get(stack, ""),
        "BUILD_APEX": "1" if build_apex else "0",
        "APEX_REF": ref,
        "APEX_BUILD_OPTS": (apex_opts or "") if build_apex else "",
        "APEX_FROM": apex_from,
        "APEX_SOURCE": apex_source,
        "APEX_COMMIT": commit,
        "APEX_SHA256": apex_src.sha256 if (build_apex and apex_src is not None) else "",
        "INSTALL_KIT": "1" if kit_installable else "0",
        "KIT_RUNNER": "kit" if kit_installable else LEGACY_RUNNER,
        "KIT_VERSION": __version__,
        "LOCK_SHA256": sha,
        "SOURCE_SHA256": source_sha256(root),
    }
    # Optional arguments are only passed when given, so that an image built
    # without them shares its cached layers with the next such build.
    for key, value in (
        ("PIP_INDEX_URL", pip_index_url),
        ("PIP_EXTRA_INDEX_URL", pip_extra_index_url),
        ("PIP_TRUSTED_HOST", pip_trusted_host),
    ):
        if value:
            args[key] = value
    extra: dict[str, str | bytes] = {EXTRA_CA_PATH: extra_ca_pem} if extra_ca_pem else {}
    if build_apex and apex_src is not None:
        extra[apex_archive.CONTEXT_NAME] = apex_src.data
    return ImageSpec(stack, image_tag(stack), args["BASE"], lock, sha, args, extra, args["SOURCE_SHA256"], args["APEX_SHA256"])


#: The download rate the "how long" estimate assumes (what the kit's CI machines get from PyPI).
ASSUMED_DOWNLOAD_BYTES_PER_S = 100e6


def first_build_note(stack: str) -> str:
    """What a first build of ``stack`` costs, said before it starts (kit/facts/stacks.py
    FIRST_BUILDS: a measurement, with where it was made), or '' when none was measured."""
    m = FIRST_BUILDS.get(stack)
    if m is None:
        return ""
    gb = m.download_bytes / 1e9
    at_rate = m.download_bytes / ASSUMED_DOWNLOAD_BYTES_PER_S
    return (
        f"A first build of the {stack} image has about {gb:.1f} GB to download (the pinned wheels: about {_duration(at_rate)} "
        f"at 100 MB/s) and makes an image of {m.image_bytes / 1e9:.1f} GB; it took {_duration(m.build_seconds)} in all "
        f"{m.where} (kit/facts/stacks.py). Layers built before come from Docker's cache."
    )


def disk_note(stack: str, free_bytes: int | None) -> str:
    """A warning before a first build when the disk where the engine keeps its data has less
    free than such a build took at its peak (kit/facts/stacks.py BUILD_DISK_PEAKS), or ''."""
    m = BUILD_DISK_PEAKS.get(stack)
    if m is None or free_bytes is None or free_bytes >= m.peak_bytes:
        return ""
    return (
        f"warning: only {free_bytes / 1e9:.1f} GB is free where Docker keeps its data, and a first build of the "
        f"{stack} image took {m.peak_bytes / 1e9:.1f} GB there at its peak (for an image of {m.image_bytes / 1e9:.1f} GB; "
        "kit/facts/stacks.py): it may stop near its end with 'no space left on device'. docker system df shows "
        "what uses the space; docker image prune and docker builder prune free the unused part."
    )


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    return f"{round(seconds / 60)} min"


def read_apex_source(path: str | Path) -> apex_archive.Source:
    """``--apex-src PATH`` checked and re-packed (apex_archive.read_source), or a one-line UsageError (exit 2)."""
    try:
        return apex_archive.read_source(str(Path(path).expanduser()))
    except apex_archive.SourceError as exc:
        raise UsageError(
            f"--apex-src {exc}",
            remedy="Give a folder or a `git archive` tarball of NVIDIA Apex (github.com/NVIDIA/apex at the stack's "
            "pinned ref; setup.py and apex/ at its top: git archive -o apex.tar.gz REF in a clone of it); nothing "
            "was built.",
        ) from None


def check_apex_ref(stack: str, ref: str, src: apex_archive.Source | None, *, explicit: bool) -> str:
    """The commit to record for ``ref``: the source's own commit when it has one (refused when it is
    not the ref's commit), else the full commit of a known ref, else ''."""
    want = APEX_REF_COMMITS.get(ref, ref.lower())
    hexlike = bool(re.fullmatch(r"[0-9a-f]{7,40}", want))
    if src is None or not src.commit:
        return want if hexlike and len(want) == 40 else ""
    if hexlike and not src.commit.startswith(want):
        pinned = f"--apex-ref {ref}" if explicit else f"the {stack} stack pins Apex {ref}"
        raise UsageError(
            f"--apex-src {src.given} is Apex commit {src.commit[:12]}, but {pinned} ({want[:12]}); nothing was built",
            remedy=f"Give the source of {ref}, or build this commit on purpose with --apex-ref {src.commit[:12]} "
            "(the image then records that ref).",
        )
    return src.commit


def read_ca_cert(path: str | Path) -> str:
    """The PEM text of ``--ca-cert``, checked to be a certificate (or a bundle)."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="ascii")
    except FileNotFoundError:
        raise UsageError(f"--ca-cert {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--ca-cert {path}: cannot read it as a PEM text file ({exc})") from None
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise UsageError(
            f"--ca-cert {path} holds no PEM certificate (no '-----BEGIN CERTIFICATE-----' line)",
            remedy="Export your proxy's root certificate in PEM (Base64) form, e.g. openssl x509 -in ca.der -inform der -out ca.pem",
        )
    return text.strip() + "\n"
