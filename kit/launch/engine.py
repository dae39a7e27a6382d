"""Talking to the Docker engine, and turning its errors into ones a user can act on.

The docker SDK is imported here, lazily (``kit --help`` must not pay for it).
Every failure the engine reports reaches the user as a :class:`DockerError`
(or :class:`EnvironmentCheckError` when the host, not Docker, is the problem)
with a remedy; :func:`explain` is the single table from engine messages to
those errors, and tests feed it the engines' real message texts.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any, Callable

from kit.env.docker_probe import exception_chain
from kit.env.doctor import NO_TOOLKIT_ERROR, TOOLKIT_REMEDY
from kit.errors import DockerError, EnvironmentCheckError, KitError

#: Seconds the SDK waits for one HTTP answer. Builds and runs stream for much
#: longer than the SDK's default 60 s, and pip can print nothing for minutes
#: while it unpacks torch, so streaming calls get this generous limit.
STREAM_TIMEOUT_S = 3600
PING_TIMEOUT_S = 10

DOCS = "docs/containers.md"

# What the engines print, as found in the errors (lower-cased substrings); a missing toolkit's is
# kit.env.doctor.NO_TOOLKIT_ERROR, with its remedy.
DRIVER_TOO_OLD = "unsatisfied condition: cuda>="
BAD_DEVICE = ("unknown device", "invalid device ordinal", "device error:")
DISK_FULL = "no space left on device"
NETWORK = (
    "could not fetch url",
    "failed to establish a new connection",
    "temporary failure in name resolution",
    "name or service not known",
    "max retries exceeded",
    "connection timed out",
    "read timed out",
    "connection refused",
    "network is unreachable",
    "could not resolve host",
    "no matching distribution found",
    "could not find a version that satisfies",
    "unable to access 'https://",
    "failed to fetch",
    "temporary failure resolving",
)
#: A download that arrived broken (cut off, or not the file it claims to be): pip's words.
DOWNLOAD_BROKEN = ("connection broken: ", "incompleteread", ".whl is invalid", "bad zip file",
                   "do not match the hashes")
TLS = ("certificate_verify_failed", "certificate verify failed", "ssl: ", "sslerror", "server certificate verification failed")
BASE_MISSING = ("manifest unknown", "pull access denied", "repository does not exist", "toomanyrequests", "registry-1.docker.io", "no such image")


#: Set by the Makefile for the kit commands it runs (`make run`, `make image`): the user gives
#: the build's options as make variables there, so the errors name those.
LAUNCH_VIA_ENV = "KIT_LAUNCH_VIA"
#: the Makefile's variable for each build option (the others pass through ARGS=)
MAKE_VARIABLES = {"--ca-cert": "CA_CERT", "--base": "BASE"}


def started_by_make() -> bool:
    """This kit command was started by the Makefile (``KIT_LAUNCH_VIA=make``)."""
    return os.environ.get(LAUNCH_VIA_ENV) == "make"


@dataclass
class Context:
    """What was being done when the engine failed (for the message)."""

    during: str = "run"  # "build" | "run" | "connect"
    stack: str | None = None
    gpus: tuple[str, ...] = ()
    image: str | None = None
    base: str | None = None
    min_driver: str | None = None
    #: started by `make run` / `make image`: name make's variables, not the kit's options
    via_make: bool = False

    def option(self, flag: str, value: str) -> str:
        """A build option as this user gives it: ``--ca-cert PEM``, or through make ``CA_CERT=PEM``
        (an option without a variable of its own: ``ARGS='--pip-index-url URL'``)."""
        if not self.via_make:
            return f"{flag} {value}"
        name = MAKE_VARIABLES.get(flag)
        return f"{name}={value}" if name else f"ARGS='{flag} {value}'"


def _network_remedy(ctx: Context) -> str:
    if ctx.during != "build":
        return f"Check the machine's network, proxy and DNS settings; see {DOCS}."
    ca = ctx.option("--ca-cert", "/path/to/proxy-ca.pem")
    return (
        "The image build could not download packages. Behind a TLS-inspecting proxy, give its root certificate: "
        + (f"add {ca} to the make command (make run {ca})" if ctx.via_make else f"kit image build {ca}")
        + f". With a package mirror: {ctx.option('--pip-index-url', 'URL')} "
        f"(or {ctx.option('--pip-extra-index-url', 'URL')} for a mirror beside PyPI). Builds use the host network by "
        f"default (--network host). See {DOCS}, 'Proxies and mirrors'."
    )


def explain(text: str, ctx: Context | None = None) -> KitError:
    """The user-facing error for an engine message ``text``."""
    ctx = ctx or Context()
    low = text.lower()
    first = text.strip().splitlines()[-1] if text.strip() else text
    if NO_TOOLKIT_ERROR in low or ('could not select device driver' in low and "gpu" in low):
        return DockerError(
            "Docker cannot give the container a GPU: the NVIDIA Container Toolkit is missing or not registered with Docker "
            f"(the engine said: {NO_TOOLKIT_ERROR}).",
            remedy=TOOLKIT_REMEDY,
        )
    if DRIVER_TOO_OLD in low:
        need = text[low.index(DRIVER_TOO_OLD) + len("unsatisfied condition: "):].split(",")[0].split()[0]
        stack = f"the {ctx.stack} image" if ctx.stack else "the image"
        remedy = "Upgrade the NVIDIA driver"
        if ctx.min_driver:
            remedy += f" to {ctx.min_driver} or newer"
        remedy += " (CUDA release notes, table 3), or pick a stack your driver supports: kit doctor lists them."
        return EnvironmentCheckError(f"The NVIDIA driver is too old for {stack}: it needs {need} (the engine said: {first}).", remedy=remedy)
    if any(s in low for s in BAD_DEVICE) and ("nvidia" in low or ctx.gpus):
        gpus = ",".join(ctx.gpus) or "?"
        return EnvironmentCheckError(
            f"GPU {gpus} does not exist on this machine (the engine said: {first}).",
            remedy="nvidia-smi -L lists the GPUs and their indices; pass one of them with --gpu N (make run GPU=N).",
        )
    if DISK_FULL in low:
        return DockerError(
            f"The disk is full: Docker could not {'finish the image build' if ctx.during == 'build' else 'write'} "
            f"(no space left on device). The GPU images need about 15-20 GB while building.",
            remedy="Free space where Docker keeps its data (docker info -f '{{.DockerRootDir}}'): docker image prune, "
            "docker builder prune, docker system df shows what uses it. Then run the command again.",
        )
    if any(s in low for s in TLS):
        return DockerError(
            f"A TLS certificate check failed during the image {ctx.during} ({first}): a proxy on this network probably "
            "inspects TLS with its own certificate authority.",
            remedy=_network_remedy(ctx),
        )
    if ctx.during == "build" and is_base_missing(text):
        return base_missing(ctx, first)
    if ctx.during == "build" and any(s in low for s in DOWNLOAD_BROKEN):
        return DockerError(
            f"A package download broke off or arrived damaged during the image build: {first}",
            remedy="Run the same command again: the steps that succeeded come from Docker's cache. If it fails again at the "
            "same package, the index or mirror serves a broken file, or a proxy cuts the download: try another index "
            f"({ctx.option('--pip-index-url', 'URL')}) or check the proxy ({ctx.option('--ca-cert', 'PEM')}).",
        )
    if any(s in low for s in NETWORK):
        return DockerError(f"Network failure during the image {ctx.during}: {first}", remedy=_network_remedy(ctx))
    what = {"build": "The image build failed", "run": "The container failed to start", "connect": "Docker failed"}.get(ctx.during, "Docker failed")
    return DockerError(f"{what}: {first}", remedy=f"The engine's full message is above; see {DOCS} ('When something goes wrong').")


def is_base_missing(text: str) -> bool:
    """The engine could not get the FROM image (no registry, unknown tag, not local)."""
    low = text.lower()
    return any(s in low for s in BASE_MISSING)


def base_missing(ctx: Context, said: str) -> DockerError:
    """No base image and no registry: one line that names the local way
    (scripts/make_base_image.sh and --base), with the stack's own arguments."""
    from kit.facts.stacks import STACKS

    base = ctx.base or "the base image"
    facts = STACKS.get(ctx.stack or "")
    local = facts.local_base if facts is not None else None
    on_it = (lambda name: f"add {ctx.option('--base', name)} to the make command") if ctx.via_make else \
        (lambda name: f"build on it with {ctx.option('--base', name)}")
    if local is not None:
        image, suite = local
        make = f"make a local one with `sudo bash scripts/make_base_image.sh {image} {suite}` and {on_it(image)}"
    else:
        make = (f"load a copy (docker save on a machine that can pull it, docker load here) and {on_it('NAME')}; "
                "scripts/make_base_image.sh cannot make it")
        if facts is not None and facts.name == "cuda12-fused":
            make += " (it is NVIDIA's CUDA devel image, for nvcc), or use --stack cuda12, which needs no CUDA base"
    return DockerError(
        f"Docker cannot get the base image {base} (no registry reachable, or no such tag; the engine said: {said.strip()}): {make}.",
        remedy=(
            f"Where a registry is reachable, `docker pull` it first; any local copy of the same OS works with {ctx.option('--base', 'NAME')}. "
            "scripts/make_base_image.sh makes Debian and Ubuntu "
            f"bases from their mirrors without any registry (see {DOCS}, 'Local mirrors and air-gapped machines'). "
            "NVIDIA deleted the CUDA 10 tags of nvidia/cuda; no kit stack needs them."
        ),
    )


# -- connecting ---------------------------------------------------------------


def connect(timeout: int = STREAM_TIMEOUT_S, factory: Callable[..., Any] | None = None) -> Any:
    """A docker client that has answered a ping, or a DockerError saying why not."""
    try:
        import docker  # lazily: kit --help must stay fast
    except ImportError:
        raise DockerError("the docker Python package is not installed", remedy="pip install docker (it comes with the kit: pip install -e .)") from None
    make = factory or docker.from_env
    try:
        client = make(timeout=timeout)
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001 -- every SDK failure here means "unreachable"
        raise unreachable(exc) from None


def local_free_bytes(client: Any) -> int | None:
    """Free bytes on the disk where the engine keeps its data (``docker info``'s DockerRootDir),
    when the engine runs on this machine (a unix socket); None for an engine elsewhere
    (tcp://, ssh://: its disk is not this one) or when the engine does not say."""
    try:
        if not str(getattr(client.api, "base_url", "")).startswith("http+docker://"):
            return None
        root = client.info().get("DockerRootDir")
        return shutil.disk_usage(root).free if root and os.path.isdir(root) else None
    except Exception:  # noqa: BLE001 -- a fake or old engine, no permission on the folder
        return None


def unreachable(exc: BaseException) -> DockerError:
    """Engine not running / no permission on the socket / other, from a connection failure."""
    from kit.env.docker_probe import DEFAULT_HOST

    host = os.environ.get("DOCKER_HOST") or DEFAULT_HOST
    chain = exception_chain(exc)
    text = " ".join(str(e) for e in chain)
    if any(isinstance(e, PermissionError) for e in chain) or "permission denied" in text.lower():
        return DockerError(
            f"No permission on the Docker socket ({host}).",
            remedy="Add your user to the docker group (sudo usermod -aG docker $USER, then log out and back in), or run as root.",
        )
    if any(isinstance(e, (FileNotFoundError, ConnectionRefusedError)) for e in chain) or any(
        s in text for s in ("No such file or directory", "Connection refused", "Connection aborted")
    ):
        return DockerError(
            f"The Docker engine is not running (nothing answers at {host}).",
            remedy="Start it (sudo systemctl start docker; without systemd: sudo dockerd &), or point DOCKER_HOST at a running engine. "
            "`kit run` works without Docker.",
        )
    return DockerError(f"The Docker engine at {host} cannot be used: {exc}", remedy="Check `docker info`.")


def api_error_text(exc: BaseException) -> str:
    """The engine's own words from an SDK exception (APIError.explanation, BuildError.msg)."""
    for attr in ("explanation", "msg"):
        value = getattr(exc, attr, None)
        if value:
            return value.decode() if isinstance(value, bytes) else str(value)
    return str(exc)


# -- GPU support --------------------------------------------------------------


def gpu_support(client: Any) -> str:
    """How the engine hands out GPUs: nvidia-runtime, cdi, hook, or none (from `docker info`)."""
    from kit.env import docker_probe

    return docker_probe.probe(client).get("gpu_support", "none")


def require_gpu_support(client: Any) -> None:
    """Raise the toolkit error when `docker info` shows no way to give containers a GPU."""
    if gpu_support(client) == "none":
        raise DockerError(
            "Docker cannot give containers a GPU here: `docker info` lists no 'nvidia' runtime and no CDI GPU device, "
            f"and no nvidia-container-runtime-hook is installed; GPU containers would fail with: {NO_TOOLKIT_ERROR}",
            remedy=TOOLKIT_REMEDY,
        )
