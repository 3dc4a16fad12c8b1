"""Assembling a session from settings: provider, tools, permissions, MCP servers.

:func:`open_session` is the one place that knows how the pieces fit; headless mode and the
REPL both use it. Slow work overlaps: the provider SDK is imported in a worker thread while
MCP servers start in their own processes. When every server's tool list is cached, nothing
waits for them: the search index is built and the MCP SDK imported in the background, after
the provider SDK, which the first request needs first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from caliban.background import start_in_daemon_thread
from caliban.cli.options import CliOptions
from caliban.config import load_config
from caliban.events import Notice
from caliban.paths import project_root
from caliban.prompts import system_prompt
from caliban.session.session import Listener, Session
from caliban.tools.base import ToolEnv

if TYPE_CHECKING:
    from caliban.mcp.client import McpManager
    from caliban.mcp.config import ServerConfig
    from caliban.permissions.approval import Approver


def preload() -> None:
    """Import what :func:`open_session` needs (the MCP SDK among it) ahead of time.

    The REPL calls this in a background thread so the event loop never blocks on imports
    while the prompt is on screen.
    """
    import caliban.mcp.client
    import caliban.mcp.config
    import caliban.mcp.lazy.toolset
    import caliban.mcp.status
    import caliban.permissions.approval
    import caliban.providers.select
    import caliban.session.resume
    import caliban.subagents
    import caliban.tools.agent
    import caliban.tools.builtin  # noqa: F401


def cli_overrides(options: CliOptions) -> dict[str, Any]:
    """Settings given as flags; they beat both config files."""
    overrides: dict[str, Any] = {}
    if options.provider:
        overrides["provider"] = options.provider
    if options.model:
        overrides["model"] = options.model
    if options.max_turns:
        overrides["max_turns"] = options.max_turns
    if options.permission_mode:
        overrides.setdefault("permissions", {})["mode"] = options.permission_mode
    return overrides


@contextlib.asynccontextmanager
async def open_session(
    options: CliOptions,
    *,
    approver: Approver | None = None,
    listeners: Sequence[Listener] = (),
    interactive: bool = False,
) -> AsyncIterator[Session]:
    """A ready session; MCP servers are shut down when the block exits.

    Headless sessions wait for MCP servers before the first request (the model should see
    their tools); interactive ones do not, so the prompt appears at once.
    """
    from caliban.mcp.config import load_mcp_config
    from caliban.mcp.status import describe_failure
    from caliban.permissions.approval import deny_approver, make_authorize
    from caliban.permissions.policy import PermissionPolicy
    from caliban.providers.select import create_provider, resolve_provider
    from caliban.session.resume import close_transcript, open_transcript
    from caliban.subagents import list_agents
    from caliban.tools.builtin import builtin_tools

    loaded = load_config(options.cwd, overrides=cli_overrides(options))
    settings = loaded.settings
    choice = resolve_provider(
        settings, provider=options.provider, model=options.model, environ=os.environ
    )
    provider = create_provider(choice)
    warm_up = start_in_daemon_thread(provider.warm_up, name="caliban-sdk-import")

    root = project_root(options.cwd)
    mcp_config = load_mcp_config(options.cwd)
    manager = start_mcp(mcp_config.servers)

    policy = PermissionPolicy.from_settings(
        settings.permissions,
        project_root=root,
        allowed=options.allowed_tools,
        disallowed=options.disallowed_tools,
    )
    late: asyncio.Task[None] | None = None
    timers: list[asyncio.TimerHandle] = []
    agent_definitions, agent_warnings = list_agents(options.cwd)
    session = Session(
        settings=settings,
        provider=provider,
        model=choice.model,
        system_prompt=system_prompt(options.cwd, root),
        env=ToolEnv(cwd=options.cwd, project_root=root),
        builtins=builtin_tools(),
        agents=agent_definitions,
        authorize=make_authorize(policy, approver or deny_approver),
        listeners=list(listeners),
        max_turns=settings.max_turns,
        config=loaded,
        mcp=manager,
    )
    try:
        await open_transcript(session, options, interactive=interactive)  # -c / --resume
        lazy_warning = session.lazy_policy.warning if session.lazy_policy else None
        for text in [
            *loaded.warnings,
            *mcp_config.problems,
            *mcp_config.warnings,
            *agent_warnings,
            *([lazy_warning] if lazy_warning else []),
        ]:
            session.emit(Notice(level="warning", text=text))
        warm_up.add_done_callback(
            lambda done: timers.append(
                asyncio.get_running_loop().call_later(
                    FIRST_REQUEST_HEAD_START, _warm_in_background, session, done
                )
            )
        )
        if not interactive and manager is not None:
            # Only servers whose tools are not cached are waited for: the others' tools are
            # announced from the cache, and a call of one waits for its own server.
            for status in await manager.wait_listed(manager.unlisted()):
                if status.state == "failed":
                    session.emit(Notice(level="warning", text=describe_failure(status)))
            late = asyncio.create_task(_report_failures(session, manager))
        if not interactive:
            await warm_up
        yield session
    finally:
        close_transcript(session)
        for timer in timers:  # a session closed before its background work began
            timer.cancel()
        if late is not None:
            late.cancel()
        warm_up.cancel()
        if manager is not None:
            await manager.aclose()
        await provider.aclose()


FIRST_REQUEST_HEAD_START = 0.05
"""Seconds between the provider SDK being ready and the background work starting: the first
request (built at once) leaves first instead of queueing behind five process launches and a
thread that holds the interpreter lock. Negligible beside a model's latency, which the
background work then overlaps."""


def start_mcp(servers: Sequence[ServerConfig]) -> McpManager | None:
    """Start ``servers`` in the background, their last tool lists read from the user's cache;
    ``None`` when there are none.

    When some server's tools are not cached (they are awaited), the servers' processes are
    launched at once and the MCP SDK (about 0.6 s to import) imported meanwhile. When every
    tool is known from the cache, the first request needs no server: they are launched once
    the provider SDK is in (:func:`_warm_in_background`), so booting them does not slow the
    first request on a small machine. With no servers the MCP SDK is never loaded.
    """
    if not servers:
        return None
    from caliban.mcp.catalog_cache import user_cache
    from caliban.mcp.client import McpManager

    manager = McpManager(servers, catalog_cache=user_cache())
    if manager.unlisted():
        manager.start()
    return manager


def _warm_in_background(session: Session, provider_ready: asyncio.Future[None]) -> None:
    """Once the provider SDK is in: launch the MCP servers if they wait, build the search
    index (the first ToolSearch needs it), then import the MCP SDK (the first call of an MCP
    tool needs it), in a daemon thread — one after the other, as both need the interpreter
    lock."""
    if provider_ready.cancelled():  # the session closed first
        return
    build = session.search_index_builder()
    manager = session.mcp
    if manager is not None:
        manager.start(import_sdk=False)
        # A server that lists new tools changes the catalog: index that one too.
        manager.on_change(lambda _version: _index_in_background(session))

    def work() -> None:
        if build is not None:
            build()
        if manager is not None:
            manager.import_sdk()

    threading.Thread(target=work, name="caliban-warm", daemon=True).start()


def _index_in_background(session: Session) -> None:
    if (build := session.search_index_builder()) is not None:
        threading.Thread(target=build, name="caliban-index", daemon=True).start()


async def _report_failures(session: Session, manager: McpManager) -> None:
    """Warn about each server that fails to start after the first request went out."""
    pending = [s.name for s in manager.statuses() if s.state == "connecting"]
    for name in pending:
        status = await manager.wait_for_state(name, "connected", "failed")
        if status.state == "failed":
            from caliban.mcp.status import describe_failure

            session.emit(Notice(level="warning", text=describe_failure(status)))


def session_init_info(session: Session) -> dict[str, Any]:
    """The fields of stream-json's ``init`` line."""
    servers = session.mcp.statuses() if session.mcp is not None else []
    return {
        "cwd": str(session.cwd),
        "model": session.model,
        "tools": [tool.name for tool in session.toolset.offered()],
        "mcp_servers": [{"name": s.name, "status": s.state} for s in servers],
        "permission_mode": session.settings.permissions.mode,
    }


def result_extra(session: Session) -> dict[str, Any]:
    """Extra fields for the headless JSON result: ``context`` (:mod:`caliban.session.context`)."""
    from caliban.session.context import context_report

    return {"context": context_report(session).as_dict()}
