"""The image stacks the kit ships: what is inside each, and what it needs from the host.

Read by ``kit doctor`` (kit/env/doctor.py: can this host run the stack?) and by
the container build (kit/containers: what to install). Versions are pins, the
driver minimums and architecture ranges come from kit/facts/cuda.py, whose
sources are listed there.

- ``cuda10`` is faithful to the January 2019 article (PyTorch 1.x, CUDA 10,
  fastai v1, Apex with ``apex.amp`` and ``FP16_Optimizer``). PyPI's torch 1.4.0
  Linux wheel bundles the CUDA 10.1 runtime and cuDNN 7.6, so the image needs no
  ``nvidia/cuda`` base (NVIDIA deleted the CUDA 10 tags from Docker Hub in 2023).
- ``cuda12`` is today's stack (torch 2.9 cu128, fastai 2.8) on a plain Ubuntu
  24.04: PyPI's torch wheel and its ``nvidia-*-cu12`` wheels carry the CUDA 12.8
  runtime, cuDNN 9 and NCCL, so no ``nvidia/cuda`` base is needed. Its Apex is
  release 25.01, built python-only: the last release line with ``apex.amp`` and
  ``apex.fp16_utils``, so the ``apex-o1``/``apex-o2`` cells run on today's GPUs.
- ``cuda12-fused`` is the opt-in variant with Apex 25.07's fused CUDA kernels,
  compiled by nvcc on ``nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04`` (built only
  where that base can be pulled or loaded; it has no ``apex.amp``). Never chosen by
  ``--stack auto``.
- ``cpu`` runs anywhere, for CI and for checking the kit itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.facts import cuda as cuda_facts


@dataclass(frozen=True)
class Stack:
    name: str
    description: str
    #: CUDA toolkit/runtime version inside the image ("major.minor"); None for cpu.
    cuda: str | None
    cudnn: str | None
    python: str
    torch: str
    torchvision: str
    fastai: str
    #: Apex git ref (tag or commit) and how it is built; None when Apex is absent.
    apex_ref: str | None
    apex_build: str | None
    base_image: str
    #: Minimum driver for full support; None for cpu.
    min_driver: str | None
    #: Minimum driver under CUDA minor-version compatibility (features limited);
    #: None when the stack's CUDA has no minor-version compatibility.
    min_driver_compat: str | None
    #: Compute capabilities the stack's torch build runs on, inclusive; None for cpu.
    min_compute_capability: tuple[int, int] | None
    max_compute_capability: tuple[int, int] | None
    #: pip-level extras the containers engineer may need.
    notes: tuple[str, ...] = ()
    #: The lock file's name under docker/locks/ (without .txt); None = the stack's name.
    lock: str | None = None
    #: How to make the base locally where no registry is reachable:
    #: (image name, debootstrap suite) for scripts/make_base_image.sh; None when it cannot.
    local_base: tuple[str, str] | None = None

    @property
    def lock_name(self) -> str:
        return self.lock or self.name

    @property
    def uses_gpu(self) -> bool:
        return self.cuda is not None


# Apex commit for cuda10: a python-only build from early 2019 that still has
# apex.amp and apex.fp16_utils.FP16_Optimizer (deprecated in Oct 2022, deleted in May 2025: release
# 25.07 of github.com/NVIDIA/apex is the first tag without them). 241dd6c4 is the Dec 2018 commit whose
# examples/word_language_model the kit's "apex-2018" LSTM preset follows.
_APEX_2019_REF = "241dd6c4"

#: The full commit behind each Apex ref a stack pins, so that a local source
#: (``--apex-src``: a `git archive` snapshot records its commit) can be checked
#: against the pin. Sources: github.com/NVIDIA/apex commit 241dd6c4fce8667b15aaf7196b39d801b084f9ae
#: (2018-12-21) and the release tags 25.01 and 25.07 (git ls-remote of that repository).
APEX_REF_COMMITS: dict[str, str] = {
    "241dd6c4": "241dd6c4fce8667b15aaf7196b39d801b084f9ae",
    "25.01": "e552ad997605dd883825106776eba230a6820345",
    "25.07": "e74a67bba3ee679f778670e17edc21639008ae0a",
}

_CUDA12_COMMON = dict(
    cuda="12.8",
    cudnn="9",
    python="3.12",
    torch="2.9.1",
    torchvision="0.24.1",
    fastai="2.8.12",
    min_driver=cuda_facts.MIN_DRIVER_FOR_CUDA["12.8"],
    min_driver_compat=cuda_facts.MINOR_COMPAT_MIN_DRIVER[12],
    min_compute_capability=cuda_facts.TORCH_CU128_MIN_COMPUTE_CAPABILITY,
    max_compute_capability=cuda_facts.MAX_COMPUTE_CAPABILITY["12.8"],
    lock="cuda12",
)

STACKS: dict[str, Stack] = {
    "cuda10": Stack(
        name="cuda10",
        description="Faithful to the 2019 article: PyTorch 1.4 (CUDA 10.1, cuDNN 7.6), fastai v1, Apex with amp and FP16_Optimizer",
        cuda="10.1",
        cudnn="7.6",
        python="3.7",
        torch="1.4.0",
        torchvision="0.5.0",
        fastai="1.0.61",
        apex_ref=_APEX_2019_REF,
        apex_build="python-only (no CUDA extensions): apex.amp, apex.fp16_utils.FP16_Optimizer",
        base_image="ubuntu:18.04",
        local_base=("kit-base/ubuntu:18.04", "bionic"),
        # The PyPI torch 1.4.0 wheel is CUDA 10.1; 10.x has no minor-version compatibility.
        min_driver=cuda_facts.MIN_DRIVER_FOR_CUDA["10.1"],
        min_driver_compat=cuda_facts.MINOR_COMPAT_MIN_DRIVER[10],
        # torch 1.4.0 cu101 wheels ship kernels for Kepler sm_35 .. Turing sm_75;
        # CUDA 10 cannot target Ampere or newer.
        min_compute_capability=(3, 5),
        max_compute_capability=cuda_facts.MAX_COMPUTE_CAPABILITY["10.1"],
        notes=("torch 1.4.0's PyPI wheel bundles the CUDA 10.1 runtime and cuDNN 7.6",),
    ),
    "cuda12": Stack(
        name="cuda12",
        description="Today's stack: PyTorch 2.9 (CUDA 12.8, cuDNN 9 from the wheels), fastai 2.8, Apex 25.01 python-only (apex.amp, apex.fp16_utils)",
        apex_ref="25.01",
        apex_build="python-only (no CUDA extensions): apex.amp, apex.fp16_utils.FP16_Optimizer",
        base_image="ubuntu:24.04",
        local_base=("kit-base/ubuntu:24.04", "noble"),
        notes=("torch 2.9.1's PyPI wheel and its nvidia-*-cu12 wheels bundle the CUDA 12.8 runtime, cuDNN 9.10 and NCCL",),
        **_CUDA12_COMMON,  # type: ignore[arg-type]
    ),
    "cuda12-fused": Stack(
        name="cuda12-fused",
        description="Opt-in variant of cuda12: Apex 25.07 with its fused CUDA kernels, compiled by nvcc on NVIDIA's CUDA devel image (no apex.amp)",
        apex_ref="25.07",
        apex_build="from source with CUDA extensions (--cpp_ext --cuda_ext); apex.amp was removed in 25.07",
        base_image="nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04",
        notes=("the base only supplies nvcc for Apex's extensions; torch still brings its own CUDA runtime and cuDNN",),
        **_CUDA12_COMMON,  # type: ignore[arg-type]
    ),
    "cpu": Stack(
        name="cpu",
        description="No GPU: PyTorch on the CPU, fastai 2.8, no Apex (checks the kit itself; not a performance result)",
        cuda=None,
        cudnn=None,
        python="3.11",
        torch="2.14.1",
        torchvision="0.29.1",
        fastai="2.8.12",
        apex_ref=None,
        apex_build=None,
        base_image="debian:bookworm",
        local_base=("kit-base/debian:bookworm", "bookworm"),
        min_driver=None,
        min_driver_compat=None,
        min_compute_capability=None,
        max_compute_capability=None,
    ),
}

STACK_NAMES: tuple[str, ...] = tuple(STACKS)


@dataclass(frozen=True)
class BuildMeasurement:
    """One measured first build of a stack's image (an empty layer cache): what `kit image
    build` and `kit launch` say before a first build ("about N GB to download")."""

    #: what pip downloaded for the lock (the sum of its "Downloading ... (size)" lines;
    #: the OS packages from the distribution's mirror come on top)
    download_bytes: int
    #: the whole `kit image build`, OS packages to the last label
    build_seconds: float
    #: `docker image inspect -f {{.Size}}` of the result
    image_bytes: int
    #: where, in a few words (what the build says)
    where: str
    #: where and how it was measured, in full
    source: str


#: Measured first builds, by stack. The download is the lock's (both cuda12 variants
#: share it; cuda12-fused adds NVIDIA's devel base, several GB more, and the nvcc build).
FIRST_BUILDS: dict[str, BuildMeasurement] = {
    "cuda12": BuildMeasurement(
        # 95 wheels; torch 2.9.1 (899.7 MB), nvidia-cudnn-cu12 and nvidia-cublas-cu12 are half of it
        download_bytes=4_241_641_400,
        build_seconds=510,
        image_bytes=8_558_847_678,
        where="on a 2-core CI machine shared with other jobs, 2026-12-01",
        source="scripts/ci_containers.sh: kit image build --stack cuda12 on a local Ubuntu 24.04 with Apex 25.01, "
        "no cached layers, wheels from PyPI, a 2-core CI machine shared with other jobs, 2026-12-01: "
        "OS packages 68 s, the pinned wheels 384 s (download, install, layer), Apex and the kit 58 s",
    ),
}

@dataclass(frozen=True)
class BuildDiskPeak:
    """How much disk a first build of a stack's image took at its peak where the engine keeps
    its data: pip's downloads and the installed files in the build container, then the same
    files again as the committed layer (Docker's classic builder copies the container's
    changes into the new layer before it drops the container)."""

    peak_bytes: int
    image_bytes: int
    source: str


#: Measured by scripts/ci_containers.sh's stacks one at a time, df sampled every 5 s beside
#: it: the free space before the build less the least seen during it.
BUILD_DISK_PEAKS: dict[str, BuildDiskPeak] = {
    stack: BuildDiskPeak(
        peak_bytes=peak_mib * 2**20,
        image_bytes=image_bytes,
        source=f"scripts/ci_containers.sh on a 2-core machine of CI's kind, 2026-12-01, no cached layers, "
        f"`df -B1M` of /var/lib/docker every 5 s: {peak_mib:,} MiB less free at the least than before the "
        f"{stack} build; the image size as `docker images` rounds it",
    )
    for stack, peak_mib, image_bytes in (
        ("cpu", 12_295, 6_660_000_000),  # torch's CUDA wheels from the local mirror
        ("cuda10", 3_960, 2_420_000_000),
        ("cuda12", 15_001, 8_600_000_000),  # the pinned wheels from PyPI, Apex 25.01
    )
}

#: Preference when several stacks can run, best first: a fully supported
#: modern stack, then the faithful 2019 stack, then the modern stack under
#: minor-version compatibility, then the CPU. (cuda12-fused is opt-in: never
#: picked by --stack auto.)
PREFERENCE: tuple[str, ...] = ("cuda12", "cuda10", "cpu")

#: The kit's own floor for GPU memory (a policy, not an outside fact and not a
#: measurement): below this the default batch sizes of the larger ResNets are
#: not expected to fit; smaller GPUs can still run with --batch-size.
MIN_GPU_MEMORY_BYTES = 4 * 1024**3
