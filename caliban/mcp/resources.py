"""MCP resources as the model reaches them: Claude Code's two tools, ``ListMcpResourcesTool``
(every server's resources and resource templates) and ``ReadMcpResourceTool`` (one resource by
server and URI).

They are offered while a server offers resources (as it said when it connected, or as the
tool-list cache remembers, so turn 1 knows), after the servers' own tools, and under
lazy loading they are deferred like MCP tools (found by ToolSearch), so they cost nothing until
used. What a server wrote reaches the model marked as that server's data; a read resource is
converted like a tool result (text, images, placeholders for other binaries, the same size
bounds).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from caliban.calls.effects import Effects, McpServer
from caliban.mcp.results import CALL_FAILURES
from caliban.mcp.tools import convert_result, failure_text, mark_data, unmark
from caliban.messages import ToolSpec
from caliban.tools.base import (
    BUILTIN,
    CallContext,
    Preview,
    ToolEnv,
    ToolOrigin,
    ToolOutput,
    json_preview,
)

if TYPE_CHECKING:
    from mcp import Client

    from caliban.mcp.client import ServerStatus

__all__ = [
    "LIST_RESOURCES",
    "READ_RESOURCE",
    "ListResourcesTool",
    "ReadResourceTool",
    "ResourceTool",
    "attach_resources",
    "resource_mention",
    "resource_tools",
]

LIST_RESOURCES = "ListMcpResourcesTool"
READ_RESOURCE = "ReadMcpResourceTool"
MAX_PAGES = 20
"""Pages of ``resources/list`` read from one server (a server that pages forever stops here)."""


class ServerRequests(Protocol):
    """Servers that can be asked (:class:`caliban.mcp.client.McpManager`)."""

    def server_names(self) -> list[str]: ...

    async def request(
        self,
        server: str,
        what: str,
        send: Callable[[Client], Awaitable[Any]],
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Any:
        """``send(client)``'s answer, or a ``CallFailure``."""
        ...


class ResourceServers(ServerRequests, Protocol):
    """The servers resources come from."""

    def serves_resources(self) -> bool:
        """Whether any server offers resources."""
        ...

    def status(self, name: str) -> ServerStatus: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class _Call:
    """One call of a resource tool (no path or command: no permission subject)."""

    arguments: Mapping[str, Any]
    run_with: Callable[[Mapping[str, Any]], Awaitable[ToolOutput]]
    servers: tuple[str, ...]
    """The servers it asks."""

    @property
    def subject(self) -> str | None:
        return None

    def effects(self, cwd: Path) -> Effects:
        return Effects(reaches=tuple(McpServer(name) for name in self.servers))

    def preview(self, env: ToolEnv) -> Preview:
        return json_preview(self.arguments)

    async def run(self, ctx: CallContext) -> ToolOutput:
        return await self.run_with(self.arguments)


class ResourceTool:
    """What the two resource tools share: read-only, built in, deferred like MCP tools."""

    name = ""
    description = ""
    schema: Mapping[str, Any] = {}

    def __init__(self, servers: ResourceServers) -> None:
        self.servers = servers

    @property
    def origin(self) -> ToolOrigin:
        return BUILTIN

    @property
    def read_only(self) -> bool:
        return True

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, input_schema=self.schema)

    def bind(self, arguments: Mapping[str, Any]) -> _Call | str:
        problem = self.check(arguments)
        if problem:
            return problem
        server = arguments.get("server")
        servers = (server,) if isinstance(server, str) else tuple(self.servers.server_names())
        return _Call(arguments=arguments, run_with=self.answer, servers=servers)

    def check(self, arguments: Mapping[str, Any]) -> str | None:
        for key in self.schema.get("required", ()):
            if not isinstance(arguments.get(key), str) or not arguments[key]:
                return f"{self.name}: '{key}' is required (a string)"
        server = arguments.get("server")
        if server is not None and server not in self.servers.server_names():
            known = ", ".join(self.servers.server_names()) or "none"
            return f"{self.name}: no MCP server named {server!r} (configured: {known})"
        return None

    async def answer(self, arguments: Mapping[str, Any]) -> ToolOutput:
        raise NotImplementedError


class ListResourcesTool(ResourceTool):
    name = LIST_RESOURCES
    description = (
        "List available resources from configured MCP servers. Each returned resource will "
        "include all standard MCP resource fields plus a 'server' field indicating which "
        "server the resource belongs to. Resource templates (uriTemplate) are listed too: "
        "fill in their {placeholders} and read the URI with ReadMcpResourceTool."
    )
    schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "server": {
                "type": "string",
                "description": "Optional server name to filter resources by",
            }
        },
        "additionalProperties": False,
    }

    async def answer(self, arguments: Mapping[str, Any]) -> ToolOutput:
        wanted = arguments.get("server")
        names = [wanted] if isinstance(wanted, str) else self.servers.server_names()
        blocks: list[str] = []
        notes: list[str] = []
        count = 0
        for name in names:
            if wanted is None and self.servers.status(name).state != "connected":
                continue  # a listing of all servers does not wait for one that is not up
            listed = await self.servers.request(name, "resources/list", _list_all)
            if isinstance(listed, CALL_FAILURES):
                notes.append(failure_text(listed))
                continue
            entries = [{**entry, "server": name} for entry in listed]
            if entries:
                count += len(entries)
                text = json.dumps(entries, ensure_ascii=False, indent=2)
                blocks.append(mark_data(text, server=name))
        if not blocks:
            where = f"MCP server {wanted!r}" if wanted else "the connected MCP servers"
            blocks.append(f"No resources found on {where}.")
        return ToolOutput.text(
            "\n".join([*blocks, *notes]), summary=f"{count} resources", data={"count": count}
        )


class ReadResourceTool(ResourceTool):
    name = READ_RESOURCE
    description = (
        "Reads a specific resource from an MCP server, identified by server name and resource URI."
    )
    schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "server": {"type": "string", "description": "The MCP server name"},
            "uri": {"type": "string", "description": "The resource URI to read"},
        },
        "required": ["server", "uri"],
        "additionalProperties": False,
    }

    async def answer(self, arguments: Mapping[str, Any]) -> ToolOutput:
        server, uri = str(arguments["server"]), str(arguments["uri"])

        async def read(client: Client) -> Any:
            return await client.read_resource(uri)

        result = await self.servers.request(server, "resources/read", read)
        if isinstance(result, CALL_FAILURES):
            return ToolOutput.error(failure_text(result))
        return convert_result(as_tool_result(result), server=server, tool=READ_RESOURCE)


def as_tool_result(result: Any) -> Any:
    """A ``ReadResourceResult`` as a ``CallToolResult`` of embedded resources, so it is
    converted (and bounded) exactly like a tool's result."""
    import mcp_types

    blocks: list[Any] = [
        mcp_types.EmbeddedResource(type="resource", resource=c) for c in result.contents
    ]
    return mcp_types.CallToolResult(content=blocks)


async def _list_all(client: Client) -> list[dict[str, Any]]:
    """Every resource and resource template of one server, as JSON-ready dicts."""
    capabilities = client.server_capabilities
    if capabilities is None or capabilities.resources is None:
        return []
    found: list[dict[str, Any]] = []
    for fetch in (client.list_resources, client.list_resource_templates):
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page: Any = await fetch(cursor=cursor)
            items: Sequence[Any] = (
                getattr(page, "resources", None) or getattr(page, "resource_templates", None) or ()
            )
            found += [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in items]
            cursor = page.next_cursor
            if not cursor:
                break
    return found


def resource_tools(servers: ResourceServers) -> tuple[ResourceTool, ...]:
    """The two tools, for a set of servers of which one or more offer resources."""
    return (ListResourcesTool(servers), ReadResourceTool(servers))


_RESOURCE_MENTION = re.compile(r"([A-Za-z0-9_-]{1,64}):([A-Za-z][\w+.-]*:\S+)")


def resource_mention(raw: str, servers: Sequence[str]) -> tuple[str, str] | None:
    """``travel:travel://policy`` (an ``@`` mention, Claude Code's ``@server:uri``) →
    ``("travel", "travel://policy")`` when ``travel`` is a configured server; else None."""
    match = _RESOURCE_MENTION.fullmatch(raw)
    if match is None or match.group(1) not in servers:
        return None
    return match.group(1), match.group(2)


async def attach_resources(
    mentioned: Sequence[str], servers: ResourceServers
) -> tuple[list[tuple[str, str]], list[str]]:
    """``(mention, <mcp-resource> block)`` for each ``@server:uri`` mention among
    ``mentioned`` (read as ReadMcpResourceTool reads it, marked as that server's data), and
    problems to show."""
    reader = ReadResourceTool(servers)
    blocks: list[tuple[str, str]] = []
    problems: list[str] = []
    for raw in mentioned:
        found = resource_mention(raw, servers.server_names())
        if found is None:
            continue
        server, uri = found
        output = await reader.answer({"server": server, "uri": uri})
        if output.is_error:
            problems.append(f"@{raw} not attached: {unmark(output.as_text)}")
            continue
        attrs = f'server="{server}" uri="{html.escape(uri, quote=True)}"'
        blocks.append((raw, f"<mcp-resource {attrs}>\n{output.as_text}\n</mcp-resource>"))
    return blocks, problems
