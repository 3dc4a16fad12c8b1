"""Connections to MCP servers: start them, list their tools, dispatch calls, shut them down.

:class:`McpManager` runs one long-lived asyncio task per connection attempt. That task enters
the SDK's :class:`mcp.Client` context, lists the tools, reports ``connected``, then waits until
it is told to stop or the server goes away, and leaves the context itself (the SDK's anyio
scopes must be entered and exited in one task). Starting never blocks the caller:
:meth:`McpManager.start` launches the tasks and :meth:`McpManager.wait_ready` awaits them.

Importing the MCP SDK takes most of a second, so this module does not import it: a stdio
server's process is launched first (:mod:`caliban.mcp.stdio`), and its task then waits for
the SDK, imported once in a daemon thread (:mod:`caliban.mcp.sdk`). With a
:class:`~caliban.mcp.catalog_cache.CatalogCache`, each server's last tool list is known before
it starts: :meth:`McpManager.tools` serves it at once, and the server's own listing replaces it
(and the cache) when it differs.

The pieces live beside this module: the stdio transport and its process (``stdio.py``), the
HTTP and SSE transports (``http.py``), server logs (``logs.py``), the SDK import
(``sdk.py``), listing tools and following their changes (``listing.py``), and the shape of a
connection (``connection.py``). A call returns the protocol's answer or a typed failure
(``results.py``); :mod:`caliban.mcp.tools` turns it into the model's tool result.

Tool-list changes arrive as ``notifications/tools/list_changed`` (protocol 2025-11-25 and
earlier) or through a ``subscriptions/listen`` stream (2026-07-28); either way the server's
tools are listed again and :attr:`McpManager.version` moves on when they changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, assert_never

import anyio

from caliban import __version__
from caliban.exec import Confinement
from caliban.mcp import listing, offers
from caliban.mcp.auth import session_auth, uses_oauth
from caliban.mcp.config import ServerConfig
from caliban.mcp.connection import (
    Attempt,
    Connected,
    Connecting,
    Connection,
    Disabled,
    Failed,
    Listing,
    Phase,
    ServerSpec,
    ServerStatus,
    State,
    describe_error,
)
from caliban.mcp.elicit import Elicitor, decline, sdk_callback
from caliban.mcp.http import http_transport, sse_transport
from caliban.mcp.logs import STDERR_RUN_BYTES, ServerLog, log_dir, log_path, read_tail
from caliban.mcp.offers import Kind, Offers, PromptOffer, ResourceOffer
from caliban.mcp.results import (
    CallFailed,
    CallFailure,
    CallOutcome,
    CallTimedOut,
    ConnectionLost,
    ServerDisabled,
    ServerError,
    ServerUnavailable,
    UnknownServer,
    invalid_answer,
)
from caliban.mcp.sdk import SDK, SdkLoader, route_sdk_logging
from caliban.mcp.stdio import KILL_WAIT, STOP_GRACE, StdioServer
from caliban.mcp.tools import McpTool, hashed_name, tool_from_sdk, unique_wire_names

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import IncomingMessage

    from caliban.mcp.catalog_cache import CatalogCache

__all__ = [
    "ConnectMode",
    "Limits",
    "McpManager",
    "ServerStatus",
    "State",
    "log_path",
    "read_tail",
]

ConnectMode = Literal["auto", "legacy"]
_T = TypeVar("_T")

logger = logging.getLogger(__name__)


CACHE_WRITE_DELAY = 2.0
"""Seconds a server's new tool list waits before it is written to the catalog cache (or
until the manager closes, if sooner): the first request, built the moment the last server
listed its tools, leaves first (writing 10,000 tools takes a third of a second of CPU)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """Bounds on what servers may send, and on how often their tools are listed again."""

    max_message_chars: int = 64 * 2**20
    """The longest JSON-RPC message read from a server. A stdio server that writes more
    without a newline is stopped (its result could never be shown whole, and the buffer
    would grow without bound); an HTTP answer past it is an error, not read whole."""
    stderr_run_bytes: int = STDERR_RUN_BYTES
    """How much of a stdio server's stderr one run keeps in its log."""
    refresh_quiet_s: float = 0.25
    """After a tool-list change, wait this long before listing again: a burst (or a flood)
    of ``tools/list_changed`` notifications costs one ``tools/list`` per period."""


class McpManager:
    """Connections to a set of MCP servers, and the tools they offer.

    Use as ``async with McpManager(servers) as manager:`` (which starts the servers without
    waiting for them) or call :meth:`start` and :meth:`aclose` yourself, from one event loop.
    ``in_process`` maps server names to SDK server objects (``MCPServer`` or a lowlevel
    ``Server``) connected in-process, for tests and embedded servers. With ``catalog_cache``,
    each configured server's last tool list is served until the server lists its own.
    ``limits`` bounds what servers may send; ``sdk`` is the loader of the MCP SDK (the
    process's own by default); ``sandbox`` confines the stdio servers whose entry says
    ``sandbox = true`` (with ``confine_later``, they wait until :meth:`confine` gives it).
    ``elicitor`` answers servers' elicitation requests (by default it declines at once, as a
    headless run must).
    """

    def __init__(
        self,
        servers: Sequence[ServerConfig] = (),
        *,
        in_process: Mapping[str, Any] | None = None,
        connect_mode: ConnectMode = "auto",
        catalog_cache: CatalogCache | None = None,
        limits: Limits | None = None,
        sdk: SdkLoader | None = None,
        sandbox: Confinement | None = None,
        confine_later: bool = False,
        elicitor: Elicitor = decline,
    ) -> None:
        self._mode = connect_mode
        self._sandbox = sandbox
        self._sandbox_known = asyncio.Event()
        if not confine_later:
            self._sandbox_known.set()
        self._elicitor = elicitor
        self._cache = catalog_cache
        self._limits = limits or Limits()
        self._sdk = sdk or SDK
        self._conns: dict[str, Connection] = {}
        for config in servers:
            conn = Connection(spec=ServerSpec(name=config.name, config=config))
            if catalog_cache is not None and not config.disabled:
                cached = catalog_cache.load(config, dispatcher=self)
                if cached is not None:
                    conn.listing = Listing.of(
                        cached.tools,
                        source="cache",
                        instructions=cached.instructions,
                        resources=cached.resources,
                    )
            self._conns[config.name] = conn
        for name, server in (in_process or {}).items():
            existing = self._conns.get(name)
            configured = existing.spec.config if existing else None
            spec = ServerSpec(name=name, config=configured, in_process=server)
            self._conns[name] = Connection(spec=spec)
        for conn in self._conns.values():
            if conn.spec.config is not None and conn.spec.config.disabled:
                conn.phase = Disabled()
        self.order_settled = True
        """Whether the tool list's order is settled: tools offered from now on keep their
        places and new ones go at the end (:class:`~caliban.mcp.toolset.McpToolset`). A
        session unsettles it until its first request (:meth:`settle_order`), so that the
        servers it waited for are in config order, whichever listed first."""
        self._version = 0
        self._listeners: list[Callable[[int], None]] = []
        self._changed = asyncio.Event()
        self._offers_version = 0
        self._offers_changed = asyncio.Event()
        self._offers_wanted = asyncio.Event()
        self._tools_cache: tuple[int, tuple[McpTool, ...]] | None = None
        self._unwritten: dict[str, Callable[[], None]] = {}
        self._write_timer: asyncio.TimerHandle | None = None
        self._status_pulse = asyncio.Event()
        self._started = False
        self._closed = False
        self._hold_sdk = False
        self._warnings: list[str] = []
        self._warning_listeners: list[Callable[[str], None]] = []
        self._unlogged_warned = False

    # -- lifecycle

    async def __aenter__(self) -> McpManager:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def start(self, *, import_sdk: bool = True, only: Collection[str] | None = None) -> None:
        """Start every enabled server (or those of ``only``) in the background; returns at
        once.

        Stdio servers' processes are launched first; their connections wait for the MCP SDK.
        ``import_sdk=False`` leaves its import to a later :meth:`import_sdk` (or to the
        first wait for a server or call of a tool), so it does not compete with more urgent
        start-up work. Waiting for a server or calling a tool starts a manager nobody
        started (started with ``only``, it starts the rest then).
        """
        if self._started or self._closed:
            return
        launched = any(conn.attempt is not None for conn in self._conns.values())
        if only is None:
            self._started = True
        if import_sdk or not launched:
            self._hold_sdk = not import_sdk
        route_sdk_logging(__name__, listing.logger.name)
        for conn in self._conns.values():
            wanted = only is None or conn.name in only
            if wanted and conn.attempt is None and not isinstance(conn.phase, Disabled):
                self._launch(conn)

    def confine(self, sandbox: Confinement) -> None:
        """The sandbox of the stdio servers whose entry says ``sandbox = true``: those
        launched before it was known start now."""
        self._sandbox = sandbox
        self._sandbox_known.set()

    async def wait_launched(self) -> None:
        """Wait until every server launched so far has started its process (or starts none:
        not stdio, waiting for the sandbox, failed): the caller's next work then runs while
        they boot, not before their launches."""
        for conn in self._conns.values():
            if conn.attempt is not None:
                await conn.attempt.launched.wait()

    def settle_order(self) -> None:
        """The first request is about to be built: the tool list's order counts from now."""
        self.order_settled = True

    def import_sdk(self) -> None:
        """Start importing the MCP SDK in a daemon thread, if nothing has yet."""
        self._hold_sdk = False
        self._sdk.start()

    async def wait_ready(self, timeout: float | None = None) -> list[ServerStatus]:  # noqa: ASYNC109
        """Wait until every server is connected or has failed (or ``timeout`` passes)."""
        return await self.wait_listed(list(self._conns), timeout)

    def unlisted(self) -> tuple[str, ...]:
        """Servers still starting whose tools are not known yet (not listed, none cached)."""
        return tuple(
            conn.name
            for conn in self._conns.values()
            if isinstance(conn.phase, Connecting) and conn.listing.source == "none"
        )

    async def wait_listed(
        self,
        names: Sequence[str],
        timeout: float | None = None,  # noqa: ASYNC109 - an overall bound, applied with anyio
    ) -> list[ServerStatus]:
        """Wait until each of ``names`` is connected or has failed (each is bounded by its
        own start-up timeout; ``timeout`` bounds the whole wait), launching those nobody
        launched. Returns their statuses."""
        conns = [self._conns[name] for name in names]
        if any(isinstance(conn.phase, Connecting) for conn in conns):
            self.start(only=names)
            # After the launches: a thread importing meanwhile would hold them up.
            self._hold_sdk = False
            asyncio.get_running_loop().call_soon(self._sdk.start)
        with anyio.move_on_after(math.inf if timeout is None else timeout):
            for conn in conns:
                if conn.attempt is not None:
                    await conn.attempt.ready.wait()
        return [conn.status() for conn in conns]

    async def aclose(self) -> None:
        """Stop every server and wait until their processes are gone."""
        self._closed = True
        self._write_cache()
        await _stopped(
            [_stop(conn.attempt, conn.phase) for conn in self._conns.values() if conn.attempt]
        )

    async def disable(self, name: str) -> None:
        """Switch server ``name`` off in this session: it stops, its tools, prompts and
        resources leave, and calls say it is disabled (:meth:`enable` undoes it)."""
        conn = self._conns[name]
        if isinstance(conn.phase, Disabled):
            return
        attempt, phase = conn.attempt, conn.phase
        conn.attempt = None  # its end is no longer this connection's news
        self._set_phase(conn, Disabled())
        conn.listing, conn.offers = Listing(), Offers()
        self._offers_version += 1
        self._offers_changed.set()
        self._bump()
        if attempt is not None:
            await _stopped([_stop(attempt, phase)])

    async def enable(self, name: str) -> ServerStatus:
        """Start server ``name`` again after :meth:`disable` (or a ``disabled`` entry), and
        wait until it is connected or has failed."""
        conn = self._conns[name]
        if isinstance(conn.phase, Disabled) and not self._closed:
            self.start()  # the others, if nobody has yet
            self.import_sdk()
            self._launch(conn)
        if conn.attempt is not None:
            await conn.attempt.ready.wait()
        return conn.status()

    # -- state

    @property
    def version(self) -> int:
        """Moves on whenever the set of tools (or their definitions) changes."""
        return self._version

    def on_warning(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(text)`` with each warning for the user (those given before are
        replayed), such as a server log that cannot be written."""
        self._warning_listeners.append(callback)
        for text in self._warnings:
            callback(text)

    def _warn(self, text: str) -> None:
        self._warnings.append(text)
        for callback in list(self._warning_listeners):
            callback(text)

    def _warn_unlogged(self, problem: str) -> None:
        """Once per manager: the servers run without log files (they still start)."""
        if self._unlogged_warned:
            return
        self._unlogged_warned = True
        self._warn(
            f"cannot write MCP server logs in {log_dir()} ({problem}); servers run without "
            "a log file and only their last stderr lines are kept"
        )

    def set_elicitor(self, elicitor: Elicitor) -> None:
        """Answer servers' elicitation requests with ``elicitor`` from now on (the REPL's,
        once it is up)."""
        self._elicitor = elicitor

    def on_change(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Call ``callback(version)`` after each tool-list change; returns an unsubscribe."""
        self._listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    async def wait_for_state(self, name: str, *states: State) -> ServerStatus:
        """Wait until server ``name`` is in one of ``states``."""
        while self._conns[name].phase.state not in states:
            await self._status_pulse.wait()
        return self.status(name)

    async def wait_for_change(self, since: int) -> int:
        """Wait until :attr:`version` differs from ``since``; returns the new version."""
        while self._version == since:
            self._changed.clear()
            await self._changed.wait()
        return self._version

    def _bump(self) -> None:
        self._version += 1
        self._tools_cache = None
        self._changed.set()
        for callback in list(self._listeners):
            try:
                callback(self._version)
            except Exception:
                logger.exception("MCP tool-change listener failed")

    def tools(self) -> tuple[McpTool, ...]:
        """Tools of every server that has listed them (or whose tools are cached): config
        order, then the server's order (the toolsets keep tools offered before in their
        places, so a server that lists late adds its tools at the end of the tool list).

        A server that died keeps its last tool list, so calling one of its tools reconnects.
        """
        if self._tools_cache is None or self._tools_cache[0] != self._version:
            tools: list[McpTool] = []
            seen: set[str] = set()
            for conn in self._conns.values():
                for tool in conn.listing.tools:
                    if tool.name in seen:  # server "a" tool "b__c" vs server "a__b" tool "c"
                        tool = dataclasses.replace(
                            tool, name=hashed_name(tool.name, tool.server, tool.tool_name)
                        )
                    seen.add(tool.name)
                    tools.append(tool)
            self._tools_cache = (self._version, tuple(tools))
        return self._tools_cache[1]

    def server_names(self) -> list[str]:
        return list(self._conns)

    def server_config(self, name: str) -> ServerConfig | None:
        conn = self._conns.get(name)
        return conn.spec.config if conn else None

    def status(self, name: str) -> ServerStatus:
        return self._conns[name].status()

    def instructions(self, name: str) -> str | None:
        """What server ``name`` said about using it, as last known (cached or live)."""
        conn = self._conns.get(name)
        return conn.listing.instructions if conn is not None else None

    def serves_resources(self) -> bool:
        """Whether any enabled server offers resources (as last known, cached or live)."""
        return any(
            conn.listing.resources and not isinstance(conn.phase, Disabled)
            for conn in self._conns.values()
        )

    def server_instructions(self) -> tuple[tuple[str, str], ...]:
        """``(server, instructions)`` of every enabled server that gave some, config order."""
        return tuple(
            (conn.name, conn.listing.instructions)
            for conn in self._conns.values()
            if conn.listing.instructions and not isinstance(conn.phase, Disabled)
        )

    def statuses(self) -> list[ServerStatus]:
        return [conn.status() for conn in self._conns.values()]

    def phases(self) -> dict[str, Phase]:
        """Each server's phase (connecting, connected, failed, disabled): what a status
        says without measuring the server's tools, which at 10,000 tools takes a second."""
        return {name: conn.phase for name, conn in self._conns.items()}

    def follow_offers(self) -> None:
        """List every server's prompts and resources once it has connected, and again when
        it says they changed (the REPL completes them; a ``-p`` run has no use for them)."""
        self._offers_wanted.set()

    def prompts(self) -> tuple[PromptOffer, ...]:
        """The prompts of every enabled server, as last listed (no request is made; empty
        until :meth:`follow_offers`)."""
        return tuple(p for conn in self._enabled() for p in conn.offers.prompts)

    def resources(self) -> tuple[ResourceOffer, ...]:
        """The resources of every enabled server, as last listed (no request is made;
        empty until :meth:`follow_offers`)."""
        return tuple(r for conn in self._enabled() for r in conn.offers.resources)

    def _enabled(self) -> list[Connection]:
        return [conn for conn in self._conns.values() if not isinstance(conn.phase, Disabled)]

    @property
    def offers_version(self) -> int:
        """Moves on whenever a server's prompts or resources change."""
        return self._offers_version

    async def wait_for_offers(self, since: int) -> int:
        """Wait until :attr:`offers_version` differs from ``since``; returns the new one."""
        while self._offers_version == since:
            self._offers_changed.clear()
            await self._offers_changed.wait()
        return self._offers_version

    # -- connections

    def _launch(self, conn: Connection) -> None:
        attempt = conn.attempt = Attempt()
        self._set_phase(conn, Connecting())
        loop = asyncio.get_running_loop()
        attempt.task = loop.create_task(self._run(conn, attempt), name=f"mcp-server-{conn.name}")
        loop.call_later(conn.spec.startup_timeout, self._startup_expired, conn, attempt)

    def _startup_expired(self, conn: Connection, attempt: Attempt) -> None:
        # Report at once; the attempt's task tears it down in the background.
        if conn.attempt is not attempt or not isinstance(conn.phase, Connecting):
            return
        tail = attempt.log.tail() if attempt.log is not None else ()
        error = f"did not finish starting within {conn.spec.startup_timeout:g}s"
        self._set_phase(conn, Failed(error=error, stderr_tail=tail))
        if attempt.stdio is not None:
            attempt.stdio.grace = 0.0
        attempt.ready.set()

    def _set_phase(self, conn: Connection, phase: Phase) -> None:
        conn.phase = phase
        pulse, self._status_pulse = self._status_pulse, asyncio.Event()
        pulse.set()

    async def _run(self, conn: Connection, attempt: Attempt) -> None:
        if self._closed:  # closed before this task got to run
            attempt.launched.set()
            attempt.ready.set()
            return
        spec = conn.spec
        started = time.perf_counter()
        reason: str | None = None
        timed_out = False
        try:
            if spec.config is not None and spec.in_process is None:
                attempt.log, problem = ServerLog.open(spec.name)
                if problem is not None:
                    self._warn_unlogged(problem)
                attempt.log.note(f"starting {spec.config.transport} server: {spec.config.target}")
            with anyio.CancelScope() as scope:
                attempt.scope = scope
                scope.deadline = anyio.current_time() + spec.startup_timeout
                async with AsyncExitStack() as stack:
                    if spec.spawns_process:
                        assert spec.config is not None and attempt.log is not None
                        if spec.config.sandbox and not self._sandbox_known.is_set():
                            attempt.launched.set()
                            await self._sandbox_known.wait()
                        # The server boots while the SDK is imported.
                        attempt.stdio = await StdioServer.start(
                            spec.config,
                            attempt.log,
                            stderr_run_bytes=self._limits.stderr_run_bytes,
                            sandbox=self._sandbox,
                        )
                        stack.push_async_callback(attempt.stdio.stop)
                    attempt.launched.set()
                    await self._sdk.wait(start=not self._hold_sdk)
                    client = await stack.enter_async_context(self._client(conn, attempt))
                    # Subscribe before listing, so no change can fall between the two.
                    subscription = await listing.subscribe(stack, conn.name, client)
                    changed = await self._list_tools(conn, client)
                    scope.deadline = math.inf
                    if conn.attempt is not attempt or self._closed:
                        return
                    attempt.client = client
                    seconds = time.perf_counter() - started
                    self._set_phase(
                        conn, Connected(protocol_version=client.protocol_version, seconds=seconds)
                    )
                    attempt.ready.set()
                    if attempt.log is not None:
                        tools = len(conn.listing.tools)
                        attempt.log.note(f"connected ({client.protocol_version}, {tools} tools)")
                    if changed:  # the same list as the cache's: the catalog stays as it is
                        self._bump()
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._refresher, conn, attempt, client)
                        for kind in attempt.stale:
                            tg.start_soon(self._offers_refresher, conn, attempt, client, kind)
                        if subscription is not None:
                            tg.start_soon(listing.follow, client, subscription, attempt)
                        await attempt.wake.wait()
                        tg.cancel_scope.cancel()
                    if attempt.lost and not self._closed:
                        reason = "the server closed the connection"
            if scope.cancelled_caught and not self._closed and attempt.violation is None:
                timed_out = True
                reason = f"did not finish starting within {spec.startup_timeout:g}s"
        except Exception as exc:
            reason = describe_error(exc, spec.config)
        finally:
            await self._ended(conn, attempt, reason, timed_out=timed_out)

    async def _ended(
        self, conn: Connection, attempt: Attempt, reason: str | None, *, timed_out: bool
    ) -> None:
        """Record how an attempt ended: its log closed, and unless a newer attempt took over,
        the connection failed (with the server's last stderr lines) or left as it is."""
        attempt.launched.set()
        if attempt.violation is not None:
            reason = attempt.violation
        elif attempt.stdio is not None and (how := attempt.stdio.exit_reason()) is not None:
            reason = how if isinstance(conn.phase, Connected) else f"{how} while starting"
        if attempt.stdio is not None:
            await attempt.stdio.drained()
        tail: tuple[str, ...] = ()
        if attempt.log is not None:
            tail = attempt.log.tail()
            attempt.log.note(f"stopped: {reason}" if reason else "stopped")
            attempt.log.close()
        attempt.client = None
        attempt.scope = None
        if conn.attempt is attempt:
            if self._closed:
                if isinstance(conn.phase, Connecting):
                    error = "stopped before it finished starting"
                    self._set_phase(conn, Failed(error=error, stderr_tail=tail))
            elif reason is not None:
                if isinstance(conn.phase, Connecting) and not timed_out:
                    self._forget_cached(conn)
                # A timeout already reported keeps its message.
                error = conn.phase.error if isinstance(conn.phase, Failed) else reason
                failed = Failed(error=error, stderr_tail=tail, needs_login=attempt.needs_login)
                self._set_phase(conn, failed)
            attempt.ready.set()

    def _forget_cached(self, conn: Connection) -> None:
        """A server that fails to start is not announced from the cache next time (a slow
        one is: it timed out, it may start next time)."""
        if self._cache is not None and conn.spec.config is not None:
            self._unwritten.pop(conn.name, None)
            self._cache.forget(conn.spec.config)

    def _write_later(self, name: str, write: Callable[[], None]) -> None:
        """Write a server's entry :data:`CACHE_WRITE_DELAY` seconds from now."""
        self._unwritten[name] = write
        if self._write_timer is None:
            loop = asyncio.get_running_loop()
            self._write_timer = loop.call_later(CACHE_WRITE_DELAY, self._write_cache)

    def _write_cache(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        unwritten, self._unwritten = self._unwritten, {}
        for write in unwritten.values():
            write()

    def _client(self, conn: Connection, attempt: Attempt) -> Client:
        import mcp_types
        from mcp import Client

        async def handle(message: IncomingMessage) -> None:
            if isinstance(message, mcp_types.ToolListChangedNotification):
                attempt.refresh.set()
            elif isinstance(message, mcp_types.PromptListChangedNotification):
                attempt.stale["prompts"].set()
            elif isinstance(message, mcp_types.ResourceListChangedNotification):
                attempt.stale["resources"].set()

        return Client(
            self._transport(conn.spec, attempt),
            mode=self._mode,
            cache=None,
            message_handler=handle,
            client_info=mcp_types.Implementation(name="caliban", version=__version__),
            elicitation_callback=sdk_callback(
                conn.name, lambda request: self._elicitor(request), lambda: conn.spec.tool_timeout
            ),
        )

    def _transport(
        self, spec: ServerSpec, attempt: Attempt
    ) -> Any | AbstractAsyncContextManager[tuple[Any, Any]]:
        """What the SDK's client connects through: an in-process server object, or the
        streams of a transport."""
        if spec.in_process is not None:
            return spec.in_process
        config = spec.config
        assert config is not None
        limit = self._limits.max_message_chars
        violation = attempt.record_violation
        match config.transport:
            case "stdio":
                assert attempt.stdio is not None
                return attempt.stdio.transport(
                    max_message=limit, on_exit=attempt.lose, on_violation=violation
                )
            case "http" | "sse":
                auth = None
                if uses_oauth(config):
                    auth = session_auth(
                        config, on_failure=attempt.abort, on_login_required=attempt.require_login
                    )
                transport = http_transport if config.transport == "http" else sse_transport
                return transport(
                    config,
                    max_message=limit,
                    on_violation=violation,
                    auth=auth,
                    on_auth_failure=attempt.abort,
                )
            case _:
                assert_never(config.transport)

    async def _list_tools(self, conn: Connection, client: Client) -> bool:
        """List the server's tools into ``conn`` (and the cache); True when they, its
        instructions or its offer of resources changed."""
        listed, skipped = await listing.fetch_tools(client)
        if skipped and skipped != list(conn.listing.skipped):
            logger.warning("%s: skipped tools with invalid definitions: %s", conn.name, skipped)
        names = unique_wire_names(conn.name, [t.name for t in listed])
        timeout = conn.spec.tool_timeout
        tools = tuple(
            tool_from_sdk(conn.name, t, wire=w, timeout=timeout, dispatcher=self)
            for t, w in zip(listed, names, strict=True)
        )
        first = conn.listing.source != "server"
        instructions = client.instructions or None
        capabilities = client.server_capabilities
        resources = capabilities is not None and capabilities.resources is not None
        old = conn.listing
        changed = (tools, instructions, resources) != (old.tools, old.instructions, old.resources)
        if tools != old.tools:
            conn.listing = Listing.of(
                tools,
                source="server",
                skipped=skipped,
                instructions=instructions,
                resources=resources,
            )
        else:
            conn.listing = dataclasses.replace(
                old,
                source="server",
                skipped=tuple(skipped),
                instructions=instructions,
                resources=resources,
            )
        config = conn.spec.config
        if (changed or first) and self._cache is not None and config is not None:
            write = functools.partial(
                self._cache.store, config, tools, instructions, resources=resources
            )
            self._write_later(conn.name, write)
        return changed

    async def _refresher(self, conn: Connection, attempt: Attempt, client: Client) -> None:
        while True:
            await attempt.refresh.wait()
            await asyncio.sleep(self._limits.refresh_quiet_s)
            attempt.refresh.clear()
            try:
                with anyio.fail_after(conn.spec.startup_timeout):
                    changed = await self._list_tools(conn, client)
            except Exception as exc:
                logger.warning("re-listing tools of %s failed: %s", conn.name, exc)
                continue
            if changed:
                self._bump()

    async def _offers_refresher(
        self, conn: Connection, attempt: Attempt, client: Client, kind: Kind
    ) -> None:
        """List the server's prompts or resources now, and again whenever it says they
        changed (at most once per quiet period, as tools), once someone follows them."""
        stale = attempt.stale[kind]
        await self._offers_wanted.wait()
        while True:
            await stale.wait()
            stale.clear()
            try:
                with anyio.fail_after(conn.spec.startup_timeout):
                    listed = await offers.fetch(client, conn.name, kind)
            except Exception as exc:
                logger.warning("listing %s of %s failed: %s", kind, conn.name, exc)
                listed = ()
            if listed != getattr(conn.offers, kind):
                conn.offers = dataclasses.replace(conn.offers, **{kind: listed})
                self._offers_version += 1
                self._offers_changed.set()
            await asyncio.sleep(self._limits.refresh_quiet_s)

    async def reconnect(self, name: str) -> ServerStatus:
        """Connect server ``name`` again (after a login, or to pick up a restarted server):
        the running attempt is ended and a new one awaited."""
        conn = self._conns[name]
        if conn.attempt is not None and not isinstance(conn.phase, Connecting | Disabled):
            conn.attempt.lose()
        await self._connected(conn)
        return conn.status()

    async def _connected(self, conn: Connection) -> tuple[Attempt, Client] | None:
        """The live attempt and its client, reconnecting a server that died or failed."""
        live = self._live(conn)
        if live is not None:
            return live
        async with conn.lock:
            live = self._live(conn)
            if live is not None:
                return live
            if isinstance(conn.phase, Disabled) or self._closed:
                return None
            if not self._started:
                self.start()
            self.import_sdk()  # a call needs its server now
            if not isinstance(conn.phase, Connecting):
                old = conn.attempt
                if old is not None and old.task is not None and not old.task.done():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(old.task), STOP_GRACE + KILL_WAIT)
                self._launch(conn)
            assert conn.attempt is not None
            await conn.attempt.ready.wait()
            return self._live(conn)

    @staticmethod
    def _live(conn: Connection) -> tuple[Attempt, Client] | None:
        attempt = conn.attempt
        if attempt is None or attempt.client is None or attempt.lost:
            return None
        return attempt, attempt.client

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        timeout: float | None = None,  # noqa: ASYNC109 - per-call limit, applied with fail_after
    ) -> CallOutcome:
        """Call ``tool`` (its original name) on ``server``: the server's ``CallToolResult``,
        or a :data:`~caliban.mcp.results.CallFailure` saying why there is none."""

        async def send(client: Client) -> Any:
            return await client.call_tool(tool, dict(arguments))

        return await self.request(server, tool, send, timeout)

    async def request(
        self,
        server: str,
        what: str,
        send: Callable[[Client], Awaitable[_T]],
        timeout: float | None = None,  # noqa: ASYNC109 - per-request limit, applied with fail_after
    ) -> _T | CallFailure:
        """``send(client)`` to ``server`` (reconnecting it if it died), bounded by ``timeout``
        (the server's ``tool_timeout`` by default): its answer, or a
        :data:`~caliban.mcp.results.CallFailure` naming ``what`` was asked."""
        tool = what
        conn = self._conns.get(server)
        if conn is None:
            return UnknownServer(server=server)
        if isinstance(conn.phase, Disabled):
            return ServerDisabled(server=server)
        live = await self._connected(conn)
        if live is None:
            phase = conn.phase
            reason = phase.error if isinstance(phase, Failed) else phase.state
            tail = phase.stderr_tail if isinstance(phase, Failed) else ()
            return ServerUnavailable(server=server, reason=reason, stderr_tail=tail)
        attempt, client = live
        attempt.asked = True
        from mcp.shared.exceptions import MCPError

        limit = timeout if timeout is not None else conn.spec.tool_timeout
        try:
            with anyio.fail_after(limit):
                return await send(client)
        except TimeoutError:
            return CallTimedOut(server=server, tool=tool, seconds=limit)
        except MCPError as exc:
            if _connection_closed(exc, conn.spec, attempt):
                attempt.lose()
                return ConnectionLost(
                    server=server,
                    tool=tool,
                    violation=attempt.violation,
                    restarts_process=conn.spec.spawns_process,
                )
            return ServerError(server=server, tool=tool, code=exc.code, message=exc.message)
        except Exception as exc:
            detail = invalid_answer(exc) or str(exc)
            return CallFailed(server=server, tool=tool, detail=detail)


def _stop(attempt: Attempt, phase: Phase) -> asyncio.Task[None] | None:
    """Tell ``attempt`` to end (at once, if it is still starting); the task to wait for."""
    attempt.wake.set()
    if attempt.stdio is not None and not attempt.asked:
        # Nothing to save in a server that was only asked for its tools (or never
        # started): stopped at once, not after a grace period (Python servers take
        # a second to leave after stdin closes, on a busy machine more).
        attempt.stdio.grace = 0.0
    if isinstance(phase, Connecting) and attempt.scope is not None:
        attempt.scope.cancel()
    return attempt.task


async def _stopped(tasks: Sequence[asyncio.Task[None] | None]) -> None:
    """Wait for stopping attempts' tasks (their processes gone), bounded."""
    running = [task for task in tasks if task is not None]
    if not running:
        return
    _, pending = await asyncio.wait(running, timeout=STOP_GRACE + 2 * KILL_WAIT + 3)
    for task in pending:  # only a wedged SDK gets here
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=2)


def _connection_closed(exc: Any, spec: ServerSpec, attempt: Attempt) -> bool:
    """Whether an SDK error means the connection is gone, not that the server answered with
    an error: -32000 is the SDK's code for a closed connection and also the first of JSON-RPC's
    server-defined codes, which servers use for their own failures."""
    import mcp_types

    if attempt.lost:
        return True
    if exc.code != mcp_types.CONNECTION_CLOSED:
        return False
    if spec.spawns_process:
        return False  # the stdio transport says itself when the server goes away
    return bool(exc.message == "Connection closed")
