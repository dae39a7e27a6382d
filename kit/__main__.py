"""`python -m kit` and the `kit` command: the command line (kit.cli.main), with a Ctrl-C that lands while
it is still being imported said in one line, as at any other moment of start-up (exit 130)."""

import sys


def run() -> None:
    try:
        from kit.cli.main import main
    except KeyboardInterrupt:
        print("interrupted (Ctrl-C)", file=sys.stderr)
        sys.exit(130)
    main()


if __name__ == "__main__":
    run()
