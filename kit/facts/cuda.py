"""CUDA facts: driver minimums per toolkit, compatibility rules, architectures.

Sources (check them again when a number matters):

- [RN3] CUDA Toolkit Release Notes, "CUDA Toolkit and Corresponding Driver
  Versions", Table 3 (minimum Linux x86_64 driver per toolkit release), and
  Table 2 (minimum driver for minor-version compatibility), at
  https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/
- [COMPAT] "CUDA Compatibility" guide, sections "Minor Version Compatibility"
  and "Forward Compatibility", https://docs.nvidia.com/deploy/cuda-compatibility/
- [ARCH] the CUDA release notes' supported-architecture lists (10.x: up to
  Turing; 11.0: Ampere sm_80, 11.1: sm_86; 11.8: Hopper sm_90; 12.8: Blackwell
  sm_100/sm_120; 13.0 removes Maxwell, Pascal and Volta).
- [TORCH] PyTorch release notes / wheel build matrix: cu128 and newer wheels
  are built for sm_70 and newer (Pascal needs older builds).

Only data and tiny pure helpers live here; the logic that uses them is in
kit/env/doctor.py.
"""

from __future__ import annotations

import re

#: Minimum Linux driver for each CUDA toolkit release [RN3, table 3].
#: Keys are "major.minor" toolkit versions, values driver versions as printed
#: by nvidia-smi.
MIN_DRIVER_FOR_CUDA: dict[str, str] = {
    "10.0": "410.48",
    "10.1": "418.39",
    "10.2": "440.33",
    "11.0": "450.51.05",
    "11.8": "520.61.05",
    "12.0": "525.60.13",
    "12.4": "550.54.14",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
}

#: Minor-version compatibility [COMPAT, RN3 table 2]: an application built
#: with any toolkit of this major version runs on a driver at least this new,
#: with features limited to what the driver knows (PTX JIT from a newer
#: toolkit fails with error 222). ``None``: no minor-version compatibility
#: (CUDA 10.x needs the full minimum of its exact release).
MINOR_COMPAT_MIN_DRIVER: dict[int, str | None] = {
    10: None,
    11: "450.80.02",
    12: "525.60.13",
    13: "580",
}

#: Highest compute capability each CUDA toolkit generation can target [ARCH],
#: as (major, minor). Used for "GPU sm_86 not supported by CUDA 10.1".
MAX_COMPUTE_CAPABILITY: dict[str, tuple[int, int]] = {
    "10.0": (7, 5),
    "10.1": (7, 5),
    "10.2": (7, 5),
    "11.0": (8, 0),
    "11.1": (8, 6),
    "11.8": (9, 0),
    "12.8": (12, 0),
    "13.0": (12, 0),
}

#: PyTorch cu128+ wheels target sm_70 and newer [TORCH].
TORCH_CU128_MIN_COMPUTE_CAPABILITY: tuple[int, int] = (7, 0)

#: Architecture names by compute-capability major (minor where it matters) [ARCH].
ARCHITECTURES: dict[tuple[int, int], str] = {
    (3, 0): "Kepler", (3, 5): "Kepler", (3, 7): "Kepler",
    (5, 0): "Maxwell", (5, 2): "Maxwell", (5, 3): "Maxwell",
    (6, 0): "Pascal", (6, 1): "Pascal", (6, 2): "Pascal",
    (7, 0): "Volta", (7, 2): "Volta", (7, 5): "Turing",
    (8, 0): "Ampere", (8, 6): "Ampere", (8, 7): "Ampere", (8, 9): "Ada Lovelace",
    (9, 0): "Hopper",
    (10, 0): "Blackwell", (10, 3): "Blackwell", (12, 0): "Blackwell", (12, 1): "Blackwell",
}


def architecture(cc: tuple[int, int]) -> str:
    """'Ampere' for (8, 6); 'unknown architecture' for a capability not listed."""
    return ARCHITECTURES.get(tuple(cc), "unknown architecture")  # type: ignore[arg-type]


def sm(cc: tuple[int, int]) -> str:
    """'sm_86' for (8, 6)."""
    return f"sm_{cc[0]}{cc[1]}"


def parse_version(text: str) -> tuple[int, ...]:
    """'525.60.13' -> (525, 60, 13). Non-numeric parts end the version.

    Driver versions compare as integer tuples: (525, 60, 13) < (570, 26).
    """
    parts: list[int] = []
    for piece in str(text).strip().split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
        if m.end() != len(piece):
            break
    if not parts:
        raise ValueError(f"not a version: {text!r}")
    return tuple(parts)


def version_at_least(have: str, need: str) -> bool:
    """True when version ``have`` >= ``need`` (missing trailing parts count as 0)."""
    a, b = parse_version(have), parse_version(need)
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)) >= b + (0,) * (width - len(b))


def cuda_version_from_nvml(value: int) -> str:
    """NVML reports the driver's CUDA version as 1000*major + 10*minor: 12080 -> '12.8'."""
    return f"{value // 1000}.{(value % 1000) // 10}"


#: How cuDNN writes its version as one integer (what torch.backends.cudnn.version() returns),
#: from cuDNN's cudnn_version.h: from cuDNN 9 on ``CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 +
#: CUDNN_PATCHLEVEL`` (9.1.0 -> 90100, 9.24.0 -> 92400); up to cuDNN 8 ``CUDNN_MAJOR * 1000 +
#: CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL`` (8.9.7 -> 8907). Codes from this one up are cuDNN 9+.
CUDNN_V9_FIRST_CODE = 90000
