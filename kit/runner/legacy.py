"""`kit run` inside the cuda10 image (Python 3.7, torch 1.4, fastai v1, Apex with amp).

The kit's command line needs Python 3.10+, the 2019 stack is Python 3.7. The
boundary: this module parses the same run options (kit.runner.options.RunOptions)
with argparse and calls the same runner (kit.runner.execute) as `kit run`, which writes the run folder
(journal.jsonl, results.json after every cell, env.json, run.log) and the bundle
with its report. The bench code detects what the old stack offers (kit.bench.caps)
and records the rest as skipped with a reason. The runner, the bundle writer and the
report keep to Python 3.7 (tests/test_py37_boundary.py checks the syntax; CI runs
this module in the cuda10 image); the command line, `kit doctor`, `kit launch` and
`kit compare` stay on the host. Should the bundle step fail in the container,
`kit launch` exports it on the host from the run folder.

    python -m kit.runner.legacy run --suite all --device cuda:0     (what the image runs)

Python 3.7 syntax only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kit import __version__
from kit.errors import Interrupted, KitError, UsageError
from kit.runner.options import RunOptions, argument_parser, parse_args

PROG = "kit run (cuda10 stack)"
#: how this front end is run in the image, for the remedies that name a command
COMMAND = "python -m kit.runner.legacy run"


def parser() -> argparse.ArgumentParser:
    """`kit run`'s options (the fields of kit.runner.options.RunOptions), as this image takes them."""
    p = argument_parser(PROG, legacy=True)
    p.description = __doc__.split("\n\n")[0]
    return p


def parse(argv: list) -> RunOptions:
    """The RunOptions of a `run ...` command line (what `kit launch` renders with to_args)."""
    return parse_args(argv, prog=PROG, legacy=True)


def _print(text: str) -> None:
    print(text, flush=True)


class PlainUI:
    """One line per cell on stdout (the host's `kit launch` draws the bars from the journal)."""

    def plan(self, plan, done) -> None:
        _print(f"plan: {len(plan.cells)} cell(s), {len(done)} already done")

    def cell_start(self, spec) -> None:
        _print(f"{spec.cell_id}: running")

    def cell_progress(self, spec, done, total, desc: str = "") -> None:
        pass

    def cell_done(self, spec, result) -> None:
        from kit.runner.progress import describe_result

        _print(f"{spec.cell_id}: {describe_result(result)}")

    def cell_skipped_resume(self, spec) -> None:
        _print(f"{spec.cell_id}: finished before the resume")

    def close(self) -> None:
        pass


def run(options: RunOptions, argv: list) -> int:
    from kit.runner.execute import execute
    from kit.runner.option_checks import config_from_options
    from kit.runner.plan import build_plan
    from kit.runner.service import (check_first_cell_fits, ensure_real_data, outcome_summary, raise_if_cells_failed,
                                    time_limit)

    limit = time_limit(options)  # exit 2 for a malformed one, before anything else
    resume = options.resume
    if resume:  # the same rule as `kit run --resume`: an option that changes the run is refused (exit 2)
        from kit.runner.resume import read_resume_state
        from kit.runner.option_checks import check_resume_options

        state = read_resume_state(Path(resume))
        check_resume_options(options, state.config, Path(resume))
        if not state.is_complete():  # nothing is written when its first cell left would not fit
            check_first_cell_fits(build_plan(state.config), state.done, limit, Path(resume), command=COMMAND)
    # each suite checks its cells' settings as the plan is built (exit 2), before anything is written
    plan = None if resume else build_plan(config_from_options(options, argv))
    if plan is not None:
        check_first_cell_fits(plan, {}, limit, command=COMMAND)
    results_dir = Path(resume).resolve().parent if resume else Path(options.results_dir)
    if plan is not None and plan.config.data == "real":
        ensure_real_data(plan.config, _PrintConsole(), progress=False)  # no rich on this stack
    outcome = execute(plan, results_dir, resume_dir=Path(resume) if resume else None, ui=PlainUI(), time_limit=limit)
    _print(outcome_summary(outcome))
    if outcome.bundle:
        _print(f"Bundle: {outcome.bundle}")
    else:
        _print(f"No bundle ({outcome.bundle_error}); `kit launch` exports it on the host, "
               f"or run `kit bundle export {outcome.run_dir}` there.")
    raise_if_cells_failed(outcome)
    return 0


class _PrintConsole:
    def print(self, text: str) -> None:
        _print(text)


def main(argv: list | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["--version"], ["version"]):
        _print(f"kit {__version__} (cuda10 runner, Python {sys.version.split()[0]})")
        return 0
    try:
        if argv[:1] not in ([], ["run"]) and not argv[0].startswith("-"):
            raise UsageError(f"the cuda10 image runs benchmarks only (`run ...`); got {argv[0]!r}",
                             remedy="Bundles, reports and comparisons run on the host: kit bundle / kit compare.")
        return run(parse(argv), argv)
    except KeyboardInterrupt:
        _print("Interrupted: finished cells are kept in the run folder.")
        return Interrupted.exit_code
    except KitError as exc:
        _print(f"error: {exc.message}" + (f"\nwhat to do: {exc.remedy}" if getattr(exc, "remedy", None) else ""))
        return exc.exit_code

if __name__ == "__main__":
    sys.exit(main())
