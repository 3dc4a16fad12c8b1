"""The shape of one server's connection, as :class:`~caliban.mcp.client.McpManager` keeps it.

A :class:`Connection` is a fixed :class:`ServerSpec` (what it connects to), a :data:`Phase`
value (connecting, connected, failed, disabled) and a :class:`Listing` (its tools as last
known), each replaced whole when it changes, plus the :class:`Attempt` under way: the
mutable machinery of one try at connecting (its task, events, log and process), owned by
that try's task and dropped with it. :class:`ServerStatus` is the snapshot ``/mcp`` and
``caliban mcp list`` show.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import anyio

from caliban.mcp.config import DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, ServerConfig
from caliban.mcp.logs import ServerLog, log_path
from caliban.mcp.offers import Kind, Offers
from caliban.mcp.results import invalid_answer
from caliban.mcp.stdio import StdioServer
from caliban.mcp.tools import McpTool
from caliban.util.tokens import estimate_json_tokens, json_size

if TYPE_CHECKING:
    from mcp import Client

__all__ = [
    "Attempt",
    "Connected",
    "Connecting",
    "Connection",
    "Disabled",
    "Failed",
    "Listing",
    "Phase",
    "ServerSpec",
    "ServerStatus",
    "State",
    "describe_error",
]

State = Literal["connecting", "connected", "failed", "disabled"]


@dataclass(frozen=True, kw_only=True)
class ServerStatus:
    """What ``caliban mcp list`` and ``/mcp`` show for one server."""

    name: str
    transport: str
    """stdio, http, sse or in-process."""
    state: State
    error: str | None = None
    """Why it failed (``exited with code 1``, ``did not start within 10s``, …)."""
    stderr_tail: tuple[str, ...] = ()
    """The last lines the server wrote to stderr in its latest run."""
    tool_count: int = 0
    tool_chars: int = 0
    """Characters of its tool definitions as sent to the model (compact JSON)."""
    tool_tokens: int = 0
    """Estimated tokens of those definitions (:mod:`caliban.util.tokens`)."""
    protocol_version: str | None = None
    pid: int | None = None
    log_path: Path | None = None
    connect_seconds: float | None = None
    """How long the latest successful connection took."""
    lazy: bool | None = None
    skipped: tuple[str, ...] = ()
    """Tools left out because their definitions are invalid (``'name': where: why``)."""
    needs_login: bool = False
    """It failed because it wants an OAuth login (``caliban mcp login NAME``)."""


@dataclass(frozen=True, kw_only=True)
class ServerSpec:
    """What a connection is to: a configured server, or an SDK server object run in this
    process (tests, embedded servers), or both (the object stands in for the config)."""

    name: str
    config: ServerConfig | None
    in_process: Any = None

    @property
    def transport(self) -> str:
        if self.in_process is not None:
            return "in-process"
        return self.config.transport if self.config else "?"

    @property
    def spawns_process(self) -> bool:
        """caliban runs the server's process itself (stdio)."""
        return self.transport == "stdio"

    @property
    def startup_timeout(self) -> float:
        return self.config.startup_timeout if self.config else DEFAULT_STARTUP_TIMEOUT

    @property
    def tool_timeout(self) -> float:
        return self.config.tool_timeout if self.config else DEFAULT_TOOL_TIMEOUT


@dataclass(frozen=True)
class Connecting:
    state: State = field(default="connecting", init=False)


@dataclass(frozen=True, kw_only=True)
class Connected:
    protocol_version: str | None
    seconds: float
    """How long connecting took."""
    state: State = field(default="connected", init=False)


@dataclass(frozen=True, kw_only=True)
class Failed:
    error: str
    stderr_tail: tuple[str, ...] = ()
    needs_login: bool = False
    state: State = field(default="failed", init=False)


@dataclass(frozen=True)
class Disabled:
    state: State = field(default="disabled", init=False)


Phase: TypeAlias = Connecting | Connected | Failed | Disabled


@dataclass(frozen=True, kw_only=True)
class Listing:
    """A server's tools as last known; their size on the wire is measured when asked (at
    10,000 tools, encoding each twice cost start-up half a second nobody looked at)."""

    tools: tuple[McpTool, ...] = ()
    skipped: tuple[str, ...] = ()
    """Tools left out for invalid definitions."""
    source: Literal["none", "cache", "server"] = "none"
    """Where they come from: nowhere yet, the catalog cache, or the server in this session."""
    instructions: str | None = None
    """What the server said about using it (``initialize``'s ``instructions``)."""
    resources: bool = False
    """The server offers resources (its ``resources`` capability)."""

    @functools.cached_property
    def chars(self) -> int:
        """Characters of the tools' definitions on the wire."""
        return sum(json_size(t.spec.as_dict()) for t in self.tools)

    @functools.cached_property
    def tokens(self) -> int:
        """Tokens of the tools' definitions on the wire, estimated."""
        return sum(estimate_json_tokens(t.spec.as_dict()) for t in self.tools)

    @classmethod
    def of(
        cls,
        tools: tuple[McpTool, ...],
        *,
        source: Literal["cache", "server"],
        skipped: Sequence[str] = (),
        instructions: str | None = None,
        resources: bool = False,
    ) -> Listing:
        return cls(
            instructions=instructions,
            resources=resources,
            tools=tools,
            skipped=tuple(skipped),
            source=source,
        )


class Attempt:
    """One try at connecting a server, from its launch until its task ends."""

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None
        self.scope: anyio.CancelScope | None = None
        """Its start-up's cancel scope, while it starts."""
        self.ready = asyncio.Event()
        """Set once it connected or failed."""
        self.launched = asyncio.Event()
        """Set once its process started, or it starts none (not stdio, waiting for the
        session's sandbox, failed or closed before launching)."""
        self.wake = asyncio.Event()
        """Set to end it: the server went away, or the manager closes."""
        self.refresh = asyncio.Event()
        """Set when the server says its tools changed."""
        self.stale: dict[Kind, asyncio.Event] = {
            "prompts": asyncio.Event(),
            "resources": asyncio.Event(),
        }
        """Set when its prompts or resources are to be listed (again): at first, and when
        the server says they changed."""
        for event in self.stale.values():
            event.set()
        self.log: ServerLog | None = None
        self.stdio: StdioServer | None = None
        self.client: Client | None = None
        """The SDK client, while connected."""
        self.lost = False
        """The connection went away (the next call starts a new attempt)."""
        self.violation: str | None = None
        """How the server broke the protocol so badly that caliban cut the connection."""
        self.needs_login = False
        """The server answered 401 and no stored token could change that."""
        self.asked = False
        """Caliban sent it a request beyond listing its tools (a call, a resource read)."""

    def lose(self) -> None:
        """The server went away: end this attempt (the next call starts another)."""
        self.lost = True
        self.wake.set()

    def record_violation(self, violation: str) -> None:
        """A transport cut the server off for breaking the protocol (said in calls and
        the status)."""
        self.violation = violation

    def abort(self, reason: str) -> None:
        """End the attempt at once with ``reason`` (an OAuth failure: the SDK's transport
        would only log it and leave the handshake waiting)."""
        if self.violation is None:
            self.violation = reason
        if self.scope is not None:
            self.scope.cancel()
        self.lose()

    def require_login(self, reason: str) -> None:
        """End the attempt: the server wants a login (``reason`` says how to give it)."""
        self.needs_login = True
        self.abort(reason)


@dataclass(kw_only=True)
class Connection:
    """One server's connection: its spec, its phase and tools (each swapped whole), and the
    attempt under way (or the last one)."""

    spec: ServerSpec
    phase: Phase = field(default_factory=Connecting)
    listing: Listing = field(default_factory=Listing)
    offers: Offers = field(default_factory=Offers)
    """Its prompts and resources as last listed in this session."""
    attempt: Attempt | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while a call reconnects the server, so two calls start one attempt."""

    @property
    def name(self) -> str:
        return self.spec.name

    def status(self) -> ServerStatus:
        """A snapshot for ``/mcp`` and ``caliban mcp list``."""
        spec, phase, listing, attempt = self.spec, self.phase, self.listing, self.attempt
        in_memory = attempt is not None and attempt.log is not None and attempt.log.in_memory
        return ServerStatus(
            name=spec.name,
            transport=spec.transport,
            state=phase.state,
            error=phase.error if isinstance(phase, Failed) else None,
            stderr_tail=phase.stderr_tail if isinstance(phase, Failed) else (),
            tool_count=len(listing.tools),
            tool_chars=listing.chars,
            tool_tokens=listing.tokens,
            protocol_version=phase.protocol_version if isinstance(phase, Connected) else None,
            pid=attempt.stdio.pid if attempt is not None and attempt.stdio is not None else None,
            log_path=(log_path(spec.name) if spec.transport == "stdio" and not in_memory else None),
            connect_seconds=phase.seconds if isinstance(phase, Connected) else None,
            lazy=spec.config.lazy if spec.config else None,
            skipped=listing.skipped,
            needs_login=isinstance(phase, Failed) and phase.needs_login,
        )


def describe_error(exc: BaseException, config: ServerConfig | None) -> str:
    """One line saying why a connection failed."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        leaves = [e for e in exc.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        exc = (leaves or list(exc.exceptions))[0]
    if isinstance(exc, FileNotFoundError) and config is not None and config.command:
        return f"command not found: {config.command!r} (is it installed and on PATH?)"
    if isinstance(exc, PermissionError) and config is not None and config.command:
        return f"cannot run {config.command!r}: permission denied"
    if (invalid := invalid_answer(exc)) is not None:
        return invalid
    exceptions = sys.modules.get("mcp.shared.exceptions")  # only ever raised once imported
    if exceptions is not None and isinstance(exc, exceptions.MCPError):
        return f"MCP error {exc.code}: {exc.message}"
    text = str(exc) or type(exc).__name__
    name = type(exc).__name__
    if "ConnectError" in name or isinstance(exc, ConnectionError):
        return f"cannot connect to {config.url if config else 'server'}: {text}"
    return f"{name}: {text}"
