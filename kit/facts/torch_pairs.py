"""Which torchvision goes with which torch, and the pair the kit installs and tests.

Each torchvision release is built against one torch release line: its C++ operators
(``torchvision::nms`` and the rest) are compiled against that torch. With another torch,
``import torchvision`` fails at once (``RuntimeError: operator torchvision::nms does not
exist``), so the CIFAR suite, which builds torchvision's ResNets, cannot run. Read by
``kit doctor`` and ``kit run`` (kit/env/bench_stack.py) to name the pair that fixes it.
"""

from __future__ import annotations

from kit.facts.stacks import STACKS

#: torch release line -> the torchvision release line built for it. Source: PyTorch's
#: "Domain Version Compatibility Matrix" (github.com/pytorch/pytorch/wiki/PyTorch-Versions)
#: and torchvision's README ("Installation"), 1.4 to 2.9; 2.14 -> 0.29 from the pair the
#: kit pins and tests (requirements-test.txt and docker/locks/cpu.txt: 2.14.1 / 0.29.1).
TORCHVISION_LINE: dict[str, str] = {
    "1.4": "0.5", "1.5": "0.6", "1.6": "0.7", "1.7": "0.8", "1.8": "0.9", "1.9": "0.10",
    "1.10": "0.11", "1.11": "0.12", "1.12": "0.13", "1.13": "0.14",
    "2.0": "0.15", "2.1": "0.16", "2.2": "0.17", "2.3": "0.18", "2.4": "0.19", "2.5": "0.20",
    "2.6": "0.21", "2.7": "0.22", "2.8": "0.23", "2.9": "0.24",
    "2.14": "0.29",
}

#: torch version -> torchvision version, exactly as the kit's images pin them together
#: (docker/locks/<stack>.txt, through kit/facts/stacks.py; tests/test_launch_build.py checks
#: the locks agree): 1.4.0 / 0.5.0, 2.9.1 / 0.24.1, 2.14.1 / 0.29.1.
PINNED_PAIRS: dict[str, str] = {s.torch: s.torchvision for s in STACKS.values()}

#: the stack whose pins a native install is told to use where nothing closer is known: the
#: cpu image's, which are also requirements-test.txt's (what `make test` installs)
TESTED_STACK = STACKS["cpu"]


def release_line(version: str) -> str | None:
    """'2.14' of '2.14.1+cpu' (major.minor); None when the text is no version."""
    parts = version.split("+", 1)[0].split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return f"{int(parts[0])}.{int(parts[1])}"


def torchvision_for(torch_version: str) -> str | None:
    """The pip requirement of the torchvision built for ``torch_version``: the exact pin where
    the kit pins that torch (``torchvision==0.29.1``), else its release line
    (``torchvision==0.24.*``); None for a torch line not in :data:`TORCHVISION_LINE`."""
    exact = PINNED_PAIRS.get(torch_version.split("+", 1)[0])
    if exact:
        return f"torchvision=={exact}"
    line = TORCHVISION_LINE.get(release_line(torch_version) or "")
    return f"torchvision=={line}.*" if line else None


def pair_agrees(torch_version: str, torchvision_version: str) -> bool | None:
    """Whether the torchvision is of the line built for the torch; None when the torch's line
    is not known here (nothing is claimed)."""
    want = TORCHVISION_LINE.get(release_line(torch_version) or "")
    if want is None:
        return None
    return release_line(torchvision_version) == want


def tested_pair() -> str:
    """``torch==2.14.1 torchvision==0.29.1``: the pair the kit's tests run, for pip."""
    return f"torch=={TESTED_STACK.torch} torchvision=={TESTED_STACK.torchvision}"
