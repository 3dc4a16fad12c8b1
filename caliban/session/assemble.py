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
import functools
import gc
import os
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caliban.claude_code.compat import caliban_mode
from caliban.cli.options import CliOptions
from caliban.config.paths import project_root
from caliban.config.settings import load_config
from caliban.events import Notice
from caliban.messages import Message
from caliban.permissions.trust import has_project_files, is_trusted
from caliban.prompts import system_prompt
from caliban.session.session import Listener, Session, new_session_id
from caliban.tools.base import ToolEnv
from caliban.util.background import start_in_daemon_thread

if TYPE_CHECKING:
    from caliban.claude_code.compat import SessionSetup
    from caliban.config.settings import LoadedConfig
    from caliban.hooks import HookRunner
    from caliban.mcp.client import McpManager
    from caliban.mcp.config import ServerConfig
    from caliban.mcp.startup import FirstRequestWait
    from caliban.permissions.approval import Approver, PermissionAnswer, PermissionRequest
    from caliban.permissions.policy import PermissionPolicy
    from caliban.providers.select import ProviderChoice
    from caliban.sandbox.runtime import SandboxRuntime
    from caliban.subagents import AgentDefinition
    from caliban.tools.base import Tool
    from caliban.tools.tasks import BackgroundTasks


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
    import caliban.skills.catalog
    import caliban.skills.toolset
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
    if options.effort:
        overrides["model_effort"] = options.effort
    if options.permission_mode:
        overrides.setdefault("permissions", {})["mode"] = caliban_mode(options.permission_mode)
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
    their tools); interactive ones do not, so the prompt appears at once. ``approver`` is
    asked when a call needs approval (interactive: after the Notification hooks; headless:
    a :class:`~caliban.permissions.approval.DenyingApprover`, or none).
    """
    from caliban.claude_code.compat import prepare, resolve_model, retry_policy
    from caliban.mcp.config import load_mcp_config
    from caliban.providers.base import DEFAULT_MODELS
    from caliban.providers.select import create_provider, resolve_provider
    from caliban.subagents import list_agents

    root = project_root(options.cwd)
    trusted = is_trusted(root)
    loaded = load_config(options.cwd, overrides=cli_overrides(options), trusted=trusted)
    # Claude Code's settings files, env, modes and flags (caliban.claude_code.compat).
    setup = prepare(options, loaded, root)
    settings = setup.settings
    agent_definitions, agent_warnings = list_agents(options.cwd, extra=setup.extra_agents)
    main_agent = _main_agent(options.agent, agent_definitions)
    wanted_model = setup.model
    if main_agent is not None and main_agent.model is not None and options.model is None:
        wanted_model = main_agent.model  # "inherit" was read as None with the definition
    choice = resolve_provider(
        settings, provider=options.provider, model=wanted_model, environ=os.environ
    )
    choice, model_warning = resolve_model(choice, DEFAULT_MODELS[choice.provider])
    retry = retry_policy()
    provider = create_provider(choice, **({"retry": retry} if retry else {}))

    mcp_config = load_mcp_config(
        options.cwd,
        extra=options.mcp_config,
        strict=options.strict_mcp_config,
        mcp_json_allows=setup.claude.allows_mcpjson_server,
        trusted=trusted,
    )
    # The servers boot on the other core while the rest of the session is built: launched
    # once it is known which may start (trust and enabledMcpjsonServers decided above, a
    # run that fails on its flags or provider starts none), before the session's own
    # imports; those confined by the sandbox wait for it (built below).
    manager = mcp_manager(mcp_config.servers)
    first_wait = None
    if manager is not None:
        first_wait = launch_first(
            manager, wait_for_all=None if interactive else settings.tools.wait_for_mcp
        )
        await manager.wait_launched()
    opened: Session | None = None
    hooks: HookRunner | None = None
    tasks: BackgroundTasks | None = None
    sandbox: SandboxRuntime | None = None
    background: list[asyncio.Future[Any]] = []  # what starts beside the session: cancelled
    timers: list[asyncio.TimerHandle] = []
    try:
        from caliban.checkpoints import checkpointing
        from caliban.claude_code.compat import select_builtins
        from caliban.mcp.status import describe_failure, describe_skipped
        from caliban.permissions.approval import PolicyAuthorizer, deny_approver
        from caliban.permissions.policy import PermissionPolicy
        from caliban.permissions.saved_rules import rules_file
        from caliban.session.resume import open_transcript
        from caliban.skills.catalog import load_catalog
        from caliban.tools.builtin import builtin_tools
        from caliban.tools.tasks import BackgroundTasks

        tasks = BackgroundTasks()
        chosen = select_builtins(
            builtin_tools(tasks),
            only=options.tools,
            deny=[*settings.permissions.deny, *options.disallowed_tools],
        )
        policy = PermissionPolicy.from_settings(
            settings.permissions,
            project_root=root,
            allowed=options.allowed_tools,
            disallowed=[*options.disallowed_tools, *chosen.deny],
            working_dirs=setup.add_dirs,
        )
        sandbox = _sandbox(options, loaded, setup, policy, trusted)
        if manager is not None:
            manager.confine(sandbox)
        # After the servers' launches, which it would only hold up.
        warm_up = start_in_daemon_thread(provider.warm_up, name="caliban-http-client")
        # The server's real context window (a local model's is rarely 128k), asked off the
        # critical path; /context and lazy_mcp = "auto" read it once known.
        window = asyncio.ensure_future(provider.refresh_context_window(choice.model))
        # On for Bash: find (and probe) the backend while the rest starts, to warn once.
        probe = asyncio.ensure_future(
            asyncio.to_thread(sandbox.unavailable_notice)
            if sandbox.config.enabled
            else asyncio.sleep(0, result=None)
        )
        background += [warm_up, window, probe]
        catalog = load_catalog(options.cwd)
        # Only a person gets Notification hooks; headless callers pass a denier (or nothing).
        notifying = _NotifyingApprover(approver) if approver is not None and interactive else None
        if not interactive:
            asker = approver or deny_approver
        elif setup.never_ask or notifying is None:
            asker = deny_approver
        else:
            asker = notifying
        authorizer = PolicyAuthorizer(
            policy,
            asker,
            rules_file=(
                rules_file(root, settings.permissions.save_rules_in, trusted=trusted)
                if interactive
                else None
            ),
            trusted=trusted,
        )
        fallback_warnings: list[str] = []
        fallbacks = _fallbacks(options.fallback_models, choice, fallback_warnings)
        session = Session(
            settings=settings,
            provider=provider,
            model=choice.model,
            system_prompt=system_prompt(
                options.cwd,
                root,
                add_dirs=setup.add_dirs,
                read_denied=policy.read_denial,
                replace=options.system_prompt,
                append=options.append_system_prompt,
                memory=not options.bare,
                base=main_agent.system_prompt.strip() if main_agent is not None else None,
            ),
            env=ToolEnv(
                cwd=options.cwd,
                project_root=root,
                read_denied=policy.read_denial,
                address_denied=policy.address_denial,
                sandbox=sandbox,
            ),
            builtins=_with_structured_output(
                _agent_tools(chosen.builtins, main_agent), options.json_schema
            ),
            # An --agent main agent starts no sub-agents, as a sub-agent does not.
            agents=agent_definitions if chosen.agent and main_agent is None else (),
            skills=() if options.disable_slash_commands else catalog.items,
            permissions=policy,
            authorizer=authorizer,
            listeners=list(listeners),
            max_turns=settings.max_turns,
            config=loaded,
            mcp=manager,
            permission_mode_name=setup.permission_mode,
            id=options.session_id or new_session_id(),
            fallback_models=fallbacks,
            main_agent=main_agent,
            sandbox=sandbox,
            status_line=setup.claude.status_line,
        )
        opened = session
        authorizer.warn = lambda text: session.emit(Notice(level="warning", text=text))
        if checkpointing(interactive=interactive):
            from caliban.checkpoints.manager import Checkpoints

            session.checkpoints = Checkpoints(
                project=root,
                session_id=session.id,
                warn=lambda text: session.emit(Notice(level="warning", text=text)),
            )
        skip_hooks = options.bare or setup.claude.disable_all_hooks
        hooks = None if skip_hooks else _hooks(loaded, setup.claude.hooks, session, root)
        if options.json_schema is not None:
            from caliban.tools.structured_output import RequireStructuredOutput

            session.hooks = RequireStructuredOutput(session.hooks, session.env)
        if notifying is not None:
            notifying.hooks = hooks
        if not options.no_session_persistence:
            await open_transcript(session, options, interactive=interactive)  # -c / --resume
        lazy_warning = session.lazy_policy.warning if session.lazy_policy else None
        for text in [
            *loaded.untrusted,
            *mcp_config.untrusted_notices,
            *setup.warnings,
            *chosen.warnings,
            *([model_warning] if model_warning else []),
            *fallback_warnings,
            *loaded.warnings,
            *mcp_config.problems,
            *mcp_config.warnings,
            *agent_warnings,
            *catalog.warnings,
            *([lazy_warning] if lazy_warning else []),
        ]:
            session.emit(Notice(level="warning", text=text))
        if manager is not None:
            manager.on_warning(lambda text: session.emit(Notice(level="warning", text=text)))
        warm_up.add_done_callback(
            lambda done: timers.append(
                asyncio.get_running_loop().call_later(
                    FIRST_REQUEST_HEAD_START,
                    functools.partial(_warm_in_background, start_servers=interactive),
                    session,
                    done,
                )
            )
        )
        if first_wait is not None and manager is not None:
            # Only some servers whose tools are not cached are waited for (mcp/startup.py):
            # the others' tools join the tool list once listed; cached ones are announced
            # from the cache, and a call of one waits for its own server.
            for status in await manager.wait_listed(first_wait.servers, first_wait.timeout):
                if status.state == "failed":
                    session.emit(Notice(level="warning", text=describe_failure(status)))
                elif (skipped := describe_skipped(status)) is not None:
                    session.emit(Notice(level="warning", text=skipped))
            background.append(asyncio.create_task(_report_failures(session, manager)))
        if not interactive:
            await warm_up
            lazy = session.lazy_policy
            if manager is not None and lazy is not None and lazy.mode == "auto":
                await window  # "auto" weighs the tools against it; a short timeout bounds it
        if interactive and session.checkpoints is not None:
            # The first checkpoint hashes the whole project: before the first prompt, not in it.
            background.append(asyncio.create_task(session.checkpoints.warm()))
        if (unavailable := await probe) is not None:
            session.emit(Notice(level="warning", text=unavailable))
        if manager is not None:
            manager.settle_order()
        if hooks is not None:
            source = (
                "resume" if options.continue_session or options.resume is not None else "startup"
            )
            if context := await hooks.session_started(source):
                session.add_context(Message.user(context))
        if not gc.isenabled():
            # Start-up is over (caliban.cli.main paused collection for it). What it made
            # lives as long as the process: frozen, it is never walked (resuming without
            # would walk all of it at once, ~0.13 s; see Session.run).
            gc.freeze()
            gc.enable()
        yield session
    finally:
        if hooks is not None:
            with contextlib.suppress(Exception):  # a failing hook must not lose the session
                await hooks.session_ended("other")
        if opened is not None:
            from caliban.session.resume import close_transcript

            close_transcript(opened)
        if tasks is not None:
            await tasks.aclose()
        if sandbox is not None:
            sandbox.close()
        for timer in timers:  # a session closed before its background work began
            timer.cancel()
        for work in background:
            work.cancel()
        if manager is not None:
            await manager.aclose()
        await provider.aclose()


def _sandbox(
    options: CliOptions,
    loaded: LoadedConfig,
    setup: SessionSetup,
    policy: PermissionPolicy,
    trusted: bool,
) -> SandboxRuntime:
    """The session's OS sandbox (:mod:`caliban.sandbox`): under Bash when it is on, and
    under the MCP servers and hooks that ask for it; it probes nothing until one needs it."""
    from caliban.sandbox.session import open_sandbox, session_config

    config = session_config(loaded, setup.claude, flag=options.sandbox, trusted=trusted)
    return open_sandbox(config, policy)


def held_back(cwd: Path) -> list[str]:
    """What the project of ``cwd`` holds back until its folder is trusted, one line per
    item (``/p/.mcp.json:2: MCP server evil (sh -c …)``); empty when trusted or nothing is.

    Read with the same loaders a session uses, so the answer matches what it would skip.
    """
    from caliban.claude_code.settings import PROJECT_SCOPES, read_layers, untrusted_filter
    from caliban.mcp.config import load_mcp_config

    root = project_root(cwd)
    if is_trusted(root) or not has_project_files(root):
        return []
    items = [
        f"{file.path}: {', '.join(file.ignored)}"
        for file in load_config(cwd, trusted=False).files
        if file.ignored
    ]
    claude_layers, _ = read_layers(cwd, sources=PROJECT_SCOPES)
    items += [
        f"{layer.source}: {', '.join(dropped)}"
        for layer in claude_layers
        if (dropped := untrusted_filter(layer)[1])
    ]
    items += [
        f"{server.where}: MCP server {server.name} ({server.target})"
        for server in load_mcp_config(cwd, trusted=False).untrusted
    ]
    return items


class _NotifyingApprover:
    """The user's approver, after the Notification hooks (caliban waits for an answer)."""

    def __init__(self, approver: Approver) -> None:
        self.approver = approver
        self.hooks: HookRunner | None = None

    async def __call__(self, request: PermissionRequest) -> PermissionAnswer:
        if self.hooks is not None:
            await self.hooks.notification(
                f"caliban needs your permission to use {request.tool_name}"
            )
        return await self.approver(request)


def _hooks(
    loaded: LoadedConfig,
    claude_hooks: Sequence[tuple[str, object]],
    session: Session,
    root: Path,
) -> HookRunner | None:
    """The session's hook runner from every config file's ``[hooks]`` and every Claude Code
    settings file's ``hooks`` (an untrusted project's are already dropped, with the one trust
    notice); ``None`` when no hook is configured. Notices go to the session."""
    from caliban.hooks import HookRunner, configured_hooks
    from caliban.session.resume import current_transcript

    config, warnings = configured_hooks(
        [
            *((str(f.path), f.data.get("hooks")) for f in loaded.files),
            *claude_hooks,
        ]
    )
    for text in warnings:
        session.emit(Notice(level="warning", text=text))
    if not config:
        return None

    def transcript() -> Path | None:
        current = current_transcript(session)
        return current.path if current is not None else None

    runner = HookRunner(
        config,
        project_dir=root,
        session_id=lambda: session.id,
        transcript_path=transcript,
        permission_mode=session.settings.permissions.mode,
        notice=lambda text: session.emit(Notice(level="warning", text=text)),
    )
    session.hooks = runner
    return runner


FIRST_REQUEST_HEAD_START = 0.05
"""Seconds between the provider SDK being ready and the background work starting: the first
request (built at once) leaves first instead of queueing behind five process launches and a
thread that holds the interpreter lock. Negligible beside a model's latency, which the
background work then overlaps."""


def mcp_manager(servers: Sequence[ServerConfig]) -> McpManager | None:
    """The manager of ``servers``, their last tool lists read from the user's cache; ``None``
    when there are none. Servers with ``sandbox = true`` wait for the session's sandbox
    (:meth:`~caliban.mcp.client.McpManager.confine`)."""
    if not servers:
        return None
    from caliban.mcp.catalog_cache import user_cache
    from caliban.mcp.client import McpManager

    manager = McpManager(servers, catalog_cache=user_cache(), confine_later=True)
    manager.order_settled = False  # until the first request (open_session settles it)
    return manager


def launch_first(manager: McpManager, *, wait_for_all: bool | None) -> FirstRequestWait | None:
    """Launch the servers that are needed first; what a headless run's first request waits
    for (``None`` for an interactive session, ``wait_for_all=None``).

    The REPL launches the servers whose tools are not cached at once, and imports the MCP
    SDK (about 0.6 s) meanwhile: it waits for none, and they boot while the user types. A
    headless run launches at once only those its first request waits for
    (:mod:`caliban.mcp.startup`; every server whose tools are not cached with
    ``tools.wait_for_mcp``): the others are launched once that request has left
    (:func:`_warm_in_background`), so that booting them does not slow it down on a small
    machine. With no servers the MCP SDK is never loaded.
    """
    from caliban.mcp.startup import first_request_wait

    wait = None
    if wait_for_all is None:
        launch = manager.unlisted()
    else:
        wait = first_request_wait(manager, wait_for_all=wait_for_all, environ=os.environ)
        launch = wait.servers
    if launch:
        manager.start(only=launch)
    return wait


def _warm_in_background(
    session: Session, provider_ready: asyncio.Future[None], *, start_servers: bool
) -> None:
    """Once the provider SDK is in (the first request leaves meanwhile): build the search
    index (the first ToolSearch needs it) in a daemon thread, launch the MCP servers nobody
    launched yet and then import the MCP SDK (their connections need it) — one after the
    other, as both need the interpreter lock.

    Headless runs pass ``start_servers=False``: only the servers whose tools are not known
    are launched (their tools join the tool list once listed); a server whose tools are
    cached waits for a call of one, as a run that never calls an MCP tool should not boot
    servers only to stop them after its answer (over a second, and seconds of CPU, with five
    servers). The cache is refreshed by every session that connects: the REPL, ``caliban
    mcp list``, a run that calls a tool."""
    if provider_ready.cancelled():  # the session closed first
        return
    build = session.search_index_builder()
    manager = session.mcp
    launched = False
    if manager is not None:
        unlisted = manager.unlisted()
        if start_servers or unlisted:
            manager.start(import_sdk=False, only=None if start_servers else unlisted)
            launched = True
        # A server that lists new tools changes the catalog: index that one too.
        manager.on_change(lambda _version: _index_in_background(session))

    def work() -> None:
        if build is not None:
            build()
        if manager is not None and launched:
            manager.import_sdk()

    threading.Thread(target=work, name="caliban-warm", daemon=True).start()


def _index_in_background(session: Session) -> None:
    if (build := session.search_index_builder()) is not None:
        threading.Thread(target=build, name="caliban-index", daemon=True).start()


async def _report_failures(session: Session, manager: McpManager) -> None:
    """Warn about each server that fails to start after the first request went out."""
    pending = [name for name, phase in manager.phases().items() if phase.state == "connecting"]
    for name in pending:
        status = await manager.wait_for_state(name, "connected", "failed")
        if status.state == "failed":
            from caliban.mcp.status import describe_failure

            session.emit(Notice(level="warning", text=describe_failure(status)))


def _main_agent(name: str | None, definitions: Sequence[AgentDefinition]) -> AgentDefinition | None:
    """``--agent NAME``'s definition; ``None`` without the flag, or for the built-in
    general-purpose agent, which is the main agent as it is (as in Claude Code)."""
    from caliban.errors import UsageError
    from caliban.subagents import DEFAULT_SUBAGENT

    if name is None:
        return None
    found = next((d for d in definitions if d.name == name), None)
    if found is None:
        known = ", ".join(sorted(d.name for d in definitions))
        raise UsageError(f"--agent {name}: no such agent (defined: {known})")
    return None if found.name == DEFAULT_SUBAGENT and found.source == "builtin" else found


def _agent_tools(builtins: Sequence[Tool], agent: AgentDefinition | None) -> Sequence[Tool]:
    """The built-in tools ``--agent``'s definition allows (all without one)."""
    if agent is None or (agent.tools is None and not agent.disallowed_tools):
        return builtins
    return [tool for tool in builtins if agent.allows(tool.name)]


def _fallbacks(
    names: Sequence[str], choice: ProviderChoice, warnings: list[str]
) -> tuple[str, ...]:
    """``--fallback-model`` names as the provider's models (aliases resolved); an alias that
    means nothing for the provider is left out with a warning."""
    from caliban.claude_code.model_aliases import resolve_alias

    models = []
    for name in names:
        model = resolve_alias(name, choice.provider, os.environ)
        if model is None:
            warnings.append(f"--fallback-model {name!r} means nothing for {choice.provider}")
        elif model != choice.model:
            models.append(model)
    return tuple(models)


def _with_structured_output(
    builtins: Sequence[Tool], schema: Mapping[str, Any] | None
) -> Sequence[Tool]:
    """``--json-schema``: the built-in tools and StructuredOutput."""
    if schema is None:
        return builtins
    from caliban.tools.structured_output import StructuredOutputTool

    return [*builtins, StructuredOutputTool(schema)]


def result_extra(session: Session) -> dict[str, Any]:
    """Extra fields for the headless JSON result: ``context`` (:mod:`caliban.session.context`)."""
    from caliban.session.context import context_report

    return {"context": context_report(session).as_dict()}
