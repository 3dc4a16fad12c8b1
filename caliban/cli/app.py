"""The ``caliban`` command line as typer parses it: the top-level command and its subcommands.

Imported by :func:`caliban.cli.main.main` only when a command line needs parsing (never for
``--version``). It imports no SDK, no MCP, no asyncio and no prompt-toolkit: each command
imports what it needs when it runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from typer.core import TyperGroup, TyperOption

from caliban import __version__
from caliban.cli.agents_cmd import agents_app
from caliban.cli.config_cmd import config_app
from caliban.cli.doctor_cmd import doctor_command, update_command
from caliban.cli.mcp_cmd import mcp_app
from caliban.cli.options import (
    EXIT_USAGE,
    CliOptions,
    InputFormat,
    OutputFormat,
    PermissionModeName,
    SandboxModeName,
)
from caliban.cli.output import err
from caliban.cli.sessions_cmd import sessions_app
from caliban.cli.trust_cmd import trust_command

if TYPE_CHECKING:
    from caliban.session.worktree import Worktree

session_ran = False
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


def _typer() -> typer.Typer:
    return typer.Typer(
        cls=_PromptOrCommandGroup,
        name="caliban",
        help="caliban: a terminal coding agent. Run it in a repository, or `caliban -p PROMPT`.",
        no_args_is_help=False,
        add_completion=False,
        context_settings={"help_option_names": ["-h", "--help"]},
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
    )


app = _typer()
"""The whole command line: ``caliban [PROMPT]`` and every subcommand."""
app.add_typer(config_app, name="config")
app.add_typer(agents_app, name="agents")
app.add_typer(sessions_app, name="sessions")
app.add_typer(mcp_app, name="mcp")
app.command("trust")(trust_command)
app.command("doctor")(doctor_command)
app.command("update")(update_command)

prompt_app = _typer()
"""``caliban [PROMPT]`` alone (the same callback, :func:`root`): typer builds the click
command of every subcommand it is given before it parses anything (30–40 ms of CPU), which
a session's command line does not use."""

SUBCOMMANDS = frozenset(
    [*(group.name for group in app.registered_groups), *(c.name for c in app.registered_commands)]
)


def app_for(args: list[str]) -> typer.Typer:
    """The app that parses ``args``: :data:`prompt_app` when none of its words is a
    subcommand's name or asks for help (so no subcommand can be meant), else :data:`app`."""
    if SUBCOMMANDS.intersection(args) or {"-h", "--help"}.intersection(args):
        return app
    return prompt_app


def _version(value: bool) -> None:
    if value:
        print(f"caliban {__version__}")
        raise typer.Exit()


@prompt_app.callback(invoke_without_command=True)
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
        Literal["low", "medium", "high", "xhigh", "max"] | None,
        typer.Option(
            "--effort",
            metavar="LEVEL",
            help="How hard the model thinks: low, medium or high (default: model_effort); "
            "Claude Code's xhigh and max run as high.",
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
            help="default, acceptEdits, plan (read-only), dontAsk (deny what would ask) or "
            "bypassPermissions (dangerous).",
        ),
    ] = None,
    dangerously_skip_permissions: Annotated[
        bool,
        typer.Option(
            "--dangerously-skip-permissions",
            help="Same as --permission-mode bypassPermissions: no permission checks (deny "
            "rules still apply). Only in a throwaway sandbox.",
        ),
    ] = False,
    sandbox: Annotated[
        SandboxModeName | None,
        typer.Option(
            "--sandbox",
            metavar="MODE",
            help="Run Bash commands in an OS sandbox: workspace-write (write the project "
            "only), read-only, or off (beats the sandbox settings).",
        ),
    ] = None,
    allowed_tools: Annotated[
        list[str] | None,
        typer.Option(
            "--allowedTools",
            "--allowed-tools",
            metavar="RULES",
            help="Permission rules to allow, space- or comma-separated, e.g. 'Bash(git *) Edit'.",
        ),
    ] = None,
    disallowed_tools: Annotated[
        list[str] | None,
        typer.Option(
            "--disallowedTools",
            "--disallowed-tools",
            metavar="RULES",
            help="Permission rules to deny; a bare built-in tool name removes the tool.",
        ),
    ] = None,
    tools: Annotated[
        list[str] | None,
        typer.Option(
            "--tools",
            metavar="TOOLS",
            help='Exactly these built-in tools, e.g. "Bash,Read"; "" for none, "default" for all.',
        ),
    ] = None,
    system_prompt: Annotated[
        str | None,
        typer.Option("--system-prompt", metavar="TEXT", help="Replace the system prompt."),
    ] = None,
    append_system_prompt: Annotated[
        str | None,
        typer.Option(
            "--append-system-prompt", metavar="TEXT", help="Append TEXT to the system prompt."
        ),
    ] = None,
    mcp_config: Annotated[
        list[str] | None,
        typer.Option(
            "--mcp-config",
            metavar="FILE|JSON",
            help='MCP servers from .mcp.json-style files or JSON strings ({"mcpServers": …}).',
        ),
    ] = None,
    strict_mcp_config: Annotated[
        bool,
        typer.Option("--strict-mcp-config", help="Only the servers of --mcp-config."),
    ] = False,
    add_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--add-dir", metavar="DIR", help="Another working directory the tools may use."
        ),
    ] = None,
    settings: Annotated[
        str | None,
        typer.Option(
            "--settings",
            metavar="FILE|JSON",
            help="A Claude Code settings file or JSON object, layered over the others.",
        ),
    ] = None,
    setting_sources: Annotated[
        str | None,
        typer.Option(
            "--setting-sources",
            metavar="SOURCES",
            help="Which Claude Code settings files to read: user,project,local.",
        ),
    ] = None,
    agents: Annotated[
        str | None,
        typer.Option(
            "--agents",
            metavar="JSON",
            help='Sub-agents as JSON: {"name": {"description": …, "prompt": …}}.',
        ),
    ] = None,
    session_id: Annotated[
        str | None,
        typer.Option("--session-id", metavar="UUID", help="Use this session id (a UUID)."),
    ] = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="With -p: required by --output-format stream-json; json prints every frame.",
        ),
    ] = False,
    input_format: Annotated[
        InputFormat,
        typer.Option(
            "--input-format",
            metavar="FORMAT",
            help="With -p: text (default) or stream-json (user messages as JSON lines on stdin).",
        ),
    ] = "text",
    include_partial_messages: Annotated[
        bool,
        typer.Option(
            "--include-partial-messages",
            help="With -p and stream-json: stream_event frames as the response streams.",
        ),
    ] = False,
    replay_user_messages: Annotated[
        bool,
        typer.Option(
            "--replay-user-messages", help="With stream-json input: echo each user message."
        ),
    ] = False,
    include_hook_events: Annotated[
        bool,
        typer.Option(
            "--include-hook-events",
            help="Accepted for Claude Code scripts; caliban prints no hook frames (hooks run).",
        ),
    ] = False,
    no_session_persistence: Annotated[
        bool,
        typer.Option("--no-session-persistence", help="With -p: do not save the session."),
    ] = False,
    continue_session: Annotated[
        bool, typer.Option("-c", "--continue", help="Resume this project's newest session.")
    ] = False,
    resume: Annotated[
        str | None,
        typer.Option(
            "-r", "--resume", metavar="ID", help="Resume session ID (no ID: pick from a list)."
        ),
    ] = None,
    fallback_model: Annotated[
        str | None,
        typer.Option(
            "--fallback-model",
            metavar="MODELS",
            help="With -p: when the model stays overloaded, switch to these (comma-separated).",
        ),
    ] = None,
    max_budget_usd: Annotated[
        float | None,
        typer.Option(
            "--max-budget-usd",
            metavar="USD",
            help="With -p: stop once the model requests cost this many dollars.",
        ),
    ] = None,
    json_schema: Annotated[
        str | None,
        typer.Option(
            "--json-schema",
            metavar="SCHEMA",
            help="With -p: answer with JSON matching this JSON Schema (the result's "
            "structured_output).",
        ),
    ] = None,
    system_prompt_file: Annotated[
        Path | None,
        typer.Option("--system-prompt-file", metavar="FILE", help="Replace the system prompt."),
    ] = None,
    append_system_prompt_file: Annotated[
        Path | None,
        typer.Option(
            "--append-system-prompt-file", metavar="FILE", help="Append FILE to the system prompt."
        ),
    ] = None,
    debug: Annotated[
        str | None,
        typer.Option(
            "--debug",
            "-d",
            metavar="[FILTER]",
            help='Debug log on stderr; FILTER picks categories ("api,mcp", "!hooks").',
        ),
    ] = None,
    debug_file: Annotated[
        Path | None,
        typer.Option("--debug-file", metavar="PATH", help="Write the debug log to PATH."),
    ] = None,
    debug_to_stderr: Annotated[
        bool, typer.Option("--debug-to-stderr", "-d2e", hidden=True)
    ] = False,
    permission_prompt_tool: Annotated[
        str | None,
        typer.Option(
            "--permission-prompt-tool",
            metavar="TOOL",
            help="stdio (with --input-format stream-json): ask the Agent SDK with a "
            "control_request. Any other value is accepted, and what would ask is denied.",
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            metavar="NAME",
            help="Run as this agent (.claude/agents/NAME.md or --agents): its prompt, tools "
            "and model.",
        ),
    ] = None,
    bare: Annotated[
        bool,
        typer.Option(
            "--bare",
            help="Minimal: tools Bash, Edit, Read; no memory files, hooks, commands, skills, "
            "or MCP servers but --mcp-config's.",
        ),
    ] = False,
    disable_slash_commands: Annotated[
        bool,
        typer.Option("--disable-slash-commands", help="No custom commands or skills."),
    ] = False,
    worktree: Annotated[
        str | None,
        typer.Option(
            "-w",
            "--worktree",
            metavar="[NAME]",
            help="Work in a new git worktree, .claude/worktrees/NAME on branch worktree-NAME "
            "(no NAME: one is made up); on exit, keep or remove it.",
        ),
    ] = None,
    fork_session: Annotated[
        bool,
        typer.Option(
            "--fork-session",
            help="With -c or --resume: continue in a new session (a new id), leaving the "
            "old one as it was.",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", "-v", callback=_version, is_eager=True, help="Show the version."
        ),
    ] = False,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    words: list[str] = ctx.meta.get("caliban.prompt", [])
    system_prompt = _prompt_flag(system_prompt, system_prompt_file, "System prompt")
    append_system_prompt = _prompt_flag(
        append_system_prompt, append_system_prompt_file, "Append system prompt"
    )
    if debug is not None or debug_file is not None or debug_to_stderr:
        _start_debug_log(debug or "", debug_file)
    if permission_prompt_tool is not None and not (
        permission_prompt_tool == "stdio" and input_format == "stream-json"
    ):
        err(
            f"caliban: warning: --permission-prompt-tool {permission_prompt_tool} is not "
            "supported: nothing answers permission prompts in -p, so a call that would ask is "
            "denied (allow it with --allowedTools or a settings rule)"
        )
    schema = _json_schema(json_schema) if json_schema is not None else None
    if max_budget_usd is not None and not max_budget_usd > 0:
        err("Error: --max-budget-usd must be a positive number greater than 0")
        raise typer.Exit(EXIT_USAGE)
    if effort in ("xhigh", "max"):
        err(f"caliban: warning: --effort {effort} runs as high (caliban's highest)")
        effort = "high"
    options = CliOptions(
        prompt=" ".join(words) if words else None,
        print_mode=print_mode,
        output_format=output_format,
        model=model,
        provider=provider,
        max_turns=max_turns,
        effort=effort,
        permission_mode="bypassPermissions" if dangerously_skip_permissions else permission_mode,
        sandbox=sandbox,
        allowed_tools=_split_rules(allowed_tools),
        disallowed_tools=_split_rules(disallowed_tools),
        continue_session=continue_session,
        resume=resume,
        fork_session=fork_session,
        disable_slash_commands=disable_slash_commands or bare,
        bare=bare,
        agent=agent,
        cwd=Path.cwd(),
        verbose=verbose,
        input_format=input_format,
        include_partial_messages=include_partial_messages,
        replay_user_messages=replay_user_messages,
        system_prompt=system_prompt,
        append_system_prompt=append_system_prompt,
        mcp_config=tuple(mcp_config or ()),
        strict_mcp_config=strict_mcp_config or bare,
        add_dirs=tuple(path.expanduser().resolve() for path in add_dir or ()),
        session_id=session_id,
        settings=settings,
        setting_sources=_split_list(setting_sources) if setting_sources is not None else None,
        tools=BARE_TOOLS if bare and tools is None else _tool_set(tools),
        agents_json=agents,
        no_session_persistence=no_session_persistence,
        json_schema=schema,
        max_budget_usd=max_budget_usd,
        permission_prompt_tool=permission_prompt_tool,
        fallback_models=_split_list(fallback_model) if fallback_model else (),
    )
    if worktree is not None:
        options = _in_worktree(options, worktree)
    global session_ran
    session_ran = True
    _without_pydantic_plugins()
    # The Agent SDKs start the CLI without -p (Claude Code runs headless whenever stdout is
    # not a terminal); stream-json input has no meaning in the REPL, so it implies -p.
    if print_mode or input_format == "stream-json":
        from caliban.headless.run import run_headless

        code = run_headless(options)
        if options.worktree is not None:
            _leave_worktree_headless(options.worktree)
        raise typer.Exit(code)
    from caliban.repl.app import run_interactive

    raise typer.Exit(run_interactive(options))


def _without_pydantic_plugins() -> None:
    """Load no pydantic plugins in a session: pydantic looks for them by scanning every
    installed distribution's entry points when it builds its first model (10–15 ms of each
    start-up), and caliban's models have no use for one. ``PYDANTIC_DISABLE_PLUGINS`` would
    do the same, but every command the session runs would inherit it: this fills pydantic's
    own cache of loaded plugins with none, for this process only."""
    try:
        from pydantic.plugin import _loader
    except ImportError:  # a pydantic that moved its loader: scan as it does
        return
    if getattr(_loader, "_plugins", ()) is None:
        _loader._plugins = {}


def _in_worktree(options: CliOptions, name: str) -> CliOptions:
    """``-w NAME``: the session runs in a new (or the existing) worktree NAME."""
    import dataclasses

    from caliban.session.worktree import create_worktree

    worktree = create_worktree(options.cwd, name or None)
    os.chdir(worktree.path)
    relative = ""
    with contextlib.suppress(ValueError):
        relative = str(options.cwd.resolve().relative_to(worktree.repo_root.resolve()))
    cwd = worktree.path / relative if relative and (worktree.path / relative).is_dir() else None
    return dataclasses.replace(options, cwd=cwd or worktree.path, worktree=worktree)


def _leave_worktree_headless(worktree: Worktree) -> None:
    """After ``-p -w``: a worktree with no changes goes, one with changes stays (said on
    stderr); nobody is there to ask."""
    from caliban.session.worktree import changes, remove_worktree
    from caliban.util.git import GitError

    try:
        if changes(worktree).none:
            remove_worktree(worktree)
            return
    except GitError as exc:
        err(f"caliban: worktree {worktree.path}: {exc}")
    err(f"caliban: worktree kept at {worktree.path} (branch {worktree.branch})")


def _json_schema(text: str) -> dict[str, Any]:
    from caliban.tools.structured_output import SchemaError, parse_schema

    try:
        return parse_schema(text)
    except SchemaError as exc:
        err(f"Error: --json-schema: {exc}")
        raise typer.Exit(EXIT_USAGE) from None


def _prompt_flag(text: str | None, path: Path | None, what: str) -> str | None:
    """``--system-prompt`` or ``--system-prompt-file`` (and the append pair): one, not both.

    The messages are Claude Code's."""
    if path is None:
        return text
    flag = "--" + what.lower().replace(" ", "-")
    if text is not None:
        err(f"Error: Cannot use both {flag} and {flag}-file. Please use only one.")
        raise typer.Exit(EXIT_USAGE)
    try:
        return path.expanduser().read_text(encoding="utf-8")
    except FileNotFoundError:
        err(f"Error: {what} file not found: {path.expanduser().resolve()}")
    except (OSError, UnicodeDecodeError) as exc:
        err(f"Error: cannot read {flag}-file {path}: {exc}")
    raise typer.Exit(EXIT_USAGE)


DEBUG_CATEGORIES = {
    "api": ("caliban.providers", "httpx", "httpx2"),
    "mcp": ("caliban.mcp", "mcp"),
    "search": ("caliban.search",),
}
"""``--debug`` categories and the loggers they show. The SDKs' own loggers stay off: they
print request options, which is more than a debug log on a CI console should hold."""


def _start_debug_log(spec: str, path: Path | None) -> None:
    """``--debug [FILTER]``: caliban's debug log on stderr (or in ``--debug-file``).

    FILTER is Claude Code's: categories to show (``api,mcp``) or to hide (``!mcp``); a
    category caliban does not know shows nothing."""
    import logging

    names = [part.strip() for part in spec.split(",") if part.strip()]
    shown = [n for n in names if not n.startswith("!")]
    hidden = {n[1:] for n in names if n.startswith("!")}
    if shown:
        loggers = [lg for n in shown for lg in DEBUG_CATEGORIES.get(n, ())]
    else:
        loggers = ["caliban", *(lg for n, lgs in DEBUG_CATEGORIES.items() for lg in lgs)]
        for n in hidden:
            for lg in DEBUG_CATEGORIES.get(n, ()):
                logging.getLogger(lg).setLevel(logging.WARNING)
                if lg in loggers:
                    loggers.remove(lg)
    handler: logging.Handler
    if path is not None:
        path.expanduser().parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path.expanduser(), encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] %(name)s: %(message)s"))
    for name in loggers:
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)


BARE_TOOLS = ("Bash", "Edit", "Read")
"""``--bare``'s tools, as Claude Code 2.1.197 gives them (``--tools`` still chooses)."""


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


def _split_list(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _tool_set(values: list[str] | None) -> tuple[str, ...] | None:
    """``--tools``: ``None`` (all) when absent or ``default``; ``""`` means none."""
    if values is None:
        return None
    names = _split_rules(values)
    return None if names == ("default",) else names
