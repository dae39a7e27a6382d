"""`kit doctor`'s human view (rich tables on the console) of a kit.env.doctor report."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from kit.env.doctor_report import Problem, Report, gib
from kit.env.probe import is_unknown, known
from kit.facts.stacks import STACKS


def _show(value: Any, unit: str = "") -> str:
    if is_unknown(value):
        return f"unknown ({value['reason']})"
    return f"{value}{unit}"


def bench_line(bench: dict) -> str:
    """``Benchmark stack (kit run, /usr/bin/python3): torch 2.14.1, torchvision 0.30.0 (does not import), fastai 2.8.12``"""
    parts = []
    for name, found in bench["packages"].items():
        version = found.get("version") or found.get("installed")
        if found.get("imports") is False:
            state = "not installed" if found.get("installed") == "not installed" else f"{version} (does not import)"
        else:
            state = str(version) + (" (import not tried)" if found.get("imports") is None else "")
        parts.append(f"{name} {state}")
    return f"Benchmark stack (kit run, {bench['python']}): " + ", ".join(parts)


def render(report: Report, console: Any) -> None:
    """The default, human view: host, GPUs, Docker, a verdict per stack, problems."""
    from rich.table import Table

    host = report.host
    if host.get("available"):
        console.print(f"[bold]NVIDIA driver[/bold] {_show(host.get('driver_version'))}, supports CUDA {_show(host.get('cuda_driver_version'))}")
        # One line per GPU (NVML numbering, as nvidia-smi; CUDA_VISIBLE_DEVICES does not apply).
        for g in host.get("gpus") or []:
            mem = g.get("memory_total_bytes")
            pl = g.get("power_limit_w")
            pcie = g.get("pcie") or {}
            procs = g.get("processes")
            arch = known(g.get("architecture"), None)
            console.print(
                f"[bold]GPU {g.get('index')}[/bold] {_show(g.get('name'))}, {_show(g.get('sm'))}" + (f" ({arch})" if arch else "")
                + f", {gib(mem) if isinstance(mem, int) else _show(mem)}"
                + (f", power limit {pl:.0f} W" if isinstance(pl, (int, float)) else "")
                + f", PCIe gen {known(pcie.get('generation'), '?')} x{known(pcie.get('width'), '?')}"
                + f", ECC {known(g.get('ecc_mode'), 'n/a')}"
                + ", processes: " + ((", ".join(str(p["pid"]) for p in procs) or "none") if isinstance(procs, list) else "unknown")
            )
    else:
        console.print(f"[bold]NVIDIA driver[/bold] none ({host.get('reason')})")
    eng = report.docker
    if eng.get("reachable"):
        support = {"nvidia-runtime": "GPU containers via the nvidia runtime", "cdi": "GPU containers via CDI",
                   "hook": "GPU containers via nvidia-container-runtime-hook", "none": "no GPU support (NVIDIA Container Toolkit missing)"}
        what = support.get(eng.get("gpu_support"), "?")
        if eng.get("gpu_support") == "none" and not host.get("gpus"):
            what = "no GPU support (not needed: this host has no NVIDIA GPU)"
        console.print(f"[bold]Docker[/bold] {eng.get('server_version')} at {eng.get('host')}: {what}")
    else:
        console.print(f"[bold]Docker[/bold] not reachable ({eng.get('state')})")
    if report.bench is not None:
        console.print(bench_line(report.bench), markup=False)

    table = Table(title=f"Stacks (judged for GPU {report.gpu})" if report.gpu is not None else "Stacks")
    for col in ("stack", "verdict", "why"):
        table.add_column(col)
    style = {"ok": "[green]ok[/green]", "limited": "[yellow]runs with limits[/yellow]", "cannot": "[red]cannot run[/red]"}
    for name, v in report.verdicts.items():
        mark = " (recommended)" if name == report.recommended else ""
        table.add_row(name + mark, style[v.status], "\n".join(v.reasons) or STACKS[name].description)
    console.print(table)

    # a broken benchmark stack is said by the error that follows (Report.error), unless that
    # error is the selected image stack's
    bench = [Problem(f["severity"], f"{f['message']}.", f["remedy"])
             for f in (report.bench or {}).get("findings", []) if f["severity"] != "error" or not report.ok]
    for p in report.problems + bench:
        colour = {"error": "red", "warning": "yellow", "info": "cyan"}[p.severity]
        console.print(f"[{colour}]{p.severity}:[/{colour}] {escape(p.message)}")
        if p.remedy:
            console.print(f"  what to do: {escape(p.remedy)}")
    sel = report.verdicts[report.selected]
    if sel.remedies and sel.status == "limited":  # "cannot" is explained by the error that follows
        console.print(f"[bold]{report.selected}:[/bold] " + " ".join(sel.remedies))
    console.print(f"[bold]Recommended stack:[/bold] {report.recommended}"
                  + (f"   (requested: {report.requested}: {'can run' if report.ok else 'cannot run'})" if report.requested != "auto" else ""))
