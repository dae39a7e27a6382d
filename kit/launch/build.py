"""`kit image build`: build a stack's image with the classic builder, showing progress.

The build is streamed through the SDK's low-level ``api.build`` (the classic
builder: no BuildKit/buildx needed), so every log line can be shown as it
comes: the step numbers drive a progress bar, and the whole log is kept in a
file for when something fails.
"""

from __future__ import annotations

import io
import re
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kit.errors import DockerError, KitError
from kit.launch import engine
from kit.launch.apex_archive import CONTEXT_NAME as APEX_CONTEXT_NAME
from kit.launch.apex_archive import Source as ApexSource
from kit.launch.stacks import (
    DOCKERFILE,
    LABEL_APEX_BUILT,
    LABEL_APEX_OPTS,
    LABEL_APEX_REF,
    LABEL_APEX_SHA,
    LABEL_APEX_SOURCE,
    LABEL_BASE,
    LABEL_LOCK,
    LABEL_SOURCE,
    LABEL_STACK,
    LABEL_VERSION,
    ImageSpec,
    disk_note,
    find_source_root,
    image_spec,
    read_apex_source,
    read_ca_cert,
)

STEP_RE = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
#: the classic builder colours a RUN step's stderr (ESC[91m ... ESC[0m)
ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
TAIL_LINES = 30
#: pip's own progress lines: which package it is getting, and which file.
PIP_COLLECTING_RE = re.compile(r"^Collecting (\S+)")
PIP_DOWNLOADING_RE = re.compile(r"^\s*Downloading (\S+)(?: \(([^)]+)\))?")
#: after these pip is no longer downloading (a later failure is not a download's)
PIP_DONE_RE = re.compile(r"^(Installing collected packages|Successfully installed|Requirement already satisfied)")


class PipActivity:
    """What pip was getting when the build stopped, from the log lines: the
    package of the last ``Collecting`` line and the file of its ``Downloading``
    line, until pip moves on to installing."""

    def __init__(self) -> None:
        self.package = ""
        self.file = ""
        self.size = ""

    def see(self, line: str) -> None:
        m = PIP_COLLECTING_RE.match(line)
        if m:
            self.package, self.file, self.size = m.group(1), "", ""
            return
        m = PIP_DOWNLOADING_RE.match(line)
        if m and self.package:
            self.file, self.size = m.group(1).rsplit("/", 1)[-1], m.group(2) or ""
            return
        if PIP_DONE_RE.match(line):
            self.package = self.file = self.size = ""

    def describe(self) -> str:
        """'pip was downloading torch==2.9.1 (torch-2.9.1-....whl, 899.7 MB)', or ''."""
        if not self.package:
            return ""
        if not self.file:
            return f"pip was looking for {self.package}"
        return f"pip was downloading {self.package} ({self.file}" + (f", {self.size})" if self.size else ")")


class BuildUI(Protocol):
    def start(self, spec: ImageSpec, log_path: Path) -> None: ...
    def note(self, text: str) -> None: ...
    def step(self, number: int, total: int, instruction: str) -> None: ...
    def line(self, text: str) -> None: ...
    def finish(self, ok: bool) -> None: ...


class NullBuildUI:
    def start(self, spec: ImageSpec, log_path: Path) -> None: ...
    def note(self, text: str) -> None: ...
    def step(self, number: int, total: int, instruction: str) -> None: ...
    def line(self, text: str) -> None: ...
    def finish(self, ok: bool) -> None: ...


@dataclass
class BuildResult:
    tag: str
    image_id: str
    stack: str
    seconds: float
    log_path: Path
    steps: int = 0
    cached_steps: int = 0
    tail: list[str] = field(default_factory=list)


def build_stack(
    stack: str,
    *,
    ca_cert: str | Path | None = None,
    pip_index_url: str | None = None,
    pip_extra_index_url: str | None = None,
    pip_trusted_host: str | None = None,
    base: str | None = None,
    network: str = "host",
    no_cache: bool = False,
    apex: bool = True,
    apex_src: str | Path | ApexSource | None = None,
    apex_ref: str | None = None,
    client: Any = None,
    ui: BuildUI | None = None,
    root: Path | None = None,
) -> BuildResult:
    """Build ``mpkit:<stack>-<version>`` from docker/Dockerfile. ``stack`` must be concrete (not auto)."""
    root = root or find_source_root()
    pem = read_ca_cert(ca_cert) if ca_cert else None
    source = apex_src if isinstance(apex_src, ApexSource) or apex_src is None else read_apex_source(apex_src)
    spec = image_spec(
        stack, root, base=base, extra_ca_pem=pem,
        pip_index_url=pip_index_url, pip_extra_index_url=pip_extra_index_url, pip_trusted_host=pip_trusted_host,
        apex=apex, apex_src=source, apex_ref=apex_ref,
    )
    client = client or engine.connect()
    return build_image(spec, root, client, network=network, no_cache=no_cache, ui=ui)


def _follow_build(stream, log, tail: deque, pip: PipActivity, ui: BuildUI) -> tuple[str, int, int, str | None]:
    """Read the builder's events: each line into the ``log`` and its ``tail``, the steps and cached
    steps counted and shown on ``ui``. (the image id, the last step, the cached steps, the
    builder's error or None)."""
    image_id = ""
    steps = cached = 0
    for event in stream:
        if "error" in event:
            error_text = str(event.get("error") or event.get("errorDetail", {}).get("message", ""))
            log.write(error_text + "\n")
            tail.append(error_text)
            return image_id, steps, cached, error_text
        if "aux" in event and isinstance(event["aux"], dict) and "ID" in event["aux"]:
            image_id = event["aux"]["ID"]
        text = event.get("stream") or event.get("status") or ""
        for raw in ANSI_RE.sub("", str(text)).splitlines():
            line = raw.rstrip()
            if not line:
                continue
            log.write(line + "\n")
            tail.append(line)
            pip.see(line)
            m = STEP_RE.match(line)
            if m:
                steps = int(m.group(1))
                ui.step(steps, int(m.group(2)), m.group(3))
            elif line.strip() == "---> Using cache":
                cached += 1
            else:
                ui.line(line)
            if line.startswith("Successfully built "):
                image_id = image_id or line.split()[-1]
    return image_id, steps, cached, None


def _build_failed(error_text: str, tail: deque, pip: PipActivity, ctx: engine.Context, untagged: str,
                  log_path: Path) -> KitError:
    """The error of a failed build: what the engine's words mean (engine.explain), what pip was
    doing, what became of the tag, and the build log's last lines."""
    # The last log lines say more than the engine's one-line error
    # (pip's reason, the failing command).
    # The failing command's own last words (pip's "ERROR: No matching distribution found for
    # torch==2.9.1", or the exception line) say more than Docker's "The command '...' returned
    # a non-zero code", so they go last: the message quotes the last line.
    said = [ln.strip() for ln in tail if ln.strip() and not ln.startswith("Removing intermediate container")
            and "returned a non-zero code" not in ln and not STEP_RE.match(ln)]
    err = engine.explain("\n".join(list(tail)[-8:] + [error_text] + said[-1:]), ctx)
    during_pip = pip.describe()
    message = err.message + (f" The build stopped while {during_pip}." if during_pip else "")
    message += f" {untagged}"
    detail = f"\nLast lines of the build log (all of it: {log_path}):\n" + "\n".join(tail)
    return type(err)(message + detail, remedy=err.remedy)


def build_image(
    spec: ImageSpec, root: Path, client: Any, *, network: str = "host", no_cache: bool = False,
    ui: BuildUI | None = None, log_dir: Path | None = None,
) -> BuildResult:
    ui = ui or NullBuildUI()
    log_path = Path(log_dir or tempfile.gettempdir()) / f"mpkit-build-{spec.stack}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    pip = PipActivity()
    ctx = engine.Context(during="build", stack=spec.stack, image=spec.tag, base=spec.base, via_make=engine.started_by_make())
    # what the tag named before: a failed build must leave it so (the classic
    # builder tags only an image whose every step succeeded; checked below)
    before = _image_id(client, spec.tag)
    started = time.monotonic()
    image_id = ""
    steps = cached = 0
    error_text: str | None = None
    ui.start(spec, log_path)
    if before is None:  # a first build: say so now if the disk looks too small for it
        warning = disk_note(spec.stack, engine.local_free_bytes(client))
        if warning:
            ui.note(warning)
    ok = False
    try:
        with open(log_path, "w", encoding="utf-8", buffering=1) as log:
            log.write(f"# kit image build: {spec.tag}, stack {spec.stack}, base {spec.base}\n")
            try:
                context = build_context(root, spec.extra_files)
                stream = client.api.build(
                    fileobj=context,
                    custom_context=True,
                    dockerfile=DOCKERFILE,
                    tag=spec.tag,
                    buildargs=spec.build_args,
                    network_mode=network,
                    rm=True,
                    forcerm=True,
                    nocache=no_cache,
                    pull=False,
                    decode=True,
                    labels=None,
                )
                image_id, steps, cached, error_text = _follow_build(stream, log, tail, pip, ui)
            except KitError:
                raise
            except Exception as exc:  # noqa: BLE001 -- the SDK raises APIError/ConnectionError/ReadTimeout
                error_text = engine.api_error_text(exc)
                log.write(f"{type(exc).__name__}: {error_text}\n")
                tail.append(error_text)
        if error_text is not None:
            untagged = _keep_tag_as_before(client, spec.tag, before)
            if engine.is_base_missing(error_text):
                # The FROM line failed: one line with the way out, the log has nothing more to say.
                raise engine.base_missing(ctx, error_text)
            raise _build_failed(error_text, tail, pip, ctx, untagged, log_path)
        if not image_id:
            raise DockerError(f"The build of {spec.tag} ended without an image", remedy=f"See the build log: {log_path}")
        ok = True
    finally:
        ui.finish(ok)
    return BuildResult(spec.tag, image_id, spec.stack, time.monotonic() - started, log_path, steps, cached, list(tail))


def _image_id(client: Any, tag: str) -> str | None:
    """The id the tag names now, or None (no such image, or the engine cannot say)."""
    try:
        return str(client.images.get(tag).id)
    except Exception:  # noqa: BLE001 -- ImageNotFound, or a fake/old engine
        return None


def _keep_tag_as_before(client: Any, tag: str, before: str | None) -> str:
    """After a failed build: make sure ``tag`` names what it named before (nothing, or the
    earlier complete image), never a half-built one, and say so in a sentence."""
    after = _image_id(client, tag)
    if after is not None and after != before:
        try:  # an engine that tagged a failed build: take the tag away again, back to the earlier image
            client.images.remove(tag, noprune=True)
            if before is not None:
                repo, _, name = tag.rpartition(":")
                client.api.tag(before, repo, name)
        except Exception:  # noqa: BLE001
            return f"{tag} now names an image of the failed build; remove it: docker rmi {tag}."
    if before is None:
        return f"Nothing was tagged {tag}."
    return f"{tag} is still the earlier complete image (kit launch rebuilds it when it is stale)."


def build_context(root: Path, extra_files: dict[str, str | bytes] | None = None) -> Any:
    """The build context as a tar file object: the checkout filtered by
    .dockerignore (as `docker build` does), plus ``extra_files`` (text or bytes),
    which replace a checkout file of the same name. An Apex archive left in the
    checkout for Compose (docker/apex-src.tar*) never goes in: this builder
    only builds the source given with --apex-src."""
    import tarfile

    from docker.utils.build import create_archive, exclude_paths

    exclude: list[str] = []
    ignore = root / ".dockerignore"
    if ignore.is_file():
        exclude = [ln.strip() for ln in ignore.read_text().splitlines() if ln.strip() and not ln.strip().startswith("#")]
    extra = dict(extra_files or {})
    files = sorted(
        p for p in exclude_paths(str(root), exclude, dockerfile=DOCKERFILE)
        if p not in extra and not p.startswith(APEX_CONTEXT_NAME)
    )
    context = create_archive(files=files, root=str(root))
    if extra:
        context.seek(0)
        with tarfile.open(fileobj=context, mode="a") as tar:
            for name, value in sorted(extra.items()):
                data = value.encode("utf-8") if isinstance(value, str) else value
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(data))
        context.seek(0)
    return context


# -- what is built ------------------------------------------------------------


@dataclass
class ImageInfo:
    tag: str
    stack: str
    kit_version: str
    lock_sha256: str
    apex_built: bool
    apex_ref: str
    #: where Apex came from (GitHub or a local source), "" for images built before the kit recorded it
    apex_source: str
    size_bytes: int
    created: str
    image_id: str
    #: "python-only", "fused kernels (--cpp_ext --cuda_ext)", "" without Apex, "?" for images built before the label
    apex_build: str = ""


def list_images(client: Any = None) -> list[ImageInfo]:
    """The kit's images on this engine (those with the mpkit.stack label)."""
    client = client or engine.connect(timeout=engine.PING_TIMEOUT_S * 6)
    out: list[ImageInfo] = []
    try:
        images = client.images.list(filters={"label": LABEL_STACK})
    except Exception as exc:  # noqa: BLE001
        raise engine.explain(engine.api_error_text(exc), engine.Context(during="connect")) from None
    for img in images:
        labels = img.labels or {}
        tags = img.tags or ["<untagged>"]
        for tag in tags:
            out.append(ImageInfo(
                tag=tag,
                stack=labels.get(LABEL_STACK, "?"),
                kit_version=labels.get(LABEL_VERSION, "?"),
                lock_sha256=labels.get(LABEL_LOCK, "?"),
                apex_built=labels.get(LABEL_APEX_BUILT) == "1",
                apex_ref=labels.get(LABEL_APEX_REF, ""),
                apex_source=labels.get(LABEL_APEX_SOURCE, ""),
                size_bytes=int(img.attrs.get("Size") or 0),
                apex_build=apex_build_kind(labels.get(LABEL_APEX_OPTS)) if labels.get(LABEL_APEX_BUILT) == "1" else "",
                created=str(img.attrs.get("Created", ""))[:19].replace("T", " "),
                image_id=img.short_id,
            ))
    return sorted(out, key=lambda i: i.tag)


def apex_build_kind(options: str | None) -> str:
    """How an image's Apex was built, in words, from its build options label."""
    if options is None:
        return "?"
    options = options.strip()
    return "python-only" if not options else f"fused kernels ({options})"


def image_state(client: Any, spec: ImageSpec, *, check_base: bool = False) -> str:
    """'missing', 'stale' (built from another lock or older kit code, or with
    ``check_base`` from another base image than ``spec.base``) or 'current'."""
    try:
        img = client.images.get(spec.tag)
    except Exception as exc:  # noqa: BLE001
        if type(exc).__name__ in ("ImageNotFound", "NotFound"):
            return "missing"
        raise engine.explain(engine.api_error_text(exc), engine.Context(during="connect")) from None
    labels = img.labels or {}
    same_lock = labels.get(LABEL_LOCK) == spec.lock_sha256
    same_code = not spec.source_sha256 or labels.get(LABEL_SOURCE) == spec.source_sha256
    same_base = not check_base or labels.get(LABEL_BASE) == spec.base
    # an Apex source asked for: the image must have been built from that very source
    same_apex = not spec.apex_sha256 or labels.get(LABEL_APEX_SHA) == spec.apex_sha256
    return "current" if same_lock and same_code and same_base and same_apex else "stale"


__all__ = ["BuildResult", "BuildUI", "ImageInfo", "NullBuildUI", "build_image", "build_stack", "image_state", "list_images"]
