"""The ``caliban`` command line.

Start-up is a feature: this module imports no SDK, no MCP and no prompt-toolkit. Commands
import what they need when they run.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer
from typer.core import TyperGroup, TyperOption

from caliban import __version__
from caliban.cli.agents_cmd import agents_app
from caliban.cli.config_cmd import config_app
from caliban.cli.mcp_cmd import mcp_app
from caliban.cli.options import (
    EXIT_CONFIG,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CliOptions,
    EffortName,
    OutputFormat,
    PermissionModeName,
)
from caliban.cli.sessions_cmd import sessions_app

_session_ran = False
"""Set once a session (interactive or -p) has run, so ``main`` may exit fast."""


class _PromptOrCommandGroup(TyperGroup):
    """``caliban [PROMPT]`` and ``caliban config …`` share one command line.

    When the first positional word is not a subcommand, every positional word is the prompt
    and options may appear anywhere (``caliban -p "fix it" --output-format json``).
    """

    # typer exposes its vendored click's Context base class only under a private module; the
    # context it passes is its public subclass, typer.Context.
    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        first = _first_positional(self, args)
        if first is None or first in self.commands:
            return super().parse_args(ctx, args)
        ctx.allow_interspersed_args = True
        # The plain command's parsing (TyperGroup's own would take the prompt for a subcommand).
        rest = super(TyperGroup, self).parse_args(ctx, args)
        ctx.meta["caliban.prompt"] = rest
        ctx.args = []
        ctx._protected_args = []
        return []


def _first_positional(command: TyperGroup, args: list[str]) -> str | None:
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
