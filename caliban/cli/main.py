"""The ``caliban`` console script.

Start-up is a feature: ``caliban --version`` imports nothing but this module and
:mod:`caliban`; any other command line imports the typer app (:mod:`caliban.cli.app`), and
each command imports what it needs (an SDK, MCP, prompt-toolkit) when it runs.
"""

from __future__ import annotations

import gc
import os
import sys

from caliban import __version__


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: maps errors to documented exit codes, no tracebacks."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["--version"], ["-V"], ["-v"]):
        print(f"caliban {__version__}")
        return
    # Start-up makes objects that live as long as the process, and few cycles: the
    # collector would walk them over and over (~0.2 s of CPU with the MCP SDK, 8% of a run
    # that waits for five servers). A session resumes collecting once it is open
    # (caliban.session.assemble.open_session); any other command when it is done.
    gc.disable()
    try:
        code, session_ran = _dispatch(args)
    finally:
        gc.enable()
    if session_ran:
        # The session closed everything it opened (servers, transcript, HTTP clients).
        # Skip the interpreter's teardown of the SDKs' modules, which takes ~0.5 s.
        if (logging := sys.modules.get("logging")) is not None:
            logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _dispatch(args: list[str]) -> tuple[int, bool]:
    """Parse and run ``args``: the exit code, and whether a session (REPL or -p) ran."""
    from caliban.cli import app as cli
    from caliban.cli.argv import compat_flags, expand_variadic, normalise_optional_values
    from caliban.cli.options import EXIT_CONFIG, EXIT_INTERRUPTED, EXIT_USAGE
    from caliban.cli.output import err
    from caliban.errors import ConfigError, UsageError

    code = 0
    try:
        argv = normalise_optional_values(expand_variadic(compat_flags(args)))
        cli.app_for(argv)(args=argv, prog_name="caliban", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except ConfigError as exc:
        err(f"caliban: config error: {exc}")
        code = EXIT_CONFIG
    except UsageError as exc:
        err(f"caliban: {exc}")
        code = EXIT_USAGE
    except KeyboardInterrupt:
        err("caliban: interrupted")
        code = EXIT_INTERRUPTED
    return code, cli.session_ran
