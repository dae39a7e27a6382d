"""`kit doctor`: which of the kit's image stacks can run on this host, and why not.

The doctor reads two probes (NVML: driver and GPUs; Docker: engine and GPU
runtime) and judges every stack in kit/facts/stacks.py against them:

    ok        the stack runs with full support
    limited   it runs, with a stated limit (CUDA minor-version compatibility,
              little free GPU memory, a fact NVML could not report)
    cannot    it cannot run here; the reason and the fix are given

Rules, in the order they are checked for a GPU stack (facts in kit/facts/cuda.py):

1. A GPU must be visible (driver loaded, ``--gpu N`` exists).
2. Its compute capability must be inside the stack's range (cuda10: sm_35 ..
   sm_75; cuda12: sm_70 .. sm_120).
3. The driver must be at least the stack's minimum for its CUDA release, or,
   for CUDA 11+ only, the minor-version-compatibility minimum ("limited").
4. The GPU needs MIN_GPU_MEMORY_BYTES in total ("cannot") and free ("limited").
5. When the Docker engine is reachable, it must be able to give containers a
   GPU (NVIDIA runtime, CDI device or the toolkit's hook), else ``docker run
   --gpus`` fails with ``could not select device driver "" with capabilities:
   [[gpu]]``. An unreachable engine is reported as a warning and does not
   change the verdicts: ``kit run`` works without Docker.

The recommended stack is the first runnable one in: cuda12 (ok), cuda10 (ok),
cuda12 (limited), cuda10 (limited), cpu. The exit status is 0 when the
requested stack (or, for ``auto``, the recommended one) can run.

This module holds the checks; what they fill (Verdict, Problem, Report) is
kit.env.doctor_report, and the tables `kit doctor` prints are kit.env.doctor_view.
"""

from __future__ import annotations

from typing import Any

from kit.env import docker_probe
from kit.env import nvml as nvml_probe
from kit.env.doctor_report import Problem, Report, Verdict, gib, gpu_label
from kit.env.probe import is_unknown, known
from kit.errors import DockerError, UsageError
from kit.facts import cuda as cuda_facts
from kit.facts.stacks import MIN_GPU_MEMORY_BYTES, PREFERENCE, STACK_NAMES, STACKS, Stack

#: What `docker run --gpus` prints when the NVIDIA Container Toolkit is missing.
NO_TOOLKIT_ERROR = 'could not select device driver "" with capabilities: [[gpu]]'
TOOLKIT_FIX = "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker"
TOOLKIT_REMEDY = (
    "Install the NVIDIA Container Toolkit (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/"
    f"latest/install-guide.html), then register it with Docker: {TOOLKIT_FIX}"
)


# -- the checks -----------------------------------------------------------


def diagnose(nvml: Any = None, docker: Any = None, stack: str | None = None, gpu: int | None = None,
             bench: Any = None) -> Report:
    """Probe the host (or use the given probes) and judge every stack.

    ``nvml``: a probe dict from kit.env.nvml.probe, or an NVML module (a fake in
    tests), or None for the real pynvml. ``docker``: a probe dict from
    kit.env.docker_probe.probe, or a docker client, or None for the real engine.
    ``stack``: "auto" (default), "cuda10", "cuda12" or "cpu". ``gpu``: the GPU
    index to judge (default 0). ``bench``: the native benchmark stack, `kit run`'s
    (a probe dict from kit.env.bench_stack.probe, or True to probe this Python);
    None: not checked (`kit launch` runs the image's own).
    """
    requested = stack or "auto"
    if requested != "auto" and requested not in STACKS:
        raise UsageError(f"unknown stack {requested!r}; choose auto, {', '.join(STACK_NAMES)}")
    if gpu is not None and gpu < 0:
        raise UsageError("--gpu must be 0 or more")
    host = nvml if isinstance(nvml, dict) else nvml_probe.probe(nvml)
    engine = docker if isinstance(docker, dict) else docker_probe.probe(docker)

    problems = _host_problems(host, engine)
    gpus = host.get("gpus") or []
    index = 0 if gpu is None else gpu
    chosen = next((g for g in gpus if g.get("index") == index), None)

    verdicts: dict[str, Verdict] = {}
    for name, spec in STACKS.items():
        if spec.uses_gpu:
            verdicts[name] = _judge_gpu_stack(spec, host, engine, chosen, index)
        else:
            verdicts[name] = _judge_cpu_stack(spec, chosen)
    _point_past_old_drivers(verdicts)
    if gpus and chosen is None:
        problems.append(Problem("error", f"GPU {index} not found: this host has {len(gpus)} GPU(s), numbered 0 to {len(gpus) - 1}.",
                                "Pick one with --gpu N (nvidia-smi lists them)."))
    return Report(requested, index if gpus else None, host, engine, verdicts, recommend(verdicts), problems,
                  bench=None if bench is None else _bench_section(bench))


def _bench_section(bench: Any) -> dict:
    """The report's native benchmark stack: this Python, each package, what is wrong."""
    import sys

    from kit.env import bench_stack

    packages = bench if isinstance(bench, dict) else bench_stack.probe()
    return {"python": sys.executable, "packages": packages,
            "findings": [f.to_dict() for f in bench_stack.findings(packages)]}


def _point_past_old_drivers(verdicts: dict[str, Verdict]) -> None:
    """A GPU stack the driver is too old for also names the kit's stacks that this driver and
    GPU do run (the upgrade stays the first remedy): e.g. cuda12 on a Turing GPU with 418 -> cuda10."""
    runnable = [n for n in PREFERENCE if n in verdicts and STACKS[n].uses_gpu and verdicts[n].runnable]
    for name, v in verdicts.items():
        if v.status != "cannot" or not any(r.startswith("driver too old") for r in v.reasons):
            continue
        others = [n for n in runnable if n != name and STACKS[n].cuda != STACKS[name].cuda]
        if others:
            v.remedies.append(f"Or keep this driver and use --stack {others[0]} (CUDA {STACKS[others[0]].cuda}), "
                              f"which it runs {'fully' if verdicts[others[0]].status == 'ok' else 'with limits'} on this GPU.")


def recommend(verdicts: dict[str, Verdict]) -> str:
    """First of: a GPU stack that is ok (cuda12, then cuda10), one that is limited, then cpu."""
    gpu_stacks = [n for n in PREFERENCE if STACKS[n].uses_gpu and n in verdicts]
    for wanted in ("ok", "limited"):
        for name in gpu_stacks:
            if verdicts[name].status == wanted:
                return name
    return "cpu"


def check_stack(
    stack: str,
    gpu: int | None = None,
    *,
    nvml: Any = None,
    docker: Any = None,
    require_docker: bool = False,
) -> Verdict:
    """For `kit launch`: judge ``stack`` ("auto" picks the recommendation) before
    building or running anything. Returns the verdict (``verdict.stack`` is the
    resolved stack name); raises EnvironmentCheckError with the remedy when it
    cannot run, and DockerError when ``require_docker`` and the engine is not
    reachable.
    """
    report = diagnose(nvml=nvml, docker=docker, stack=stack, gpu=gpu)
    report.raise_if_not_ok()
    if require_docker and not report.docker.get("reachable"):
        message, remedy = docker_problem(report.docker)
        raise DockerError(message, remedy=remedy)
    return report.verdicts[report.selected]


def _judge_cpu_stack(spec: Stack, gpu: dict | None) -> Verdict:
    v = Verdict(spec.name, "ok")
    v.reasons.append("runs anywhere on the CPU" + ("; it does not use the GPU (a check of the kit, not a GPU performance result)" if gpu else ""))
    return v


def _judge_gpu_stack(spec: Stack, host: dict, engine: dict, gpu: dict | None, index: int) -> Verdict:
    v = Verdict(spec.name, "ok")
    assert spec.cuda is not None and spec.min_driver is not None
    if not host.get("available"):
        v._worsen("cannot", f"no NVIDIA driver ({host.get('reason', 'NVML unavailable')}): only the cpu stack can run",
                  no_driver_remedy(host))
        return v
    if not host.get("gpus"):
        v._worsen("cannot", "the NVIDIA driver is loaded but no GPU is visible: only the cpu stack can run",
                  "Check nvidia-smi; a GPU passed to a VM or container must be visible to NVML.")
        return v
    if gpu is None:
        v._worsen("cannot", f"GPU {index} not found (this host has {len(host['gpus'])} GPU(s))", "Pick one with --gpu N.")
        return v

    label = gpu_label(gpu)
    _judge_architecture(v, spec, gpu, label)
    _judge_driver(v, spec, host)
    _judge_memory(v, gpu, label)

    # 5. Containers.
    if engine.get("reachable") and engine.get("gpu_support") == "none":
        v._worsen(
            "cannot",
            "Docker cannot give containers a GPU: no 'nvidia' runtime, no CDI GPU device and no nvidia-container-runtime-hook found; "
            f"`docker run --gpus` fails with: {NO_TOOLKIT_ERROR}",
            TOOLKIT_REMEDY,
        )
    return v


def _judge_architecture(v: Verdict, spec: Stack, gpu: dict, label: str) -> None:
    """2. Architecture: the GPU's compute capability inside the range the stack's CUDA and PyTorch build run."""
    cc = nvml_probe.compute_capability(gpu)
    lo, hi = spec.min_compute_capability, spec.max_compute_capability
    assert lo is not None and hi is not None
    if cc is None:
        raw = gpu.get("compute_capability")
        why = raw["reason"] if is_unknown(raw) else "not reported"
        v._worsen("limited", f"compute capability of {label} unknown ({why}): cannot check it is inside {cuda_facts.sm(lo)} .. {cuda_facts.sm(hi)}")
    elif cc > hi:
        v._worsen(
            "cannot",
            f"{label} not supported by CUDA {spec.cuda}: the {spec.name} stack runs {cuda_facts.sm(lo)} .. {cuda_facts.sm(hi)} "
            f"({cuda_facts.architecture(lo)} to {cuda_facts.architecture(hi)})",
            f"Use --stack cuda12 on this GPU; the {spec.name} stack needs a {cuda_facts.architecture(hi)} or older GPU." if spec.name == "cuda10"
            else "This GPU is newer than any stack the kit ships; use --stack cpu, or a kit release with a newer stack.",
        )
    elif cc < lo:
        v._worsen(
            "cannot",
            f"{label} is too old for the {spec.name} stack: its PyTorch {spec.torch} build runs {cuda_facts.sm(lo)} .. {cuda_facts.sm(hi)}",
            "Use --stack cuda10 on this GPU (Kepler sm_35 to Turing sm_75)." if spec.name == "cuda12" and cc >= STACKS["cuda10"].min_compute_capability  # type: ignore[operator]
            else "This GPU is older than any stack the kit ships supports; use --stack cpu.",
        )


def _judge_driver(v: Verdict, spec: Stack, host: dict) -> None:
    """3. Driver: new enough for the stack's CUDA, fully or under minor-version compatibility."""
    driver = host.get("driver_version")
    driver_cuda = known(host.get("cuda_driver_version"), "unknown")
    if is_unknown(driver) or not isinstance(driver, str):
        v._worsen("limited", f"driver version unknown ({driver.get('reason') if isinstance(driver, dict) else driver}): cannot check it is ≥ {spec.min_driver}")
    elif cuda_facts.version_at_least(driver, spec.min_driver):
        pass
    elif spec.min_driver_compat and cuda_facts.version_at_least(driver, spec.min_driver_compat):
        v._worsen(
            "limited",
            f"driver {driver} supports CUDA {driver_cuda}; the image's CUDA {spec.cuda} runs under minor-version compatibility "
            f"(needs ≥ {spec.min_driver_compat}), with features limited to what the driver knows "
            f"(PTX JIT from the newer toolkit fails with CUDA error 222)",
            f"Upgrade the NVIDIA driver to {spec.min_driver} or newer for full CUDA {spec.cuda} support.",
        )
    else:
        need = f"≥ {spec.min_driver}" + (f" (or ≥ {spec.min_driver_compat} under minor-version compatibility, features limited)" if spec.min_driver_compat else "")
        why = f"driver too old for CUDA {spec.cuda}: need {need}, have {driver}"
        if not spec.min_driver_compat:
            why += f" (CUDA {spec.cuda.split('.')[0]}.x has no minor-version compatibility)"
        v._worsen(
            "cannot",
            why,
            f"Upgrade the NVIDIA driver to {spec.min_driver} or newer (CUDA release notes, table 3). Inside Docker a too-old driver "
            f"shows as 'unsatisfied condition: cuda>={spec.cuda}', and in PyTorch as CUDA error 35 (cudaErrorInsufficientDriver).",
        )


def _judge_memory(v: Verdict, gpu: dict, label: str) -> None:
    """4. Memory: the GPU has, and has free, the kit's floor of GPU memory."""
    total = gpu.get("memory_total_bytes")
    used = gpu.get("memory_used_bytes")
    if isinstance(total, int):
        if total < MIN_GPU_MEMORY_BYTES:
            v._worsen("cannot", f"not enough GPU memory: {label} has {gib(total)}, the kit needs at least {gib(MIN_GPU_MEMORY_BYTES)}",
                      "Use a GPU with more memory, or --stack cpu.")
        elif isinstance(used, int) and total - used < MIN_GPU_MEMORY_BYTES:
            pids = [str(p["pid"]) for p in gpu.get("processes") or [] if isinstance(p, dict)] if isinstance(gpu.get("processes"), list) else []
            v._worsen("limited", f"not enough free GPU memory: {gib(total - used)} of {gib(total)} free on {label}"
                      + (f" (in use by PID {', '.join(pids)})" if pids else ""),
                      "Stop the other processes on the GPU, or pick another one with --gpu N.")
    else:
        v._worsen("limited", f"GPU memory of {label} unknown ({total.get('reason') if isinstance(total, dict) else total})")


# -- host-level findings ----------------------------------------------------


def no_driver_remedy(host: dict) -> str:
    state = host.get("state")
    if state == "driver_mismatch":
        return "The NVIDIA kernel module and driver library versions differ (usually after a driver upgrade): reboot, or reload the nvidia kernel modules."
    if state == "no_permission":
        return "NVML refused access: run as a user who can open /dev/nvidia* (or in a container started with --gpus)."
    if state == "no_nvml_package":
        return "Install the host dependencies: pip install nvidia-ml-py (it comes with the kit)."
    return (
        f"Install the NVIDIA driver (≥ {STACKS['cuda12'].min_driver} for the cuda12 stack, ≥ {STACKS['cuda10'].min_driver} for cuda10) and reboot; "
        "on a machine without an NVIDIA GPU use --stack cpu."
    )


def docker_problem(engine: dict) -> tuple[str, str]:
    """(message, remedy) for an unreachable Docker engine."""
    state = engine.get("state")
    host = engine.get("host", docker_probe.DEFAULT_HOST)
    reason = engine.get("reason", "")
    if state == "permission_denied":
        return (f"no permission on the Docker socket ({host}): {reason}",
                "Add your user to the docker group (sudo usermod -aG docker $USER, then log out and back in), or run as root.")
    if state == "no_sdk":
        return ("the docker Python package is not installed", "pip install docker (it comes with the kit: pip install -e .)")
    if state == "not_running":
        return (f"the Docker engine is not reachable at {host}: {reason}",
                "Start Docker (sudo systemctl start docker), or set DOCKER_HOST. `kit launch` needs it; `kit run` works without it.")
    return (f"the Docker engine at {host} answered with an error: {reason}",
            "Check `docker info`; `kit launch` needs a working engine, `kit run` works without it.")


def _host_problems(host: dict, engine: dict) -> list[Problem]:
    problems: list[Problem] = []
    if not host.get("available"):
        what = "No NVIDIA driver found" if host.get("state") in ("no_driver", "no_nvml_package") else "NVML is not usable"
        problems.append(Problem("info" if host.get("state") == "no_driver" else "warning",
                                f"{what} ({host.get('reason')}): only the cpu stack can run.", no_driver_remedy(host)))
    else:
        for g in host.get("gpus") or []:
            procs = g.get("processes")
            if isinstance(procs, list) and procs:
                desc = ", ".join(f"PID {p['pid']}" + (f" ({p['name']})" if isinstance(p.get("name"), str) else "") for p in procs)
                problems.append(Problem("warning", f"GPU {g['index']} is in use by {desc}: measurements on it will be disturbed.",
                                        "Stop those processes, or choose an idle GPU with --gpu N."))
    if not engine.get("reachable"):
        message, remedy = docker_problem(engine)
        problems.append(Problem("warning", message[0].upper() + message[1:] + ".", remedy))
    elif engine.get("gpu_support") == "none" and host.get("gpus"):
        problems.append(Problem("error", f"The NVIDIA Container Toolkit is missing from Docker: GPU containers fail with: {NO_TOOLKIT_ERROR}", TOOLKIT_REMEDY))
    return problems
