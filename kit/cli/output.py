"""The output formats of the commands (``--json``, ``--csv``, ``--markdown``, ``--html``), defined once.

A command takes its formats with :func:`output_options`, as sqlite-utils' commands take theirs
from one decorator, so every format of every command has the same shape::

    --json FILE     write the JSON to FILE (a temporary file renamed into place: never half a file)
    --json -        print it to stdout instead of the command's tables (stdout then carries only it)

Any number of formats may go to files; at most one to stdout. Unless one goes to stdout, the
command prints its usual tables as well. Every FILE is checked before the command does any work:
a path that cannot be written (a folder, an unwritable folder), a bundle's name (such as
``kit compare --json a.tar.gz b.tar.gz`` read as "write the JSON to a.tar.gz") or an option's
(``--json --verbose``) is refused with one line (exit 2), and nothing is written.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import typer

#: the stdout target of a format
STDOUT = "-"
#: each format's option and its name in messages
FORMATS = {"json": ("--json", "JSON"), "csv": ("--csv", "CSV"), "markdown": ("--markdown", "Markdown"),
           "html": ("--html", "HTML report")}
#: what an output file must not be named: the inputs of the kit's commands
BUNDLE_SUFFIXES = (".tar.gz", ".tgz")


@dataclass
class Output:
    """Where each format asked for goes: a FILE path, or :data:`STDOUT`."""

    targets: dict = field(default_factory=dict)

    @property
    def to_stdout(self) -> Optional[str]:
        """The format printed to stdout, if one is."""
        return next((fmt for fmt, target in self.targets.items() if target == STDOUT), None)

    @property
    def to_files(self) -> list:
        """The formats written to files, in the order of the options."""
        return [fmt for fmt, target in self.targets.items() if target != STDOUT]

    @property
    def terminal(self) -> bool:
        """The command prints its own tables (no format goes to stdout)."""
        return self.to_stdout is None

    def show(self, tables: Callable[[], None], **texts: Callable[[], str]) -> None:
        """The command's output: ``tables()`` unless a format goes to stdout, then each format asked
        for, its text made by ``texts[fmt]()``, to stdout or its file."""
        if self.terminal:
            tables()
        for fmt in sorted(self.targets, key=lambda f: self.targets[f] != STDOUT):
            self.write(fmt, texts[fmt]())

    def write(self, fmt: str, text: str) -> None:
        """``text`` to where ``fmt`` goes: stdout as it is, or its file (then its path on stderr)."""
        target = self.targets[fmt]
        if target == STDOUT:
            typer.echo(text, nl=False)
            return
        from kit.errors import UsageError
        from kit.results.atomic import atomic_write_text

        option, name = FORMATS[fmt]
        try:
            atomic_write_text(Path(target), text)
        except OSError as exc:
            raise UsageError(f"{option} {target}: cannot write it ({exc.strerror or exc}).",
                             remedy=_remedy(option)) from None
        typer.echo(f"{name}: {target}", err=True)

    def check(self) -> None:
        """Raise UsageError unless at most one format goes to stdout and every file can be written."""
        from kit.errors import UsageError

        printed = [FORMATS[fmt][0] for fmt, target in self.targets.items() if target == STDOUT]
        if len(printed) > 1:
            raise UsageError(f"{' and '.join(f'{o} -' for o in printed)}: only one format can go to stdout.",
                             remedy="Give all but one of them a FILE to write.")
        for fmt in self.to_files:
            check_output_path(Path(self.targets[fmt]), FORMATS[fmt][0])


def _remedy(option: str) -> str:
    return f"Give a file path in a folder you can write to, or - to print it (e.g. {option} -)."


def check_output_path(path: Path, option: str) -> None:
    """Raise UsageError (exit 2) unless ``path`` can be written as a new or replaced file: not an
    option's name (the next option taken for the file), not a bundle's name, not a folder, under a folder (existing, or creatable from its nearest existing
    ancestor) where a file can be created. Probes with a temporary file that is removed at once."""
    import tempfile

    from kit.errors import UsageError

    if str(path).startswith("-"):  # `--json --verbose`: the option after it taken for the file
        raise UsageError(f"{option} {path}: that is an option, not a file; {option} takes a FILE or -.",
                         remedy=f"Give {option} its FILE, or - to print it (e.g. {option} - {path}); a file whose "
                                f"name starts with - is ./{path}.")
    if path.name.endswith(BUNDLE_SUFFIXES):
        raise UsageError(f"{option} {path}: that is a bundle's name; {option} takes the file to write, "
                         "not an input.", remedy=f"Put the option after the inputs with its own file, or - to print "
                                                 f"it (e.g. {option} -).")
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder, not a file.", remedy=_remedy(option))
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UsageError(f"{option} {path}: {folder} is a file, not a folder.", remedy=_remedy(option))
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".kit-write-check."):
            pass
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write in {folder} ({exc.strerror or exc}).",
                         remedy=_remedy(option)) from None


def output_options(**what: str) -> Callable:
    """A decorator that gives a Typer command one option per format named in ``what`` (json, csv,
    markdown, html: what the format holds, for the help), each ``--FORMAT FILE|-``, and calls the
    command with one ``output`` argument (:class:`Output`) in their place, checked before the
    command runs (:meth:`Output.check`)."""
    unknown = set(what) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown output formats: {sorted(unknown)}")

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command, eval_str=True)
        params = [p for name, p in signature.parameters.items() if name != "output"]
        added = [inspect.Parameter(
            f"{fmt}_output", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str],
            default=typer.Option(None, FORMATS[fmt][0], metavar="FILE|-",
                                 help=f"Write {holds} to FILE, or print it with - (instead of the tables)."),
        ) for fmt, holds in what.items()]

        @functools.wraps(command)
        def with_output(*args, **kwargs):
            targets = {fmt: kwargs.pop(f"{fmt}_output") for fmt in what}
            output = Output({fmt: target for fmt, target in targets.items() if target is not None})
            output.check()  # before any work: a bad path costs nothing and writes nothing
            return command(*args, output=output, **kwargs)

        with_output.__signature__ = signature.replace(parameters=params + added)
        with_output.__annotations__ = {p.name: p.annotation for p in params + added}
        return with_output

    return decorate
