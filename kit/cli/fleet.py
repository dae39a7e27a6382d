"""`kit fleet slurm`: sweeps on a Slurm cluster as job arrays; follow, collect, resubmit (docs/fleet.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

app = typer.Typer(help="Run sweeps of `kit run` on a cluster's scheduler and collect them into one report.",
                  no_args_is_help=True)
slurm_app = typer.Typer(help="Slurm: a sweep (suites x GPU counts) as a job array through sbatch; status, collect, resubmit.",
                        no_args_is_help=True)
app.add_typer(slurm_app, name="slurm")


def _console():
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def _print_states(states, console) -> None:
    counts: dict = {}
    for s in states:
        counts[s.state] = counts.get(s.state, 0) + 1
    console.print(f"{time_now()} sweep: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))


def time_now() -> str:
    import time

    return time.strftime("%H:%M:%S")


def _print_table(states, console) -> None:
    for s in states:
        console.print(f"  task {s.task.index:>3}  {s.task.label:<28} {s.state:<13} {s.detail}")


@slurm_app.command("submit", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def submit(
    ctx: typer.Context,
    dir: Path = typer.Option(..., "--dir", "-d", help="The sweep folder, on a file system every node sees (created; tasks write under it)."),
    suites: Optional[str] = typer.Option(None, "--suites", help="Suites to sweep, comma-separated (cifar, lstm, gpt, all); one task each. Default: the tasks' own --suite."),
    gpus_per_task: str = typer.Option("1", "--gpus-per-task", help="GPU counts to sweep, comma-separated: 0 = a CPU task (--device cpu), 1 = one GPU, N = kit run --gpus N on one node."),
    partition: Optional[str] = typer.Option(None, "--partition", "-p", help="Slurm partition (default: the cluster's)."),
    time_limit: Optional[str] = typer.Option(None, "--time", "-t", help="Time limit per task, in Slurm's form (30, 1:30:00); each task's kit run stops itself a minute before it (a tenth of a shorter time; --time-limit), its finished cells and bundle kept."),
    cpus_per_task: Optional[int] = typer.Option(None, "--cpus-per-task", help="CPUs per task (default: the cluster's)."),
    container: str = typer.Option("none", "--container", help="none (the submitting Python on the nodes), pyxis (srun --container-image) or apptainer."),
    image: Optional[str] = typer.Option(None, "--image", help="The kit's image for --container pyxis / apptainer; {stack} stands for each of --stacks."),
    stacks: Optional[str] = typer.Option(None, "--stacks", help="Image stacks to sweep, comma-separated (cuda12, cuda10, cpu); needs --container and an --image with {stack}."),
    python: Optional[str] = typer.Option(None, "--python", help="Python on the nodes for --container none (default: the one running this command)."),
    sbatch_arg: Optional[List[str]] = typer.Option(None, "--sbatch-arg", help="Extra sbatch option, passed as is (repeat), e.g. --sbatch-arg=--account=lab."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the batch script and the sbatch commands; submit and write nothing."),
    wait: bool = typer.Option(False, "--wait", help="Follow the tasks until they end, then collect (as `status --follow` and `collect`)."),
    poll: float = typer.Option(10.0, "--poll", help="Seconds between squeue polls while following."),
) -> None:
    """Submit a sweep: one array task per suite x GPU count, each a `kit run` with the options after `--`.

    Example: kit fleet slurm submit --dir /shared/sweep1 --suites cifar,lstm --gpus-per-task 1,2 -p gpu -t 1:00:00 -- --data synthetic
    """
    from kit.errors import EnvironmentCheckError
    from kit.fleet import slurm
    from kit.fleet.sweep import SCRIPT_FILE, TASKS_DIR, parse_int_list, parse_name_list, plan_sweep

    sweep = plan_sweep(dir, list(ctx.args), parse_name_list(suites, "--suites"), parse_int_list(gpus_per_task, "--gpus-per-task"),
                       python=python, partition=partition, time_limit=time_limit, cpus_per_task=cpus_per_task,
                       container=container, image=image, sbatch_args=list(sbatch_arg or []),
                       stacks=parse_name_list(stacks, "--stacks"))
    script = slurm.render_script(sweep)
    if dry_run:
        typer.echo(script, nl=False)
        for gpus, idx in sorted(slurm.groups_by_gpus(sweep.tasks).items()):
            typer.echo("# " + " ".join(slurm.sbatch_command(sweep, idx, gpus)))
        sys.stdout.flush()
        _console().print("Dry run: nothing was submitted or written.")
        return
    console = _console()
    slurm.require_client()  # before anything is written (exit 6)
    sweep.path.mkdir(parents=True, exist_ok=True)
    for t in sweep.tasks:
        (sweep.path / TASKS_DIR / str(t.index)).mkdir(parents=True, exist_ok=True)  # Slurm writes the task's log there
    (sweep.path / SCRIPT_FILE).write_text(script, encoding="utf-8")
    sweep.save()
    try:
        subs = slurm.submit(sweep)
    except EnvironmentCheckError as exc:
        raise EnvironmentCheckError(exc.message, remedy=f"{exc.remedy} The sweep is in {sweep.path}: once Slurm "
                                    f"answers, submit it with: kit fleet slurm resubmit {sweep.path}") from None
    for s in subs:
        console.print(f"Submitted job {s.job_id}: task(s) {slurm._ranges(s.indices)}" + (f" ({s.gres})" if s.gres else ""))
    if not wait:
        typer.echo(str(sweep.path))
        console.print(f"Follow with: kit fleet slurm status {sweep.path} --follow; then: kit fleet slurm collect {sweep.path}")
        return
    _follow_and_collect(sweep, poll, console)


def _follow_and_collect(sweep, poll: float, console) -> None:
    from kit.fleet import slurm

    states = slurm.follow(sweep, lambda st: _print_states(st, console), poll_s=poll)
    _print_table(states, console)
    _collect(sweep, console)


def _collect(sweep, console, index: Optional[Path] = None) -> None:
    from kit.errors import KitError
    from kit.fleet import slurm

    try:
        out = slurm.collect(sweep, index=index)
    except KitError as exc:
        kept = getattr(exc, "collected", None)
        if kept is not None:
            _report(kept, console)
        raise
    _report(out, console)


def _report(out, console) -> None:
    for note in out.notes:
        console.print(f"note: {note}")
    if out.indexed:
        from kit.bundle.inert import inert
        from kit.index.ingest import ADDED, PRESENT, REFUSED

        for o in out.indexed:
            if o.outcome == REFUSED:
                console.print(f"index: refused {inert(o.path)}: {inert(o.reason)}", markup=False)
        n = {k: sum(o.outcome == k for o in out.indexed) for k in (ADDED, PRESENT, REFUSED)}
        console.print(f"index: {n[ADDED]} added, {n[PRESENT]} already in the index, {n[REFUSED]} refused", markup=False)
    if out.compare_page:
        console.print(f"Comparison: {out.compare_page}")
    if out.merged:
        typer.echo(str(out.merged))
    for s in out.states:
        if s.bundle is not None and out.merged is None:
            typer.echo(str(s.bundle))


@slurm_app.command("status")
def status(
    dir: Path = typer.Argument(..., help="The sweep folder."),
    follow_: bool = typer.Option(False, "--follow", "-f", help="Keep polling until no task is pending or running."),
    poll: float = typer.Option(10.0, "--poll", help="Seconds between squeue polls."),
) -> None:
    """Each task's state: pending, running, done, failed (no bundle, bad bundle, partial)."""
    from kit.fleet import slurm
    from kit.fleet.sweep import load_sweep

    sweep = load_sweep(dir)
    console = _console()
    states = (slurm.follow(sweep, lambda st: _print_states(st, console), poll_s=poll) if follow_
              else slurm.task_states(sweep))
    _print_states(states, console)
    _print_table(states, console)


@slurm_app.command("collect")
def collect(
    dir: Path = typer.Argument(..., help="The sweep folder."),
    index: Optional[Path] = typer.Option(None, "--index", help="Also add each verified task bundle to this results index (kit index add; made if missing)."),
) -> None:
    """Verify every task's bundle, merge them (merged/) and compare them (compare.html); list what is missing."""
    from kit.fleet.sweep import load_sweep

    _collect(load_sweep(dir), _console(), index)


@slurm_app.command("resubmit")
def resubmit(
    dir: Path = typer.Argument(..., help="The sweep folder."),
    task: Optional[List[int]] = typer.Option(None, "--task", help="Only these task indices (repeat); default: every task without a complete, verified bundle."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be resubmitted."),
) -> None:
    """Submit again the tasks that failed or left no verified bundle; finished bundles are kept."""
    from kit.fleet import slurm
    from kit.fleet.sweep import load_sweep

    sweep = load_sweep(dir)
    console = _console()
    picked = slurm.to_resubmit(slurm.task_states(sweep), list(task or []))
    if not picked:
        console.print("Nothing to resubmit: every task has a complete, verified bundle or is still queued.")
        return
    if dry_run:
        for gpus, idx in sorted(slurm.groups_by_gpus([t for t in sweep.tasks if t.index in picked]).items()):
            typer.echo(" ".join(slurm.sbatch_command(sweep, idx, gpus)))
        return
    for s in slurm.submit(sweep, picked):
        console.print(f"Resubmitted task(s) {slurm._ranges(s.indices)} as job {s.job_id}")


@slurm_app.command("check")
def check() -> None:
    """What this host's Slurm offers: client, controller, partitions and GPUs, container runtimes (pyxis, Apptainer).
    Exit 6 when no sweep could be submitted from here (no sbatch, or the controller does not answer)."""
    from kit.fleet import slurm

    lines = slurm.check()
    for what, ok, detail in lines:
        typer.echo(f"{'ok ' if ok else '-- '} {what}: {detail}")
    slurm.require_usable(lines)


def register(main_app: typer.Typer) -> None:
    main_app.add_typer(app, name="fleet")
