"""``WaitForMcpServers``: Claude Code's tool for waiting on MCP servers still starting.

The first request does not wait for servers whose tools are not known yet (nothing cached),
so while one is starting the model is offered this tool, with Claude Code's name,
description, input and answer: it waits for the servers it names (default: every server
still starting), each within its own ``startup_timeout``, and says which connected, failed,
need a login, are disabled or are unknown. A server's tools join the tool list, at its end,
the moment it has listed them.

:class:`WaitToolset` offers it. Unlike Claude Code, which drops the tool once no server is
pending, it stays offered once it has been, so the tool list only grows at its end (prompt
caches survive). Under lazy loading ToolSearch waits for starting servers itself, so this
tool is not offered while ToolSearch is (as in Claude Code). A call of a tool of a server
still starting waits for that server, then runs (Claude Code fails it, naming this tool):
:class:`StartingServersToolset` finds such tools.

The headless frames import this module on every run for :data:`WAIT_TOOL_NAME`, so it
imports MCP code only when used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from caliban.tools.base import (
    BUILTIN,
    BuiltinTool,
    CallContext,
    Invocation,
    PendingTool,
    ToolOutput,
)
from caliban.toolsets.base import ChildScope, ToolsetView
from caliban.toolsets.filtered import FilteredToolset

if TYPE_CHECKING:
    from caliban.events import AgentEvent
    from caliban.mcp.connection import Phase, ServerStatus
    from caliban.messages import ToolSpec
    from caliban.tools.base import Tool, ToolOrigin

__all__ = [
    "WAIT_TOOL_NAME",
    "PendingServers",
    "StartingServersToolset",
    "WaitForMcpServers",
    "WaitToolset",
]

WAIT_TOOL_NAME = "WaitForMcpServers"

DESCRIPTION = """\
Wait for MCP servers that are still connecting and whose tools are not
yet in your tool list. Pass `servers` to wait for specific ones, or omit
it to wait for all pending servers.

If the user's request needs tools from a still-connecting server, call this
tool to wait for it. Once it connects, its tools will be added to your tool
list and you can use them directly. Returns ready=true when servers are
ready, ready=false if they failed to connect, need authentication, or are
disabled.

You do not need to ask the user for confirmation to use this tool."""


class PendingServers(Protocol):
    """The servers as this tool needs them (:class:`caliban.mcp.client.McpManager`)."""

    def unlisted(self) -> tuple[str, ...]:
        """Servers still starting whose tools are not known yet."""
        ...

    async def wait_listed(
        self,
        names: Sequence[str],
        timeout: float | None = None,  # noqa: ASYNC109 - an overall bound
    ) -> list[ServerStatus]:
        """Wait until each of ``names`` is connected or has failed."""
        ...

    def phases(self) -> dict[str, Phase]:
        """Each server's phase."""
        ...

    def server_names(self) -> list[str]:
        """Every configured server."""
        ...

    def status(self, name: str) -> ServerStatus:
        """Server ``name``'s state and tool count."""
        ...


class WaitInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    servers: list[str] = Field(
        default_factory=list, description="Server names to wait for (default: all pending)"
    )


class WaitForMcpServers(BuiltinTool[WaitInput]):
    name = WAIT_TOOL_NAME
    description = DESCRIPTION
    input_model = WaitInput
    read_only = True  # it only waits (allowed in plan mode, never asks)

    def __init__(self, servers: PendingServers) -> None:
        self.servers = servers

    async def run(self, args: WaitInput, ctx: CallContext) -> ToolOutput:
        wanted = list(dict.fromkeys(args.servers)) or list(self.servers.unlisted())
        starting = [name for name in wanted if name in self.servers.unlisted()]
        if starting:
            # Each is bounded by its own startup_timeout, after which it counts as failed.
            await self.servers.wait_listed(starting)
        data = _sorted(wanted, self.servers.phases(), self.servers.unlisted())
        output = ToolOutput.text(_answer(data), data=data, summary=_summary(data))
        return output if data["ready"] else replace(output, is_error=True)


def _sorted(
    wanted: Sequence[str], phases: Mapping[str, Phase], unlisted: Sequence[str]
) -> dict[str, Any]:
    """Claude Code's answer data: each server named under what it is now."""
    from caliban.mcp.connection import Disabled, Failed

    groups: dict[str, list[str]] = {
        key: [] for key in ("connected", "failed", "stillPending", "needsAuth", "disabled")
    }
    unknown = []
    for name in wanted:
        phase = phases.get(name)
        if phase is None:
            unknown.append(name)
        elif isinstance(phase, Disabled):
            groups["disabled"].append(name)
        elif isinstance(phase, Failed):
            groups["needsAuth" if phase.needs_login else "failed"].append(name)
        elif name in unlisted:
            groups["stillPending"].append(name)
        else:  # listed, or known from the cache (a call of one waits for its server)
            groups["connected"].append(name)
    ready = not unknown and all(not names for key, names in groups.items() if key != "connected")
    return {"ready": ready, **groups, "unknown": unknown}


_LINES = (
    ("connected", "Connected (their tools are now available \u2014 call them directly)"),
    ("failed", "Failed to connect"),
    ("stillPending", "Still connecting (try again or proceed without)"),
    ("needsAuth", "Needs authentication (ask the user to run /mcp)"),
    ("disabled", "Disabled (ask the user to enable via /mcp)"),
    ("unknown", "Unknown (no MCP server with this name is configured)"),
)


def _answer(data: Mapping[str, Any]) -> str:
    """The text Claude Code answers with: ``ready: …`` and a line per non-empty group."""
    lines = [f"ready: {'true' if data['ready'] else 'false'}"]
    lines += [f"{label}: {', '.join(data[key])}" for key, label in _LINES if data[key]]
    return "\n".join(lines)


def _summary(data: Mapping[str, Any]) -> str:
    """The line under the call in the REPL: ``connected: a, b · failed: c``."""
    labels = {"connected": "connected", "failed": "failed", "stillPending": "still starting"}
    labels |= {"needsAuth": "needs a login", "disabled": "disabled", "unknown": "unknown"}
    parts = [f"{label}: {', '.join(data[key])}" for key, label in labels.items() if data[key]]
    return " \u00b7 ".join(parts) or "no server was starting"


class _StillStarting(PendingTool):
    """A tool of a server still starting, called before the server listed its tools: the
    call waits for the server (within its ``startup_timeout``), then runs if the server
    has the tool. Claude Code fails such a call at once ("… is still connecting. Call
    WaitForMcpServers …"), costing the model a turn."""

    origin: ToolOrigin = BUILTIN
    read_only = False

    def __init__(self, name: str, server: str, servers: PendingServers) -> None:
        self.name = name
        self.server = server
        self.servers = servers

    @property
    def spec(self) -> ToolSpec:
        from caliban.messages import ToolSpec

        return ToolSpec(name=self.name, description="", input_schema={"type": "object"})

    def bind(self, arguments: Mapping[str, Any]) -> Invocation | str:
        return f"No such tool available: {self.name}."  # the pipeline waits for it first

    async def arrival(self) -> str | None:
        from caliban.mcp.connection import Failed

        await self.servers.wait_listed([self.server])
        phase = self.servers.phases().get(self.server)
        if isinstance(phase, Failed):
            return (
                f"No such tool available: {self.name}. The MCP server '{self.server}' "
                f"is not available ({phase.error})."
            )
        return None


class WaitToolset:
    """Offers :class:`WaitForMcpServers` from the first request made while a server is
    still starting without known tools, and from then on for the session; never while
    ``tool_search_offered()`` (lazy loading's ToolSearch waits for servers itself)."""

    def __init__(
        self,
        servers: PendingServers,
        *,
        tool_search_offered: Callable[[], bool] = lambda: False,
    ) -> None:
        self.servers = servers
        self.tool = WaitForMcpServers(servers)
        self.tool_search_offered = tool_search_offered
        self._tools: tuple[Tool, ...] = (self.tool,)  # one tuple: the combined list caches
        self._offering = False

    def offered(self) -> tuple[Tool, ...]:
        if not self._offering and self.servers.unlisted() and not self.tool_search_offered():
            self._offering = True
        return self._tools if self._offering else ()

    def find(self, name: str) -> Tool | None:
        return self.tool if name == self.tool.name and self._offering else None

    def names(self) -> tuple[str, ...]:
        return (self.tool.name,) if self._offering else ()

    def system_addendum(self) -> str:
        return ""

    def note_call(self, name: str) -> AgentEvent | None:
        return None

    def describe(self) -> ToolsetView:
        return ToolsetView(offered=self.offered(), addendum="")

    def for_child(self, scope: ChildScope) -> FilteredToolset:
        return FilteredToolset(self, scope.allows)


class StartingServersToolset:
    """Offers nothing; finds the tools of servers whose tools are not known yet (still
    starting, or failed before listing any), as :class:`_StillStarting` placeholders that
    the call pipeline waits for. Last among the parts: asked only for names nobody has."""

    def __init__(self, servers: PendingServers) -> None:
        self.servers = servers

    def offered(self) -> tuple[Tool, ...]:
        return ()

    def find(self, name: str) -> Tool | None:
        from caliban.mcp.connection import Failed
        from caliban.mcp.tools import wire_prefix

        for server in self.servers.server_names():
            if not name.startswith(wire_prefix(server)):
                continue
            starting = server in self.servers.unlisted()
            failed = isinstance(self.servers.phases().get(server), Failed)
            if starting or (failed and not self.servers.status(server).tool_count):
                return _StillStarting(name, server, self.servers)
        return None

    def names(self) -> tuple[str, ...]:
        return ()

    def system_addendum(self) -> str:
        return ""

    def note_call(self, name: str) -> AgentEvent | None:
        return None

    def describe(self) -> ToolsetView:
        return ToolsetView(offered=(), addendum="")

    def for_child(self, scope: ChildScope) -> FilteredToolset:
        return FilteredToolset(self, scope.allows)
