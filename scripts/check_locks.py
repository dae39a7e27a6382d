#!/usr/bin/env python3
"""Check that every pin in the image stacks' lock files exists on the package
index for that stack's Python and platform, without downloading any package.

    python scripts/check_locks.py docker/locks/*.txt
    python scripts/check_locks.py --index-url https://mirror.example/simple docker/locks/cpu.txt

Each lock file names its target in header comments (``# python: 3.11``,
``# glibc: 2.36``, ``# arch: x86_64``). For every ``name==version`` line the
index must list a wheel whose tags fit that target (CPython tag and ABI,
manylinux level not above the image's glibc), or else an sdist (which pip
would build; reported). Files whose Requires-Python excludes the target do not
count. Yanked releases are reported.

It reads the index's PEP 691 JSON ("simple") API, which pip itself uses and
which mirrors serve too; ``--api json`` reads PyPI's older per-release JSON
API (https://pypi.org/pypi/<name>/<version>/json) instead. The CA bundle in
PIP_CERT / SSL_CERT_FILE / REQUESTS_CA_BUNDLE is honoured (TLS-inspecting
proxies). Exit status: 0 all pins resolve, 1 some do not, 2 the index could
not be read.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import ssl
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_INDEX = "https://pypi.org/simple"
PYPI_JSON = "https://pypi.org/pypi"

#: glibc version each legacy manylinux tag stands for (PEP 513, 571, 599).
LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


@dataclass
class Target:
    python: tuple[int, int]
    glibc: tuple[int, int]
    arch: str = "x86_64"

    @property
    def cp(self) -> str:
        return f"cp{self.python[0]}{self.python[1]}"


@dataclass
class Pin:
    name: str
    version: str
    line: int


@dataclass
class LockFile:
    path: str
    stack: str
    target: Target
    pins: list[Pin]


@dataclass
class DistFile:
    filename: str
    requires_python: str | None = None
    yanked: bool = False


@dataclass
class Verdict:
    pin: Pin
    ok: bool
    how: str  # "wheel", "sdist", or why not
    warnings: list[str] = field(default_factory=list)


class IndexError_(Exception):
    """The index could not be read (network, TLS, server error)."""


# -- parsing ------------------------------------------------------------------


def normalize(name: str) -> str:
    """PEP 503 name normalisation."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _version_pair(text: str) -> tuple[int, int]:
    parts = text.strip().split(".")
    return int(parts[0]), int(parts[1])


def parse_lock(text: str, path: str = "<lock>") -> LockFile:
    """A lock file: header comments for the target, then ``name==version`` lines."""
    header: dict[str, str] = {}
    pins: list[Pin] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            m = re.match(r"#\s*(stack|python|glibc|arch)\s*:\s*(\S+)\s*$", line)
            if m:
                header[m.group(1)] = m.group(2)
            continue
        line = line.split("#", 1)[0].split(";", 1)[0].strip()  # trailing comments, markers
        line = line.split(" --hash", 1)[0].strip()
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s,]+)$", line)
        if not m:
            raise ValueError(f"{path}:{number}: not an exact pin (name==version): {raw.strip()!r}")
        pins.append(Pin(normalize(m.group(1)), m.group(3), number))
    missing = [k for k in ("python", "glibc") if k not in header]
    if missing:
        raise ValueError(f"{path}: header lacks {', '.join('# ' + k + ': ...' for k in missing)}")
    target = Target(_version_pair(header["python"]), _version_pair(header["glibc"]), header.get("arch", "x86_64"))
    stack = header.get("stack") or Path(path).stem
    seen: dict[str, Pin] = {}
    for p in pins:
        if p.name in seen:
            raise ValueError(f"{path}:{p.line}: {p.name} is pinned twice (also line {seen[p.name].line})")
        seen[p.name] = p
    return LockFile(path, stack, target, pins)


# -- compatibility --------------------------------------------------------------


def wheel_tags(filename: str) -> tuple[list[str], list[str], list[str]] | None:
    """(python tags, abi tags, platform tags) of a wheel file name, or None."""
    if not filename.endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6):
        return None
    py, abi, plat = parts[-3], parts[-2], parts[-1]
    return py.split("."), abi.split("."), plat.split(".")


def platform_ok(tag: str, target: Target) -> bool:
    if tag == "any":
        return True
    if tag == f"linux_{target.arch}":
        return True
    for legacy, glibc in LEGACY_MANYLINUX.items():
        if tag == f"{legacy}_{target.arch}":
            return glibc <= target.glibc
    m = re.match(r"^manylinux_(\d+)_(\d+)_(.+)$", tag)
    if m and m.group(3) == target.arch:
        return (int(m.group(1)), int(m.group(2))) <= target.glibc
    return False


def python_abi_ok(py_tags: list[str], abi_tags: list[str], target: Target) -> bool:
    major, minor = target.python
    for py in py_tags:
        for abi in abi_tags:
            if py == target.cp and abi in (target.cp, target.cp + "m", "none", "abi3"):
                if abi == target.cp + "m" and target.python >= (3, 8):
                    continue  # the 'm' ABI suffix ended with 3.8
                if abi == target.cp and target.python < (3, 8):
                    continue  # 3.7 and older are cp37m
                return True
            m = re.match(r"^cp(\d)(\d+)$", py)
            if m and abi == "abi3" and int(m.group(1)) == major and int(m.group(2)) <= minor:
                return True
            m = re.match(r"^py(\d)(\d*)$", py)
            if m and abi == "none" and int(m.group(1)) == major and (not m.group(2) or int(m.group(2)) <= minor):
                return True
    return False


def wheel_fits(filename: str, target: Target) -> bool:
    tags = wheel_tags(filename)
    if tags is None:
        return False
    py, abi, plat = tags
    return python_abi_ok(py, abi, target) and any(platform_ok(p, target) for p in plat)


def is_sdist(filename: str) -> bool:
    return filename.endswith((".tar.gz", ".zip", ".tar.bz2"))


def requires_python_ok(spec: str | None, target: Target) -> bool:
    if not spec:
        return True
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
    except ImportError:  # without packaging, trust the tags
        return True
    try:
        return SpecifierSet(spec).contains(f"{target.python[0]}.{target.python[1]}.0", prereleases=True)
    except InvalidSpecifier:
        return True


def judge(pin: Pin, files: list[DistFile], target: Target) -> Verdict:
    mine = [f for f in files if _file_version(f.filename, pin.name) == pin.version]
    if not mine:
        return Verdict(pin, False, f"version {pin.version} is not on the index")
    usable = [f for f in mine if requires_python_ok(f.requires_python, target)]
    if not usable:
        return Verdict(pin, False, f"every file of {pin.version} requires Python {mine[0].requires_python}")
    warnings = []
    if all(f.yanked for f in usable):
        warnings.append(f"{pin.version} is yanked")
    if any(wheel_fits(f.filename, target) for f in usable):
        return Verdict(pin, True, "wheel", warnings)
    if any(is_sdist(f.filename) for f in usable):
        return Verdict(pin, True, "sdist", warnings + ["no fitting wheel: pip builds it from the sdist"])
    return Verdict(pin, False, f"no wheel for CPython {target.python[0]}.{target.python[1]} on manylinux (glibc ≤ "
                              f"{target.glibc[0]}.{target.glibc[1]}) {target.arch}, and no sdist")


def _file_version(filename: str, name: str) -> str | None:
    """The version in a distribution file name (wheel or sdist) of project ``name``."""
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        return parts[1] if len(parts) >= 5 else None
    for ext in (".tar.gz", ".zip", ".tar.bz2"):
        if filename.endswith(ext):
            stem = filename[: -len(ext)]
            # sdist names are "<name>-<version>", the name's separators vary
            m = re.match(r"^(.*?)-(\d[^-]*)$", stem)
            if m and normalize(m.group(1)) == name:
                return m.group(2)
    return None


# -- the index -----------------------------------------------------------------


def ssl_context() -> ssl.SSLContext:
    for var in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        path = os.environ.get(var)
        if path and os.path.isfile(path):
            return ssl.create_default_context(cafile=path)
    return ssl.create_default_context()


def _get(url: str, accept: str, timeout: float) -> bytes:
    req = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": "mpkit-check-locks"})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ssl_context()) as resp:
            return resp.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise FileNotFoundError(url) from None
        raise IndexError_(f"{url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise IndexError_(f"{url}: {getattr(exc, 'reason', exc)}") from None


def parse_simple_json(data: bytes) -> list[DistFile]:
    """Files of a project page in the PEP 691 JSON form."""
    doc = json.loads(data)
    return [DistFile(f["filename"], f.get("requires-python"), bool(f.get("yanked"))) for f in doc.get("files", [])]


def parse_release_json(data: bytes) -> list[DistFile]:
    """Files of one release from PyPI's JSON API (/pypi/<name>/<version>/json)."""
    doc = json.loads(data)
    return [DistFile(u["filename"], u.get("requires_python"), bool(u.get("yanked"))) for u in doc.get("urls", [])]


def fetch_files(pin: Pin, index_url: str, api: str, timeout: float) -> list[DistFile]:
    try:
        if api == "json":
            return parse_release_json(_get(f"{PYPI_JSON}/{pin.name}/{pin.version}/json", "application/json", timeout))
        return parse_simple_json(_get(f"{index_url.rstrip('/')}/{pin.name}/", "application/vnd.pypi.simple.v1+json", timeout))
    except FileNotFoundError:
        return []


# -- main ---------------------------------------------------------------------


def check(lock: LockFile, index_url: str = DEFAULT_INDEX, api: str = "simple", jobs: int = 8, timeout: float = 60.0,
          fetch=fetch_files) -> list[Verdict]:
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        files = list(pool.map(lambda p: fetch(p, index_url, api, timeout), lock.pins))
    return [judge(pin, fs, lock.target) for pin, fs in zip(lock.pins, files)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("locks", nargs="*", help="lock files (default: docker/locks/*.txt)")
    ap.add_argument("--index-url", default=os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX)
    ap.add_argument("--api", choices=("simple", "json"), default="simple")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args(argv)
    paths = args.locks or sorted(str(p) for p in (Path(__file__).resolve().parents[1] / "docker" / "locks").glob("*.txt"))
    status = 0
    for path in paths:
        try:
            lock = parse_lock(Path(path).read_text(), path)
        except (OSError, ValueError) as exc:
            print(f"check_locks: {exc}", file=sys.stderr)
            return 1
        t = lock.target
        try:
            verdicts = check(lock, args.index_url, args.api, args.jobs, args.timeout)
        except IndexError_ as exc:
            print(f"check_locks: cannot read the index ({exc}); check the network, proxy and CA bundle (PIP_CERT)", file=sys.stderr)
            return 2
        bad = [v for v in verdicts if not v.ok]
        sdists = sum(v.how == "sdist" for v in verdicts)
        print(f"{lock.stack}: CPython {t.python[0]}.{t.python[1]}, glibc {t.glibc[0]}.{t.glibc[1]}, {t.arch}: "
              f"{len(verdicts) - len(bad)}/{len(verdicts)} pins resolve" + (f" ({sdists} from sdist)" if sdists else ""))
        for v in verdicts:
            for w in v.warnings:
                print(f"  warning: {v.pin.name}=={v.pin.version}: {w}")
        for v in bad:
            print(f"  FAIL {v.pin.name}=={v.pin.version} ({path}:{v.pin.line}): {v.how}")
        if bad:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
