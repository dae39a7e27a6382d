"""`kit`: the command-line entry point.

Each command group lives in its own module under kit/cli/ and registers itself
here. Errors from the library (the KitError family) are printed without a
traceback and turned into the exit codes listed in kit.errors.EXIT_CODES.
"""

from __future__ import annotations

import os
import sys

import typer

from kit import __version__
from kit.cli import bundle, compare, data, doctor, explain, fidelity, fleet, image, index, launch, run
from kit.cli import fast_exit
from kit.errors import EXIT_CODES, DiskFull, Interrupted, KitError, without_parser_prefix

#: the one line a Ctrl-C gets where no command has said more (during start-up)
INTERRUPTED = "interrupted (Ctrl-C)"

app = typer.Typer(
    name="kit",
    help=(
        "Mixed-precision training benchmark kit: fp32 vs fp16/bf16 on CIFAR-100 ResNets "
        "(fastai and a GPU-bound torch engine) and Apex's Wikitext-2 LSTM, with shareable bundles.\n\n"
        "Exit codes: " + "; ".join(f"{k} {v}" for k, v in EXIT_CODES.items())
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Click's plain help, not Typer's rich panels: the panels' option-name columns are cut
    # with "…" at 80 columns (--static-loss-sc…, --no-dynamic-l…), and a user then cannot
    # type the option. Click wraps the help text and never shortens a name.
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the kit's version and exit."),
) -> None:
    """Mixed-precision training benchmark kit."""


run.register(app)
doctor.register(app)
launch.register(app)
compare.register(app)
explain.register(app)
app.add_typer(data.app, name="data")
app.add_typer(bundle.app, name="bundle")
app.add_typer(image.app, name="image")
app.add_typer(fidelity.app, name="fidelity")
fleet.register(app)
index.register(app)


def print_error(exc: KitError) -> None:
    from rich.console import Console

    from rich.markup import escape

    # messages may quote untrusted text (bundle member names): never interpret it as markup
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(f"[bold red]error:[/bold red] {escape(exc.message)}", markup=True)
    if exc.remedy:
        console.print(f"[bold]what to do:[/bold] {escape(exc.remedy)}")


def _last_words() -> None:
    """``KIT_RUN_NOTE``, where set, as the command's last line on stderr, whatever its outcome
    (compose.cpu.yaml sets it: "No GPU was used: ...")."""
    note = os.environ.get("KIT_RUN_NOTE")
    if note:
        print(note, file=sys.stderr, flush=True)


def _exit_now(code: int) -> None:
    _last_words()
    fast_exit.exit_now(code)


def _end(argv: list[str] | None, code: int) -> None:
    """End with ``code``: at once on the command line where the command asked it (kit.cli.fast_exit),
    else by SystemExit."""
    if argv is None and fast_exit.ends_now():
        _exit_now(code)
    sys.exit(code)


def _end_after_traceback(argv: list[str] | None) -> None:
    """An unexpected error: where the command line ends at once (kit.cli.fast_exit), print its traceback
    and end with 1, as Python would (its teardown could hang after a run); else return (the caller raises)."""
    if argv is None and fast_exit.ends_now():
        import traceback

        traceback.print_exc()
        _exit_now(1)


def main(argv: list[str] | None = None) -> None:
    fast_exit.begin(command_line=argv is None)
    try:
        rv = app(args=argv, prog_name="kit", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
        if code == Interrupted.exit_code:
            # Typer turns a Ctrl-C that reaches it (one during a command's start-up, before the command
            # says more itself) into this exit code, silently: say it in one line
            print(INTERRUPTED, file=sys.stderr)
        if code or (argv is None and fast_exit.ends_now()):
            _end(argv, code)
    except KitError as exc:
        print_error(exc)
        _end(argv, exc.exit_code)
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        _end(argv, Interrupted.exit_code)
    except SystemExit:
        raise
    except OSError as exc:
        full = DiskFull.from_os_error(exc)  # a write the library did not convert itself
        if full is None:
            _end_after_traceback(argv)
            raise
        print_error(full)
        _end(argv, full.exit_code)
    except Exception as exc:
        # Click's usage errors (Typer may vendor its own copy of Click, so match by shape)
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):
            message = getattr(exc, "message", None)
            if isinstance(message, str):
                exc.message = without_parser_prefix(message)  # Typer's choices go through pydantic
            exc.show()
            sys.exit(exc.exit_code or 2)
        if type(exc).__name__ == "Abort":
            print("aborted", file=sys.stderr)
            _end(argv, 130)
        _end_after_traceback(argv)
        raise
    finally:  # (not reached after _exit_now)
        fast_exit.release()
        _last_words()
