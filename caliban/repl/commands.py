"""The slash commands about the conversation and the session: /help, /clear, /compact,
/context, /model, /mcp, /tools, /agents, /config, /cost, /resume, /exit.

Commands register with :func:`caliban.repl.registry.command`; the others live in
:mod:`caliban.repl.project_commands` (/init, /memory, /permissions, /trust, /status,
/doctor, /effort) and :mod:`caliban.repl.output_commands` (/diff, /export, /copy, /vim),
imported at the end of this module so that importing it registers every command. Data
about the session comes from :mod:`caliban.repl.info`, so wiring a new session attribute
is a change there.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from caliban.claude_code.model_aliases import resolve_alias
from caliban.providers.select import KnowsContextWindows
from caliban.repl.info import (
    agent_definitions,
    config_rows,
    format_cost,
    mcp_activation,
    mcp_servers,
    session_cost,
)
from caliban.repl.registry import (
    COMMANDS,
    CommandContext,
    ExitRepl,
    command,
    find_command,
    run_command,
)
from caliban.repl.render import outside_text
from caliban.session.context import context_report
from caliban.session.pricing import cost_usd
from caliban.tools.base import McpOrigin
from caliban.util.text import plural, visible
from caliban.util.tokens import estimate_json_tokens, format_tokens

if TYPE_CHECKING:
    from caliban.checkpoints.manager import Checkpoints
    from caliban.mcp.client import McpManager
    from caliban.repl.rewind import RewindContext
    from caliban.session.session import Session

__all__ = ["COMMANDS", "CommandContext", "ExitRepl", "find_command", "run_command"]

RESUME_LIST = 20
MODEL_ALIASES = ("sonnet", "opus", "haiku")
"""What Alt-P offers besides the current model: Claude Code's aliases."""


KEYS_HELP = (
    ("Enter", "send (while an answer runs: queue the message for its end)"),
    ("Alt-Enter, Ctrl-J, or \\ at the end", "new line"),
    ("@path", "attach a file or an image (Tab completes paths)"),
    ("Ctrl-C, Esc", "interrupt the answer (Ctrl-C also clears the line; twice: exit)"),
    ("!command", "run a shell command; its output goes into the conversation"),
    ("Shift-Tab", "cycle permission modes: default, acceptEdits, plan"),
    ("Ctrl-S", "stash the line; it comes back after the next prompt"),
    ("Ctrl-G", "edit the line in $EDITOR"),
    ("Ctrl-V", "paste an image from the clipboard"),
    ("Ctrl-T", "show the todo list"),
    ("Alt-P", "switch the model"),
    ("Ctrl-Z", "suspend caliban (fg brings it back)"),
    ("Ctrl-D", "exit"),
    ("Up / Down", "history (this project's)"),
)


def _dim(text: str) -> Text:
    return Text(text, style="dim")


def _home(path: str) -> str:
    home = str(Path.home())
    return "~" + path[len(home) :] if path.startswith(home + "/") else path


# ---------------------------------------------------------------------------- commands


@command("help", "Show commands and keys", aliases=("?",))
async def _help(ctx: CommandContext, arg: str) -> None:
    table = Table.grid(padding=(0, 3))
    table.add_column(style="bold")
    table.add_column()
    for cmd in COMMANDS.values():
        usage = f" {cmd.usage}" if cmd.usage else ""
        table.add_row(Text(f"/{cmd.name}{usage}"), Text(cmd.description))
    ctx.console.print(table)
    custom = [skill for skill in ctx.session.skills if skill.name not in COMMANDS]
    _help_section(
        ctx,
        "Custom commands and skills",
        [
            (
                outside_text(skill.label),
                outside_text(skill.description),
                Text(f"{skill.scope} {skill.kind}", style="dim"),
            )
            for skill in custom
        ],
    )
    prompts = ctx.session.mcp.prompts() if ctx.session.mcp is not None else ()
    _help_section(
        ctx,
        "MCP prompts",
        [
            (outside_text(f"/{p.command} {p.usage}".rstrip()), outside_text(p.description))
            for p in prompts
        ],
    )
    ctx.console.print()
    keys = Table.grid(padding=(0, 3))
    keys.add_column(style="bold")
    keys.add_column()
    for key, what in KEYS_HELP:
        keys.add_row(Text(key), Text(what))
    ctx.console.print(keys)


def _help_section(ctx: CommandContext, title: str, rows: Sequence[tuple[Text, ...]]) -> None:
    """A titled table of ``/help`` (nothing when ``rows`` is empty); the first column bold."""
    if not rows:
        return
    ctx.console.print()
    ctx.console.print(Text(title, style="bold"))
    table = Table.grid(padding=(0, 3))
    table.add_column(style="bold")
    for _ in rows[0][1:]:
        table.add_column()
    for row in rows:
        table.add_row(*row)
    ctx.console.print(table)


@command("clear", "Start a new conversation (frees the context)")
async def _clear(ctx: CommandContext, arg: str) -> None:
    from caliban.session.resume import start_afresh

    start_afresh(ctx.session)
    ctx.console.print(
        _dim("Conversation cleared. The next prompt starts afresh (/resume finds the old one).")
    )


@command("context", "Show what fills the context window")
async def _context(ctx: CommandContext, arg: str) -> None:
    report = context_report(ctx.session)
    window = max(1, report.window)
    used = report.total

    def share(n: int) -> str:
        return f"{n * 100 / window:.1f}%"

    colors = ("cyan", "magenta", "blue", "green", "yellow", "red")
    width = 50
    bar = Text()
    for (_, tokens), color in zip(report.categories, colors, strict=False):
        bar.append("█" * math.ceil(tokens * width / window), style=color)  # present: visible
    bar.append("░" * max(0, width - len(bar.plain)), style="dim")
    title = Text(f"Context ~{format_tokens(used)}/{format_tokens(window)} tokens ")
    title.append(f"({share(used)}) for {visible(report.model)}", style="dim")
    ctx.console.print(title)
    ctx.console.print(bar)
    table = Table.grid(padding=(0, 2))
    for justify in ("left", "left", "right", "right", "left"):
        table.add_column(justify=justify)
    prompt_notes = [
        report.deferred_paragraph_tokens
        and f"deferred paragraph {format_tokens(report.deferred_paragraph_tokens)}",
        report.skill_listing_tokens and f"skills list {format_tokens(report.skill_listing_tokens)}",
    ]
    notes = {
        "System prompt": ", ".join(note for note in prompt_notes if note),
        "Built-in tools": report.tool_search_tokens
        and f"ToolSearch {format_tokens(report.tool_search_tokens)}",
    }
    for (label, tokens), color in zip(report.categories, colors, strict=False):
        note = Text(notes.get(label) or "", style="dim")
        table.add_row(Text("█", style=color), label, format_tokens(tokens), share(tokens), note)
    free = max(0, window - used)
    table.add_row(Text("░", style="dim"), "Free space", format_tokens(free), share(free), "")
    ctx.console.print(table)
    if report.estimated:
        ctx.console.print(_dim("Estimated offline (about 4 characters a token)."))
    if report.measured is not None:
        measured = format_tokens(report.measured)
        ctx.console.print(_dim(f"Last request, as reported by the provider: {measured} tokens."))
    if report.lazy:
        names = ", ".join(report.active) or "none"
        ctx.console.print(outside_text(f"MCP active: {len(report.active)}/{report.cap} ({names})"))
        if report.preactivated:
            loaded = ", ".join(
                f"{name} (used)" if used else name for name, used in report.preactivated
            )
            ctx.console.print(outside_text(f"MCP loaded for your prompts: {loaded}"))
        servers = report.deferred_servers
        ctx.console.print(
            Text(
                f"MCP deferred: {report.deferred_tools} tools on {servers} "
                f"server{'s' if servers != 1 else ''} (ToolSearch finds them)"
            )
        )
        saved = report.saved_percent
        verdict = f"{math.floor(saved)}% saved" if saved >= 0 else "more than sending them all"
        ctx.console.print(
            _dim(
                f"MCP tool definitions: {format_tokens(report.eager_mcp_tokens)} if sent "
                f"eagerly, {format_tokens(report.lazy_mcp_tokens)} in this request: {verdict}"
            )
        )
    if report.skills:
        ctx.console.print(
            Text(
                f"Skills: {report.skills} listed by name and description; their bodies "
                f"(~{format_tokens(report.skill_deferred_tokens)} tokens) load when used"
            )
        )
    if not report.lazy and report.mcp_tools_total:
        ctx.console.print(
            _dim(
                f"MCP tools: {report.mcp_tools_total}, all sent with every request; "
                "tools.lazy_mcp = true keeps them off the wire until ToolSearch finds them."
            )
        )
    if (checkpoints := ctx.session.checkpoints) is not None:
        ctx.console.print(_dim(checkpoint_storage(checkpoints)))


def checkpoint_storage(checkpoints: Checkpoints) -> str:
    """``/context``'s line on checkpoints: how many, and the disk space their store takes."""
    size = checkpoints.usage_bytes() / 2**20
    count = plural(len(checkpoints.entries()), "checkpoint")
    return f"Checkpoints: {count} this session; {size:.1f} MB stored for this project (/rewind)"


@command("compact", "Summarise the conversation to free the context", usage="[instructions]")
async def _compact(ctx: CommandContext, arg: str) -> None:
    from caliban.compaction import CompactionFailed
    from caliban.providers.base import ProviderError

    ctx.console.print(_dim("Compacting the conversation…"))
    try:
        await ctx.session.compact(arg or None)
    except (CompactionFailed, ProviderError) as exc:
        ctx.console.print(outside_text(f"Not compacted: {exc}", style="yellow"))


@command("model", "Show or switch the model", usage="[name]")
async def _model(ctx: CommandContext, arg: str) -> None:
    session = ctx.session
    if not arg:
        line = Text("Model: ")
        line.append(visible(session.model), style="bold")
        line.append(f" (provider: {session.provider.name})")
        ctx.console.print(line)
        ctx.console.print(_dim("Switch with /model NAME, or Alt-P."))
        return
    if len(arg.split()) > 1:
        ctx.console.print(outside_text(f"A model name has no spaces: /model NAME (not {arg!r})."))
        return
    await switch_model(session, ctx.console, arg)


def model_choices(session: Session) -> list[tuple[str, str]]:
    """The models Alt-P offers: the current one, then Claude Code's aliases that mean a
    model for this provider, each as ``(model, label)``."""
    choices = [(session.model, f"{session.model} (current)")]
    for alias in MODEL_ALIASES:
        model = resolve_alias(alias, session.provider.name, os.environ)
        if model is not None and model not in (m for m, _ in choices):
            choices.append((model, f"{alias}: {model}"))
    return choices


async def switch_model(session: Session, console: Console, wanted: str) -> None:
    """Use ``wanted`` (a model or a Claude Code alias) from the next prompt on."""
    # Claude Code users switch with /model opus: the alias, not a model called "opus".
    model = resolve_alias(wanted, session.provider.name, os.environ)
    if model is None:
        console.print(
            outside_text(
                f"{wanted!r} is a Claude Code alias with no meaning for "
                f"{session.provider.name}; the model stays {session.model}. Give a model name, "
                f"or set ANTHROPIC_DEFAULT_{wanted.upper().removesuffix('[1M]')}_MODEL."
            )
        )
        return
    previous = session.model
    session.set_model(model)
    if isinstance(session.provider, KnowsContextWindows):
        # /context and lazy_mcp = "auto" should weigh the new model's window, not the old one's.
        await session.provider.refresh_context_window(model)
    line = Text(f"Model: {visible(previous)} → ")
    line.append(visible(model), style="bold")
    if model != wanted:
        line.append(f" ({visible(wanted)})")
    line.append(" (from the next prompt)")
    console.print(line)


async def _mcp_server_action(ctx: CommandContext, action: str, name: str = "") -> None:
    """``/mcp login NAME`` (OAuth, then reconnect), ``/mcp reconnect NAME``, ``/mcp enable
    NAME`` / ``/mcp disable NAME`` (kept for this project) and ``/mcp tools NAME``."""
    manager = ctx.session.mcp
    name = name.strip()
    if manager is None or name not in manager.server_names():
        known = ", ".join(manager.server_names()) if manager is not None else "none"
        ctx.console.print(outside_text(f"No MCP server {name!r} (servers: {known})", style="red"))
        return
    if action == "tools":
        _mcp_tools(ctx, manager, name)
        return
    if action in ("enable", "disable"):
        await _mcp_switch(ctx, manager, name, on=action == "enable")
        return
    if action == "login":
        import threading
        import webbrowser

        from caliban.mcp.auth import LoginFailed, login, uses_oauth

        config = manager.server_config(name)
        if config is None or not uses_oauth(config):
            ctx.console.print(_dim(f"{name} does not log in with OAuth"))
            return

        def open_url(url: str) -> None:
            threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()

        def say(text: str) -> None:
            ctx.console.print(outside_text(text))

        try:
            await login(config, open_url=open_url, say=say)
        except LoginFailed as exc:
            ctx.console.print(outside_text(f"Login to {name} failed: {exc}", style="red"))
            return
        ctx.console.print(outside_text(f"Logged in to {name}.", style="green"))
    status = await manager.reconnect(name)
    ctx.console.print(outside_text(f"{name}: {status.state} {status.error or ''}".rstrip()))


async def _mcp_switch(ctx: CommandContext, manager: McpManager, name: str, *, on: bool) -> None:
    """Switch a server on or off in this session, and for this project from now on (the
    user's own state, as Claude Code's ``disabledMcpServers``)."""
    from caliban.mcp.config import switch_server

    try:
        switch_server(ctx.session.cwd, name, on=on)
        kept = "for this project"
    except OSError as exc:
        kept = f"for this session only (not saved: {exc})"
    config = manager.server_config(name)
    if not on:
        await manager.disable(name)
        note = f"{name}: disabled {kept}; `/mcp enable {name}` starts it again"
        ctx.console.print(outside_text(note))
        return
    if config is not None and config.raw.get("disabled") is True:
        note = f"{name} is disabled by its entry in {config.where} (disabled = true): edit it there"
        ctx.console.print(outside_text(note, style="yellow"))
        return
    status = await manager.enable(name)
    ctx.console.print(outside_text(f"{name}: {status.state} {status.error or ''}".rstrip()))


def _mcp_tools(ctx: CommandContext, manager: McpManager, name: str) -> None:
    """``/mcp tools NAME``: the server's tools as last listed, with what their annotations
    say (Claude Code's read-only, destructive, open-world)."""
    tools = [tool for tool in manager.tools() if tool.server == name]
    if not tools:
        state = manager.status(name).state
        ctx.console.print(_dim(f"{name} has no tools listed ({state})."))
        return
    table = Table(box=None, padding=(0, 2), show_edge=False)
    table.add_column("tool", style="bold", no_wrap=True)
    table.add_column("hints", style="dim", no_wrap=True)
    table.add_column("~tokens", justify="right", style="dim", no_wrap=True)
    table.add_column("description")
    for tool in tools:
        hints = [
            hint
            for hint, on in (
                ("read-only", tool.read_only),
                ("destructive", tool.destructive),
                ("open-world", (tool.annotations or {}).get("openWorldHint") is True),
            )
            if on
        ]
        first_line = next(iter(tool.description.splitlines()), "")
        table.add_row(
            outside_text(tool.name),
            ", ".join(hints),
            format_tokens(estimate_json_tokens(tool.spec.as_dict())),
            outside_text(first_line[:120]),
        )
    ctx.console.print(table)


MCP_ACTIONS = ("login", "reconnect", "enable", "disable", "tools")


@command(
    "mcp",
    "Show MCP servers, their status and tools; log in to, reconnect, enable or disable one",
    usage="[tools | login | reconnect | enable | disable NAME]",
)
async def _mcp(ctx: CommandContext, arg: str) -> None:
    words = arg.split(maxsplit=1)
    if words[:1] and words[0] in MCP_ACTIONS:
        await _mcp_server_action(ctx, *words)
        return
    servers = mcp_servers(ctx.session)
    if not servers:
        hint = "Add one with `caliban mcp add` (see docs/mcp.md)."
        ctx.console.print(_dim(f"No MCP servers in this session. {hint}"))
        return
    table = Table(box=None, padding=(0, 2), show_edge=False)
    table.add_column("server", style="bold")
    table.add_column("transport", style="dim")
    table.add_column("status")
    table.add_column("tools", justify="right")
    table.add_column("~tokens", justify="right", style="dim")
    styles = {"connected": "green", "failed": "red", "disabled": "dim"}
    for server in servers:
        connected = server.state == "connected"
        table.add_row(
            outside_text(server.name),
            outside_text(server.transport),
            outside_text(server.state, style=styles.get(server.state, "yellow")),
            str(server.tools) if connected else "-",
            format_tokens(server.tokens) if connected else "-",
        )
    ctx.console.print(table)
    for server in servers:
        for line in server.detail:
            ctx.console.print(outside_text(f"  {server.name}: {line}", style="red"))
    if (activation := mcp_activation(ctx.session)) is not None:
        names = ", ".join(activation.active) or "none"
        count = f"{len(activation.active)}/{activation.cap}"
        ctx.console.print(outside_text(f"Lazy loading: {count} active ({names})"))


@command("tools", "List the tools offered to the model")
async def _tools(ctx: CommandContext, arg: str) -> None:
    view = ctx.session.toolset.describe()
    offered = view.offered
    deferred = len(view.lazy.deferred) if view.lazy else 0
    table = Table(box=None, padding=(0, 2), show_edge=False)
    table.add_column("tool", style="bold")
    table.add_column("kind")
    table.add_column("~tokens", justify="right", style="dim")
    for tool in offered:
        tokens = estimate_json_tokens(tool.spec.as_dict())
        kind = "mcp" if isinstance(tool.origin, McpOrigin) else "builtin"
        table.add_row(outside_text(tool.name), kind, format_tokens(tokens))
    if ctx.session.offers_web_search():
        table.add_row(Text("WebSearch"), "server", "-")
    ctx.console.print(table)
    summary = f"{len(offered)} tool{'s' if len(offered) != 1 else ''} on the wire"
    if deferred:
        plural = "s" if deferred != 1 else ""
        summary += f"; {deferred} deferred MCP tool{plural} (ToolSearch finds them)"
    ctx.console.print(_dim(summary))


@command("agents", "List the sub-agents caliban can delegate to")
async def _agents(ctx: CommandContext, arg: str) -> None:
    from caliban.subagents import AGENT_ROW_HEADERS, agent_rows

    agents, problems = agent_definitions(ctx.session)
    table = Table(box=None, padding=(0, 2), show_edge=False)
    for header in AGENT_ROW_HEADERS:
        table.add_column(header, overflow="fold", style="bold" if header == "name" else None)
    for name, source, model, tools, inherit in agent_rows(agents):
        cells = (name, _home(source), model, tools, inherit)
        table.add_row(*(outside_text(cell) for cell in cells))
    ctx.console.print(table)
    for problem in problems:
        ctx.console.print(outside_text(f"⚠ {problem}", style="yellow"))
    ctx.console.print(_dim("Define more in .caliban/agents/NAME.md (see docs/subagents.md)."))


@command("config", "Show effective settings and where each comes from")
async def _config(ctx: CommandContext, arg: str) -> None:
    rows = config_rows(ctx.session)
    if rows is None:
        ctx.console.print(_dim("This session has no configuration files loaded."))
        return
    table = Table(box=None, padding=(0, 2), show_edge=False)
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("from", style="dim", overflow="fold")
    for key, value, origin in rows:
        table.add_row(key, outside_text(value), outside_text(_home(origin)))
    ctx.console.print(table)
    ctx.console.print(_dim("Change with `caliban config set KEY VALUE` (or --global)."))


@command("cost", "Show tokens and cost of this session")
async def _cost(ctx: CommandContext, arg: str) -> None:
    usage = ctx.session.ledger.total()
    table = Table.grid(padding=(0, 3))
    table.add_column()
    table.add_column(justify="right")
    table.add_row("Input", f"{usage.input_tokens:,}")
    table.add_row("Output", f"{usage.output_tokens:,}")
    table.add_row("Cache read", f"{usage.cache_read_tokens:,}")
    table.add_row("Cache write", f"{usage.cache_write_tokens:,}")
    cost = session_cost(ctx.session)
    table.add_row("Cost", format_cost(cost) if cost is not None else "unknown (no price list)")
    if len(by_model := ctx.session.ledger.by_model()) > 1:  # each priced at its own model
        for model, model_usage in by_model.items():
            table.add_row(visible(f"  {model}"), format_cost(cost_usd(model, model_usage)))
    ctx.console.print(table)
    ctx.console.print(_dim(visible(f"Model {ctx.session.model} · session {ctx.session.id}")))


@command("resume", "Resume an earlier session of this project", usage="[N | ID]")
async def _resume(ctx: CommandContext, arg: str) -> None:
    from caliban.errors import UsageError
    from caliban.session.resume import resume_session
    from caliban.session.store import find_session, format_summary, list_sessions

    session = ctx.session
    sessions = list_sessions(session.env.project_root)
    if not arg:
        if not sessions:
            ctx.console.print(_dim("No saved sessions in this project yet."))
            return
        for number, summary in enumerate(sessions[:RESUME_LIST], start=1):
            current = "  (this session)" if summary.id == session.id else ""
            line = Text(f"{number:>3}. ", style="dim")
            line.append(summary.id[:8], style="bold")
            line.append(f"  {format_summary(summary)}{current}")
            ctx.console.print(line)
        ctx.console.print(_dim("Resume one with /resume N or /resume ID."))
        return
    ref = arg
    if arg.isdigit() and len(arg) <= 3:
        if not 1 <= int(arg) <= min(len(sessions), RESUME_LIST):
            ctx.console.print(Text(f"No session number {arg}: see /resume.", style="yellow"))
            return
        ref = sessions[int(arg) - 1].id
    try:
        ref = find_session(session.env.project_root, ref, listed_by="/resume").id
        await resume_session(session, ref)
    except UsageError as exc:
        ctx.console.print(outside_text(str(exc), style="yellow"))
        return
    if ctx.replay is not None:
        ctx.replay(session.conversation.messages)


@command("sandbox", "Show the OS sandbox: mode, backend, what commands may write and reach")
async def _sandbox(ctx: CommandContext, arg: str) -> None:
    import asyncio

    runtime = ctx.session.sandbox
    if runtime is None:
        lines = ["Sandbox: off (turn it on with --sandbox workspace-write or sandbox.enabled)"]
    else:
        lines = await asyncio.to_thread(runtime.describe)  # the first call probes the backend
    for line in lines:
        head, sep, rest = line.partition(": ")
        text = Text(head + sep, style="bold") if sep else Text()
        text.append_text(outside_text(rest if sep else head))
        ctx.console.print(text)
    ctx.console.print(_dim("Settings: sandbox.* in config.toml or .claude/settings.json "
                           "(see docs/sandbox.md)."))  # fmt: skip


@command("add-dir", "Add a working directory (for this session, or remembered)", usage="<path>")
async def _add_dir(ctx: CommandContext, arg: str) -> None:
    from caliban.messages import Message
    from caliban.permissions.approval import PolicyAuthorizer
    from caliban.permissions.updates import DirectoriesUpdate
    from caliban.repl.approve import pick

    policy = ctx.session.permissions
    if not arg.strip() or policy is None:
        ctx.console.print(_dim("Usage: /add-dir <path> (a folder file edits and sandboxed "
                               "commands may write, as in the project)"))  # fmt: skip
        return
    path = policy.working_dir(arg.strip())
    problem = None
    if not path.exists():
        problem = f"Path {path} was not found."
    elif not path.is_dir():
        problem = (
            f"{path} is not a directory. Did you mean to add the parent directory {path.parent}?"
        )
    elif within := next(
        (p for p in (policy.project_root, *policy.working_dirs) if path.is_relative_to(p)), None
    ):
        which = "the project" if within == policy.project_root else "the working directory"
        problem = f"{path} is already accessible within {which} {within}."
    if problem is not None:
        ctx.console.print(outside_text(problem, style="yellow"))
        return
    question = (
        f"Add directory to workspace\n {path}\n caliban will be able to read files in this "
        "directory and make edits when auto-accept edits is on."
    )
    options = ["Yes, for this session", "Yes, and remember this directory", "No"]
    answer = await pick(ctx.choose, question, options)
    if answer not in (0, 1):
        ctx.console.print(outside_text(f"Did not add {path} as a working directory."))
        return
    authorizer = ctx.session.authorizer
    if answer == 1 and isinstance(authorizer, PolicyAuthorizer):
        # .claude/settings.local.json, as Claude Code saves it (locked, atomic, other keys
        # kept; in a folder not trusted, new sessions read it once the folder is trusted)
        update = DirectoriesUpdate(
            kind="addDirectories", directories=(str(path),), destination="localSettings"
        )
        authorizer.updater.apply([update])
        done = f"Added {path} as a working directory and saved to local settings."
    else:
        policy.change_working_dirs([path], add=True)
        done = f"Added {path} as a working directory for this session."
    ctx.console.print(outside_text(done))
    # The model learns it with the next prompt; the system prompt's list of directories
    # keeps its bytes (and the provider's prompt cache) until the next session.
    reminder = f"{done} Its files may be read and edited as the project's are."
    ctx.session.add_context(Message.user(f"<system-reminder>{reminder}</system-reminder>"))


@command("rewind", "Restore the code and/or conversation to before an earlier prompt (Esc Esc)")
async def _rewind(ctx: CommandContext, arg: str) -> None:
    from caliban.repl.rewind import rewind

    await rewind(_rewind_context(ctx))


@command("undo", "Restore the files to before the last prompt (the conversation stays)")
async def _undo(ctx: CommandContext, arg: str) -> None:
    from caliban.repl.rewind import undo

    await undo(_rewind_context(ctx))


def _rewind_context(ctx: CommandContext) -> RewindContext:
    from caliban.repl.rewind import RewindContext

    return RewindContext(
        session=ctx.session, console=ctx.console, choose=ctx.choose, set_input=ctx.set_input
    )


@command("exit", "Leave caliban", aliases=("quit",))
async def _exit(ctx: CommandContext, arg: str) -> None:
    raise ExitRepl


# Importing this module registers every command (see the module docstring).
from caliban.repl import output_commands, project_commands  # noqa: E402, F401
