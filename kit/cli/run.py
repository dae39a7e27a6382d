"""`kit run`: run the benchmark suites natively (the containers call this too).

Its options are the fields of :class:`kit.runner.options.RunOptions` and of each suite's options
class (type, default, flags, help text): :func:`_parameters` makes one Typer option of each, and
:func:`run` builds the RunOptions from them, by name, and hands it to
:func:`kit.runner.service.run_from_cli`. An option is added as a field there, not here.
"""

from __future__ import annotations

import inspect
import sys
from enum import Enum
from pathlib import Path
from typing import Any, List, Optional

import typer
import typer.core

from kit.cli import fast_exit
from kit.results.option_fields import OptionSpec
from kit.runner.options import RunOptions, option_specs


def run(ctx: typer.Context, **values: Any) -> None:
    """Run the benchmark suites and write results.json, the journal and a bundle (its path on stdout)."""
    from kit.runner.service import run_from_cli

    fast_exit.skip_teardown()  # torch's CUDA and profiler teardown can hang after the bundle is written
    run_from_cli(options_from_command_line(ctx, values), argv=sys.argv)


def options_from_command_line(ctx: typer.Context, values: dict[str, Any]) -> RunOptions:
    """The RunOptions of Typer's values. ``given``: the options set on the command line, in the
    order given (Click fills ``ctx.params`` in that order, then the defaults)."""
    given = tuple(name for name in ctx.params if ctx.get_parameter_source(name).name == "COMMANDLINE")
    plain = {name: _plain(value) for name, value in values.items()}
    return RunOptions.of(plain, given)


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


def _parameters() -> list[inspect.Parameter]:
    """One Typer option per option of `kit run` (kit.runner.options.option_specs: its own, then each
    suite's, grouped under the suite in ``--help``; defaults read now, as Typer reads them at import)."""
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    for spec in option_specs():
        annotation = _annotation(spec)
        default = annotation(spec.default) if spec.choices else spec.default
        option = typer.Option(default, *_declarations(spec), help=spec.help, rich_help_panel=_panel(spec))
        params.append(inspect.Parameter(spec.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=option))
    return params


def _panel(spec: OptionSpec) -> str | None:
    """Where ``--help`` lists an option: `kit run`'s own under Options, a suite's under its suite."""
    if not spec.suites:
        return None
    return f"Options of the {' and '.join(spec.suites)} suite{'s' if len(spec.suites) > 1 else ''}"


class _GroupedHelp(typer.core.TyperCommand):
    """Click's plain help (kit.cli.main: no option name is cut), its options grouped as Typer's rich
    panels would group them: `kit run`'s own, then each suite's (:func:`_panel`)."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        sections: dict[str, list] = {}
        panels = {spec.name: _panel(spec) for spec in option_specs()}
        for param in self.get_params(ctx):
            row = param.get_help_record(ctx)
            if row is not None:
                sections.setdefault(panels.get(param.name) or "Options", []).append(row)
        for title, rows in sections.items():
            with formatter.section(title):
                formatter.write_dl(rows)


def _annotation(spec: OptionSpec) -> Any:
    if spec.choices:  # a menu Typer shows and checks
        return Enum(spec.name.title(), {c: c for c in spec.choices}, type=str)
    if spec.kind == "list":  # items as text: a comma list of numbers is split and checked by the run's config
        return Optional[List[str]]
    if spec.kind == "yes-no":
        return Optional[bool]
    if spec.kind == "switch":
        return bool
    # a path as text: RunOptions refuses an empty one (Click's Path("") would be ".")
    typ = str if spec.type is Path else spec.type
    return typ if spec.default is not None else Optional[typ]  # type: ignore[name-defined]


def _declarations(spec: OptionSpec) -> tuple[str, ...]:
    if spec.kind == "yes-no":
        return (f"{spec.flag}/{spec.off}",)
    return spec.names


run.__signature__ = inspect.Signature(_parameters())  # type: ignore[attr-defined]
run.__annotations__ = {p.name: p.annotation for p in run.__signature__.parameters.values()}  # type: ignore[attr-defined]


def register(app: typer.Typer) -> None:
    app.command("run", cls=_GroupedHelp)(run)
