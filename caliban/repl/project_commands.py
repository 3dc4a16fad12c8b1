"""Slash commands about the project and the session's set-up: /init, /memory,
/permissions, /trust, /status, /doctor, /effort."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, runtime_checkable

from prompt_toolkit.application import run_in_terminal
from rich.table import Table
from rich.text import Text

from caliban import __version__
from caliban.providers.base import Effort
from caliban.repl.registry import CommandContext, command
from caliban.repl.render import outside_text
from caliban.util.text import visible

EFFORTS: tuple[Effort, ...] = ("low", "medium", "high")
DOCTOR_MARKS = {"ok": ("✓", "green"), "warn": ("⚠", "yellow"), "fail": ("✗", "red")}


def _dim(text: str) -> Text:
    return Text(text, style="dim")


@runtime_checkable
class HasEffort(Protocol):
    """A provider that thinks harder or less on request (both of caliban's do)."""

    effort: Effort | None


@runtime_checkable
class HasEndpoint(Protocol):
    """A provider with an endpoint and a key variable (both of caliban's)."""

    base_url: str | None
    key_env: str


@command("init", "Have the model write or improve the project's CLAUDE.md (or AGENTS.md)")
async def _init(ctx: CommandContext, arg: str) -> None:
    from caliban.skills.init import init_message, memory_file_for

    if ctx.run_prompt is None:
        ctx.console.print(_dim("/init needs the interactive session."))
        return
    target = memory_file_for(ctx.session.env.project_root)
    ctx.console.print(outside_text(f"Asking the model to write {target}…", "dim"))
    await ctx.run_prompt(init_message(ctx.session.env.project_root))


@command("memory", "Edit a memory file (CLAUDE.md) in $EDITOR", usage="[project|local|user]")
async def _memory(ctx: CommandContext, arg: str) -> None:
    from caliban.config.paths import claude_user_dir
    from caliban.repl.approve import choose
    from caliban.repl.editor import NoEditor, edit_file

    root = ctx.session.env.project_root
    files = {
        "project": root / "CLAUDE.md",
        "local": root / "CLAUDE.local.md",
        "user": claude_user_dir() / "CLAUDE.md",
    }
    if (agents := root / "AGENTS.md").is_file() and not files["project"].is_file():
        files["project"] = agents
    choice = arg.strip()
    if choice and choice not in files:
        ctx.console.print(outside_text(f"/memory {choice}: say project, local or user."))
        return
    if not choice:
        labels = {
            "project": "Project memory (checked in)",
            "local": "Project memory, yours only (not checked in)",
            "user": "Your memory for every project",
        }
        options = [(key, f"{labels[key]}: {_home(path)}") for key, path in files.items()]
        try:
            choice = await choose(options, question="Which memory file? (Esc: none)")
        except (KeyboardInterrupt, EOFError):
            return
    path = files[choice]
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        code = await run_in_terminal(lambda: edit_file(path))
    except NoEditor as exc:
        ctx.console.print(Text(f"  ⚠  {exc}", style="yellow"))
        return
    if code != 0:
        ctx.console.print(Text(f"  ⚠  the editor exited with code {code}", style="yellow"))
    ctx.console.print(outside_text(f"Saved {_home(path)}.", "dim"))
    if ctx.restart is not None:
        # Memory files are read when a session opens: open it again to load the change.
        ctx.console.print(_dim("Reloading the session so the model reads it (conversation kept)…"))
        await ctx.restart()


@command(
    "permissions",
    "Show the permission rules; allow, ask or deny more for this session",
    usage="[allow|ask|deny RULE | forget RULE]",
)
async def _permissions(ctx: CommandContext, arg: str) -> None:
    import dataclasses

    from caliban.permissions.rules import Rule, RuleError

    policy = ctx.session.permissions
    if policy is None:
        ctx.console.print(_dim("This session has no permission policy: every call runs."))
        return
    verb, _, text = arg.strip().partition(" ")
    if verb:
        if verb not in ("allow", "ask", "deny", "forget") or not text.strip():
            ctx.console.print(
                Text("Usage: /permissions allow|ask|deny RULE, or /permissions forget RULE")
            )
            return
        try:
            rule = Rule.parse(text)
        except RuleError as exc:
            ctx.console.print(outside_text(f"Not a rule: {exc}", "yellow"))
            return
        if verb == "forget":
            if rule in policy.session_rules:
                policy.session_rules.remove(rule)
            else:
                ctx.console.print(
                    outside_text(
                        f"{rule.text} was not added in this session (settings files hold the "
                        "others: edit them to remove it)",
                        "yellow",
                    )
                )
                return
        elif verb == "allow":
            policy.allow_for_session(rule.text)
        else:
            current = policy.rules.ask if verb == "ask" else policy.rules.deny
            policy.rules = dataclasses.replace(policy.rules, **{verb: (*current, rule)})
        done = "forgotten" if verb == "forget" else f"{verb} for the rest of this session"
        ctx.console.print(outside_text(f"✓ {rule.text}: {done}", "dim"))
        return
    table = Table(box=None, padding=(0, 2), show_edge=False)
    table.add_column("rule", style="bold", overflow="fold")
    table.add_column("does")
    table.add_column("from", style="dim")
    for behavior, listed in (
        ("deny", policy.rules.deny),
        ("ask", policy.rules.ask),
        ("allow", policy.rules.allow),
    ):
        for rule in listed:
            table.add_row(outside_text(rule.text), behavior, "settings or flags")
    for rule in policy.session_rules:
        table.add_row(outside_text(rule.text), "allow", "this session")
    ctx.console.print(Text(f"Mode: {policy.mode} (Shift-Tab cycles)"))
    if table.row_count:
        ctx.console.print(table)
    else:
        ctx.console.print(_dim("No rules: the mode decides (see docs/permissions.md)."))
    ctx.console.print(
        _dim(
            "Deny beats ask beats allow. Add for this session: /permissions allow|ask|deny "
            "RULE; for good: .claude/settings.json or `caliban config`."
        )
    )


@command("trust", "Trust this folder, then start its MCP servers and settings")
async def _trust(ctx: CommandContext, arg: str) -> None:
    from caliban.permissions import trust

    root = ctx.session.env.project_root
    if trust.is_trusted(root):
        ctx.console.print(outside_text(f"{root} is trusted already.", "dim"))
        return
    try:
        stored = trust.trust(root)
    except OSError as exc:
        ctx.console.print(
            outside_text(
                f"Could not remember the trust ({exc.strerror or exc}: {trust.trust_file()}); "
                "set CALIBAN_STATE_DIR to a writable directory.",
                "yellow",
            )
        )
        return
    ctx.console.print(outside_text(f"✓ Trusted {stored} (remembered)", "dim"))
    if ctx.restart is None:
        ctx.console.print(_dim("Its servers and settings apply from the next session."))
        return
    ctx.console.print(_dim("Reopening the session with the project's servers, settings and hooks…"))
    await ctx.restart()


@command("status", "Show version, session, model, endpoint, key and settings in use")
async def _status(ctx: CommandContext, arg: str) -> None:
    from caliban.permissions.trust import is_trusted
    from caliban.repl.info import mcp_servers

    session = ctx.session
    provider = session.provider
    endpoint, key = "the provider's default", "none set"
    if isinstance(provider, HasEndpoint):
        endpoint = provider.base_url or endpoint
        key = (
            f"${provider.key_env}"
            if os.environ.get(provider.key_env)
            else f"${provider.key_env} not set"
        )
    root = session.env.project_root
    servers = [s for s in mcp_servers(session) if s.state != "disabled"]
    connected = sum(s.state == "connected" for s in servers)
    files = [str(f.path) for f in session.config.files] if session.config else []
    rows = [
        ("Version", f"caliban {__version__}"),
        ("Session ID", session.id),
        ("cwd", str(session.cwd)),
        ("Project", f"{root} ({'trusted' if is_trusted(root) else 'not trusted'})"),
        ("Model", f"{session.model} ({provider.name})"),
        ("Endpoint", endpoint),
        ("API key", key),
        ("Permission mode", session.permissions.mode if session.permissions else "default"),
        ("MCP servers", f"{connected}/{len(servers)} connected" if servers else "none"),
        ("Settings", ", ".join(_home(Path(f)) for f in files) or "defaults"),
    ]
    table = Table.grid(padding=(0, 3))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for label, value in rows:
        table.add_row(label, outside_text(value))
    ctx.console.print(table)


@command("doctor", "Check the installation, settings, trust, servers and keys")
async def _doctor(ctx: CommandContext, arg: str) -> None:
    from caliban.config.doctor import run_checks

    for check in run_checks(ctx.session.cwd):
        mark, style = DOCTOR_MARKS[check.status]
        line = Text(f"{mark} ", style=style)
        line.append(f"{check.area}: ", style="bold")
        line.append(visible(check.detail))
        ctx.console.print(line)
        if check.fix:
            ctx.console.print(outside_text(f"    fix: {check.fix}", "dim"))


@command("effort", "Show or set how hard the model thinks", usage="[low|medium|high]")
async def _effort(ctx: CommandContext, arg: str) -> None:
    provider = ctx.session.provider
    if not isinstance(provider, HasEffort):
        ctx.console.print(_dim(f"The {provider.name} provider takes no effort level."))
        return
    level = arg.strip().lower()
    if not level:
        current = provider.effort or "not set (the model's default)"
        ctx.console.print(Text(f"Effort: {current}. Set it with /effort low|medium|high."))
        return
    if level in ("xhigh", "max"):
        level = "high"  # Claude Code's higher levels run as caliban's highest
    for effort in EFFORTS:
        if level == effort:
            provider.effort = effort
            ctx.console.print(Text(f"Effort: {effort} (from the next request)"))
            return
    ctx.console.print(outside_text(f"/effort {level}: say low, medium or high.", "yellow"))


def _home(path: Path) -> str:
    text, home = str(path), str(Path.home())
    return "~" + text[len(home) :] if text.startswith(home + os.sep) else text
