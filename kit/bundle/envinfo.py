"""The few environment facts a headline, a bundle name or a comparability check needs.

The environment record (``env.json``, also ``results.json``'s ``environment``)
is written by :mod:`kit.env.record` and grows over time; bundles from older or
newer kits, or hand-made ones, may lack any key. So every fact here is looked
up defensively under the names it has had or is likely to have, and a fact
that cannot be found is the string ``"unknown"`` -- never an empty or guessed
value.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Iterable

from kit.bundle.inert import inert
from kit.env.probe import UNKNOWN

#: the driver of a run that used no GPU, in every view (compare, `kit bundle show`, report.html)
NO_DRIVER = "none (CPU run)"


@dataclass(frozen=True)
class EnvSummary:
    machine: str = UNKNOWN
    gpu: str = UNKNOWN
    gpu_count: int | None = None
    driver: str = UNKNOWN
    cuda: str = UNKNOWN
    stack: str = UNKNOWN
    image: str = UNKNOWN
    torch: str = UNKNOWN
    cudnn: str = UNKNOWN
    fastai: str = UNKNOWN
    python: str = UNKNOWN
    data_source: str = UNKNOWN
    kit_version: str = UNKNOWN

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def headline(self) -> str:
        """One line: "host · 1x NVIDIA H200 · driver 580.159 · stack cuda12 · torch 2.11"."""
        gpus = self.gpu if not self.gpu_count or self.gpu_count == 1 else f"{self.gpu_count}x {self.gpu}"
        return (
            f"{self.machine} · {gpus} · driver {self.driver} · stack {self.stack} · "
            f"torch {self.torch} · data {self.data_source}"
        )


def _dig(obj: Any, path: str) -> Any:
    """Follow a dotted path through dicts (and ``[0]`` into lists); None if absent."""
    cur = obj
    for part in path.split("."):
        m = re.fullmatch(r"([^\[\]]+)(?:\[(\d+)\])?", part)
        if not m or not isinstance(cur, dict):
            return None
        cur = cur.get(m.group(1))
        if m.group(2) is not None:
            if not isinstance(cur, list) or len(cur) <= int(m.group(2)):
                return None
            cur = cur[int(m.group(2))]
    return cur


def _text(value: Any) -> str | None:
    """A displayable version/name from a value that may be a dict like {"version": ...}."""
    if isinstance(value, dict):
        for key in ("version", "name", "tag", "value", "id"):
            if value.get(key) not in (None, ""):
                return _text(value[key])
        return None
    if value is None or value == "" or isinstance(value, (list, tuple)):
        return None
    if isinstance(value, bool):
        return None
    text = str(value).strip()
    # kit.env.probe records a failed probe as {"value": "unknown", "reason": ...}
    return text if text and text.lower() not in ("none", "null", UNKNOWN) else None


def _first(env: dict, paths: Iterable[str]) -> str:
    for path in paths:
        text = _text(_dig(env, path))
        if text:
            return text
    return UNKNOWN


def _gpus(env: dict) -> list[dict]:
    for path in ("nvml.gpus", "gpus", "gpu.devices", "hardware.gpus", "devices"):
        value = _dig(env, path)
        if isinstance(value, list) and value and all(isinstance(g, dict) for g in value):
            return value
    single = env.get("gpu")
    if isinstance(single, dict):
        return [single]
    return []


def _library(env: dict, name: str) -> str:
    return _first(
        env,
        (
            name,
            f"{name}_version",
            f"versions.{name}",
            f"packages.{name}",
            f"libraries.{name}",
            f"software.{name}",
            f"python_packages.{name}",
            f"stack.{name}",
            f"framework.{name}",
        ),
    )


def cudnn_version(value: Any) -> str:
    """cuDNN's version in one format, "major.minor.patch": torch's integer (92400 -> "9.24.0",
    8907 -> "8.9.7"; kit.facts.cuda.CUDNN_V9_FIRST_CODE) or the nvidia-cudnn wheel's version
    ("9.19.0.56" -> "9.19.0"); anything else as it is, "unknown" when absent."""
    from kit.facts.cuda import CUDNN_V9_FIRST_CODE

    text = _text(value)
    if text is None:
        return UNKNOWN
    if re.fullmatch(r"[0-9]{4,6}", text):
        code = int(text)
        major, rest = divmod(code, 10000 if code >= CUDNN_V9_FIRST_CODE else 1000)
        return f"{major}.{rest // 100}.{rest % 100}"
    m = re.fullmatch(r"([0-9]+\.[0-9]+\.[0-9]+)(\.[0-9]+)*", text)
    return m.group(1) if m else text


def summarise_environment(env: dict | None, config: Any = None, cells: Iterable[Any] = ()) -> EnvSummary:
    """Read the headline facts out of an environment record.

    ``config`` (a RunConfig or its dict) and ``cells`` (CellResults or dicts)
    are consulted for the data source when the environment does not say.
    """
    env = env if isinstance(env, dict) else {}
    gpus = _gpus(env)
    gpu = UNKNOWN
    if gpus:
        names = [_text(g.get("name")) for g in gpus]
        gpu = next((n for n in names if n), UNKNOWN)
    else:
        gpu = _first(env, ("gpu_name", "gpu.name", "device_name"))
    if gpu == UNKNOWN and str(env.get("run_device", "")).startswith("cpu"):
        gpu = "CPU only"
    driver = _first(env, ("nvml.driver_version", "driver", "driver_version", "nvidia.driver", "nvidia_driver", "gpu.driver"))
    if driver == UNKNOWN and gpus:
        driver = next((t for t in (_text(g.get("driver")) or _text(g.get("driver_version")) for g in gpus) if t), UNKNOWN)
    if driver == UNKNOWN and gpu == "CPU only":
        driver = NO_DRIVER
    data_source = _first(env, ("data.source", "data_source", "data"))
    if data_source == UNKNOWN and config is not None:
        data_source = _text(config.get("data") if isinstance(config, dict) else getattr(config, "data", None)) or UNKNOWN
    if data_source == UNKNOWN:
        sources = {(_cell_data(c) or {}).get("source") for c in cells} - {None}
        if len(sources) == 1:
            data_source = str(sources.pop())
        elif sources:
            data_source = "mixed"
    stack = _first(env, ("container.stack", "stack", "stack.name", "image.stack", "launch.stack"))
    if stack == UNKNOWN and _dig(env, "container.inside") is False:
        stack = "native"  # the record says the run was not inside a container
    summary = EnvSummary(
        machine=_first(env, ("host.name", "hostname", "host.hostname", "host_id", "host.host_id", "machine.hostname", "node")),
        gpu=gpu,
        gpu_count=len(gpus) or None,
        driver=driver,
        cuda=_first(env, ("cuda_runtime.cuda", "cuda", "cuda_version", "versions.cuda", "torch_cuda", "stack.cuda")),
        stack=stack,
        image=_first(env, ("container.image_digest", "container.image_id", "container.image", "image", "image.tag",
                           "image.id", "image_tag", "image_id", "launch.image")),
        torch=_library(env, "torch"),
        cudnn=cudnn_version(_first(env, ("cuda_runtime.cudnn", "cudnn", "cudnn_version", "versions.cudnn", "libraries.cudnn",
                                         "packages.cudnn"))),
        fastai=_library(env, "fastai"),
        python=_first(env, ("python.version", "python", "python_version", "versions.python")),
        data_source=data_source,
        kit_version=_first(env, ("kit.version", "kit_version", "versions.kit", "packages.mpkit")),
    )
    # every fact is a stranger's text: inert once here, so every view (terminal, Markdown, HTML) gets
    # it without escape sequences or control characters (HTML and Markdown still escape on output)
    return replace(summary, **{f.name: inert(getattr(summary, f.name)) or UNKNOWN
                               for f in fields(summary) if isinstance(getattr(summary, f.name), str)})


def _cell_data(cell: Any) -> dict | None:
    data = cell.get("data") if isinstance(cell, dict) else getattr(cell, "data", None)
    return data if isinstance(data, dict) else None


def cell_is_synthetic(cell: Any, fallback_source: str = UNKNOWN) -> bool:
    data = _cell_data(cell) or {}
    source = data.get("source") or fallback_source
    return str(source).lower() == "synthetic"


def safe_name(text: str, max_len: int = 40) -> str:
    """A file-name part made only of ``[A-Za-z0-9._-]`` (never empty, never dots only)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:max_len].strip("-.")
    return cleaned or "unknown"
