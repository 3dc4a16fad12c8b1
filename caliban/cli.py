"""The ``caliban`` command line.

Start-up is a feature: this module imports no SDK, no MCP and no prompt-toolkit. Commands
import what they need when they run.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from typer import _click as click  # typer >= 0.29 vendors click; its types are these
from typer.core import TyperGroup, TyperOption

from caliban import __version__
from caliban.agents_cli import agents_app
from caliban.mcp.cli import mcp_app
from caliban.sessions_cli import sessions_app

EXIT_USAGE = 2
EXIT_CONFIG = 78
EXIT_INTERRUPTED = 130

_session_ran = False
"""Set once a session (interactive or -p) has run, so ``main`` may exit fast."""

OutputFormat = Literal["text", "json", "stream-json"]
PermissionModeName = Literal["default", "acceptEdits", "plan", "bypassPermissions"]
EffortName = Literal["low", "medium", "high"]


@dataclass(frozen=True, kw_only=True)
class CliOptions:
    """What the top-level flags asked for; handed to the REPL or headless runner."""

    prompt: str | None
    print_mode: bool
    output_format: OutputFormat
    model: str | None
    provider: str | None
    max_turns: int | None
    permission_mode: str | None
    allowed_tools: tuple[str, ...]
    disallowed_tools: tuple[str, ...]
    continue_session: bool
    resume: str | None
    """A session id, ``""`` for the picker, or ``None``."""
    cwd: Path
    effort: str | None = None
    """``--effort``: low, medium or high (the ``model_effort`` setting)."""


class _PromptOrCommandGroup(TyperGroup):
    """``caliban [PROMPT]`` and ``caliban config …`` share one command line.

    When the first positional word is not a subcommand, every positional word is the prompt
    and options may appear anywhere (``caliban -p "fix it" --output-format json``).
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = _first_positional(self, args)
        if first is None or first in self.commands:
            return super().parse_args(ctx, args)
        ctx.allow_interspersed_args = True
        rest = click.Command.parse_args(self, ctx, args)
        ctx.meta["caliban.prompt"] = rest
        ctx.args = []
        ctx._protected_args = []
        return []


def _first_positional(command: click.Command, args: list[str]) -> str | None:
    takes_value = {
        name
        for param in command.params
        if isinstance(param, TyperOption) and not param.is_flag and not param.count
        for name in param.opts
    }
    tokens = iter(args)
    for token in tokens:
        if token == "--":
            return next(tokens, None)
        if token.startswith("-") and token != "-":
            if token in takes_value:
                next(tokens, None)
            continue
        return token
    return None


app = typer.Typer(
    cls=_PromptOrCommandGroup,
    name="caliban",
    help="caliban: a terminal coding agent. Run it in a repository, or `caliban -p PROMPT`.",
    no_args_is_help=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
config_app = typer.Typer(help="Read and change settings (config.toml).", no_args_is_help=True)
app.add_typer(config_app, name="config")
app.add_typer(agents_app, name="agents")
app.add_typer(sessions_app, name="sessions")
app.add_typer(mcp_app, name="mcp")


def _version(value: bool) -> None:
    if value:
        print(f"caliban {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def root(
    ctx: typer.Context,
    print_mode: Annotated[
        bool, typer.Option("-p", "--print", help="Run headless: answer PROMPT and exit.")
    ] = False,
    output_format: Annotated[
        OutputFormat,
        typer.Option(
            "--output-format",
            metavar="FORMAT",
            help="With -p: text (final answer), json (one result object) or stream-json.",
        ),
    ] = "text",
    model: Annotated[
        str | None, typer.Option("--model", metavar="NAME", help="Model to use.")
    ] = None,
    provider: Annotated[
        Literal["anthropic", "openai"] | None,
        typer.Option(
            "--provider",
            metavar="NAME",
            help="anthropic or openai (any OpenAI-compatible endpoint).",
        ),
    ] = None,
    effort: Annotated[
        EffortName | None,
        typer.Option(
            "--effort",
            metavar="LEVEL",
            help="How hard the model thinks: low, medium or high (default: model_effort).",
        ),
    ] = None,
    max_turns: Annotated[
        int | None,
        typer.Option(
            "--max-turns", min=1, metavar="N", help="Stop after this many model requests."
        ),
    ] = None,
    permission_mode: Annotated[
        PermissionModeName | None,
        typer.Option(
            "--permission-mode",
            metavar="MODE",
            help="default, acceptEdits, plan (read-only) or bypassPermissions (dangerous).",
        ),
    ] = None,
    allowed_tools: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-tools",
            metavar="RULES",
            help="Permission rules to allow, e.g. 'Bash(git *)'.",
        ),
    ] = None,
    disallowed_tools: Annotated[
        list[str] | None,
        typer.Option("--disallowed-tools", metavar="RULES", help="Permission rules to deny."),
    ] = None,
    continue_session: Annotated[
        bool, typer.Option("-c", "--continue", help="Resume this project's newest session.")
    ] = False,
    resume: Annotated[
        str | None,
        typer.Option(
            "-r", "--resume", metavar="ID", help="Resume session ID (no ID: pick from a list)."
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    words: list[str] = ctx.meta.get("caliban.prompt", [])
    options = CliOptions(
        prompt=" ".join(words) if words else None,
        print_mode=print_mode,
        output_format=output_format,
        model=model,
        provider=provider,
        max_turns=max_turns,
        effort=effort,
        permission_mode=permission_mode,
        allowed_tools=_split_rules(allowed_tools),
        disallowed_tools=_split_rules(disallowed_tools),
        continue_session=continue_session,
        resume=resume,
        cwd=Path.cwd(),
    )
    global _session_ran
    _session_ran = True
    if print_mode:
        from caliban.headless import run_headless

        raise typer.Exit(run_headless(options))
    from caliban.repl.app import run_interactive

    raise typer.Exit(run_interactive(options))


def _split_rules(values: list[str] | None) -> tuple[str, ...]:
    """Rules may be repeated or given comma/space-separated, as Claude Code accepts them."""
    rules: list[str] = []
    for value in values or []:
        depth, current = 0, ""
        for char in value:
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
            if char in ", " and depth == 0:
                if current:
                    rules.append(current)
                current = ""
            else:
                current += char
        if current:
            rules.append(current)
    return tuple(rules)


def _err(message: str) -> None:
    print(message, file=sys.stderr)


# ---------------------------------------------------------------------------- config


def _load(cwd: Path) -> Any:
    from caliban.config import load_config

    loaded = load_config(cwd)
    for warning in loaded.warnings:
        _err(f"caliban: warning: {warning}")
    return loaded


def _target(scope_global: bool) -> Path:
    from caliban.config import project_config_path, user_config_path

    return user_config_path() if scope_global else project_config_path(Path.cwd())


def _show(value: Any) -> str:
    from caliban.config import toml_value

    if value is None:
        return "(unset)"
    return toml_value(value)


GlobalFlag = Annotated[
    bool, typer.Option("--global", "-g", help="Use the user file instead of the project file.")
]


@config_app.command("get")
def config_get(key: Annotated[str, typer.Argument(help="Dotted key, e.g. tools.lazy_mcp")]) -> None:
    """Print the effective value of KEY."""
    from caliban.config import get_value

    print(_show(get_value(_load(Path.cwd()).settings, key)))


@config_app.command("set")
def config_set(
    key: Annotated[str, typer.Argument(help="Dotted key, e.g. tools.lazy_mcp")],
    value: Annotated[str, typer.Argument(help='A TOML value: true, 24, "x", ["a", "b"]')],
    scope_global: GlobalFlag = False,
) -> None:
    """Set KEY to VALUE in the project file (or the user file with --global)."""
    from caliban.config import parse_value, set_value

    path = _target(scope_global)
    set_value(path, key, parse_value(value))
    _err(f"{key} = {_show(parse_value(value))} written to {path}")


@config_app.command("unset")
def config_unset(
    key: Annotated[str, typer.Argument(help="Dotted key, e.g. tools.lazy_mcp")],
    scope_global: GlobalFlag = False,
) -> None:
    """Remove KEY from the project file (or the user file with --global)."""
    from caliban.config import unset_value

    path = _target(scope_global)
    if unset_value(path, key):
        _err(f"{key} removed from {path}")
    else:
        _err(f"{key} was not set in {path}")


@config_app.command("list")
def config_list(
    show_origin: Annotated[
        bool, typer.Option("--show-origin", help="Show which file set each value.")
    ] = False,
) -> None:
    """Print every effective setting."""
    from caliban.config import all_keys, get_value

    loaded = _load(Path.cwd())
    for key in all_keys():
        line = f"{key} = {_show(get_value(loaded.settings, key))}"
        print(f"{line:<48} # {loaded.origin(key)}" if show_origin else line)


@config_app.command("path")
def config_path() -> None:
    """Print the user and project config file paths."""
    from caliban.config import project_config_path, user_config_path

    for label, path in (("user", user_config_path()), ("project", project_config_path(Path.cwd()))):
        state = "" if path.exists() else "  (not created)"
        print(f"{label}: {path}{state}")


# ---------------------------------------------------------------------------- entry point


def _normalise_resume(argv: list[str]) -> list[str]:
    """``--resume`` takes an optional id: with no id (or an option next) it means 'pick'."""
    result: list[str] = []
    for i, token in enumerate(argv):
        result.append(token)
        if token in ("--resume", "-r"):
            following = argv[i + 1] if i + 1 < len(argv) else None
            if following is None or following.startswith("-") or not _looks_like_id(following):
                result[-1] = "--resume="
    return result


def _looks_like_id(token: str) -> bool:
    return len(token) >= 4 and all(c in "0123456789abcdefABCDEF-" for c in token)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: maps errors to documented exit codes, no tracebacks."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["--version"], ["-V"]):
        print(f"caliban {__version__}")
        return
    code = _dispatch(args)
    if _session_ran:
        # The session closed everything it opened (servers, transcript, HTTP clients).
        # Skip the interpreter's teardown of the SDKs' modules, which takes ~0.5 s.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _dispatch(args: list[str]) -> int:
    from caliban.errors import ConfigError, UsageError

    try:
        app(args=_normalise_resume(args), prog_name="caliban", standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except ConfigError as exc:
        _err(f"caliban: config error: {exc}")
        return EXIT_CONFIG
    except UsageError as exc:
        _err(f"caliban: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _err("caliban: interrupted")
        return EXIT_INTERRUPTED
    return 0
