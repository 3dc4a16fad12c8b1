"""Test doubles for lazy MCP loading: MCP tools with a recording dispatcher, a fake manager
and a session builder. Shared by test_wire, test_toolsearch, test_lazy_loop, test_context."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import mcp_types
from pydantic import BaseModel

from caliban.config.settings import Settings
from caliban.events import AgentEvent
from caliban.mcp.lazy.activation import ActivationCell, McpActivationSet
from caliban.mcp.lazy.policy import LazyPolicy
from caliban.mcp.lazy.tool_search import SearchOutcome
from caliban.mcp.lazy.toolset import LazyMcpToolset
from caliban.mcp.results import CallOutcome, ServerError
from caliban.mcp.tools import McpTool, wire_name
from caliban.mcp.toolset import McpCatalog, McpToolset
from caliban.providers.base import Provider
from caliban.session.session import Session
from caliban.tools.base import BuiltinTool, CallContext, Tool, ToolEnv, ToolOutput
from caliban.toolsets.base import Toolset
from caliban.toolsets.combined import CombinedToolset
from caliban.toolsets.filtered import FilteredToolset
from caliban.toolsets.tool_list import ToolList


class EchoInput(BaseModel):
    text: str = ""


class Echo(BuiltinTool[EchoInput]):
    name = "Echo"
    description = "Echo the text back."
    input_model = EchoInput
    read_only = True

    async def run(self, args: EchoInput, ctx: CallContext) -> ToolOutput:
        return ToolOutput.text(f"echo: {args.text}")


class Note(BuiltinTool[EchoInput]):
    name = "Note"
    description = "Write a note."
    input_model = EchoInput

    async def run(self, args: EchoInput, ctx: CallContext) -> ToolOutput:
        return ToolOutput.text("noted")


class Dispatcher:
    """Records calls; a call whose arguments lack ``q`` fails like a server's validation."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> CallOutcome:
        self.calls.append((server, tool, dict(arguments)))
        if "q" not in arguments:
            message = f"{tool}: missing required argument 'q'"
            return ServerError(server=server, tool=tool, code=-32602, message=message)
        text = f"{server}.{tool}({json.dumps(dict(arguments))})"
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(text=text)])


def schema(tool: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"q": {"type": "string", "description": f"What {tool} works on."}},
        "required": ["q"],
    }


def make_tools(
    catalog: Mapping[str, Sequence[str]], dispatcher: Dispatcher | None = None
) -> tuple[McpTool, ...]:
    dispatcher = dispatcher or Dispatcher()
    return tuple(
        McpTool(
            server=server,
            tool_name=tool,
            name=wire_name(server, tool),
            description=f"{tool.replace('_', ' ').capitalize()} on {server}.",
            input_schema=schema(tool),
            dispatcher=dispatcher,
        )
        for server, tools in catalog.items()
        for tool in tools
    )


class FakeMcp:
    """The part of McpManager a session reads, with per-server ``lazy`` flags."""

    def __init__(
        self,
        catalog: Mapping[str, Sequence[str]],
        *,
        lazy: Mapping[str, bool | None] | None = None,
    ) -> None:
        self.dispatcher = Dispatcher()
        self.lazy = dict(lazy or {})
        self.servers = list(catalog)
        self._tools = make_tools(catalog, self.dispatcher)
        self.version = 0
        self.order_settled = True

    def tools(self) -> tuple[McpTool, ...]:
        return self._tools

    def set_catalog(self, catalog: Mapping[str, Sequence[str]]) -> None:
        """A server's tool list changed (a new tuple, as McpManager returns)."""
        self._tools = make_tools(catalog, self.dispatcher)
        self.servers = list(dict.fromkeys([*self.servers, *catalog]))
        self.version += 1

    def server_names(self) -> list[str]:
        return list(self.servers)

    def server_config(self, name: str) -> Any:
        class Config:
            lazy = self.lazy.get(name)

        return Config()

    def statuses(self) -> list[Any]:
        return []

    def unlisted(self) -> tuple[str, ...]:
        return ()

    def phases(self) -> dict[str, Any]:
        return {}

    def instructions(self, name: str) -> str | None:
        return None

    def serves_resources(self) -> bool:
        return False

    def server_instructions(self) -> tuple[tuple[str, str], ...]:
        return ()

    async def wait_listed(
        self,
        names: Sequence[str],
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> list[Any]:
        return []


CATALOG: dict[str, list[str]] = {
    "github": ["create_issue", "search_issues", "list_pull_requests", "merge_pull_request"],
    "gitlab": ["create_issue", "list_pipelines"],
    "time": ["get_current_time", "convert_time"],
}


def lazy_settings(lazy: bool | str = True, cap: int = 24) -> Settings:
    return Settings.model_validate({"tools": {"lazy_mcp": lazy, "max_active_schemas": cap}})


def make_session(
    provider: Provider,
    root: Path,
    *,
    mcp: FakeMcp | None = None,
    settings: Settings | None = None,
    tools: Sequence[Tool] | None = None,
    events: list[AgentEvent] | None = None,
    **kw: Any,
) -> Session:
    return Session(
        settings=settings or lazy_settings(),
        provider=provider,
        model="test-model",
        system_prompt="You are a test.",
        env=ToolEnv(cwd=root, project_root=root),
        builtins=list(tools) if tools is not None else [Echo(), Note()],
        mcp=mcp if mcp is not None else FakeMcp(CATALOG),  # type: ignore[arg-type]
        listeners=[events.append] if events is not None else [],
        **kw,
    )


class StaticCatalog:
    """A fixed MCP catalog, as :class:`caliban.mcp.toolset.McpToolset` reads one."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools = tuple(tools)

    def tools(self) -> tuple[Tool, ...]:
        return self._tools


class LazyBox:
    """What a lazy session's agent is given (built-ins, then the lazy MCP wrapper), with the
    wrapper at hand so tests can search and activate directly."""

    def __init__(
        self,
        *,
        builtins: Sequence[Tool] = (),
        catalog: McpCatalog,
        cap: int = 24,
        eager: frozenset[str] = frozenset(),
        allow: Callable[[str], bool] | None = None,
        resources: Any = None,
    ) -> None:
        inner: Toolset = McpToolset(catalog, resources=resources)
        if allow is not None:
            inner = FilteredToolset(inner, allow)
        self.lazy = LazyMcpToolset(
            inner,
            activation=ActivationCell(McpActivationSet.empty(cap)),
            policy=LazyPolicy(mode="on", cap=cap, pinned_eager=eager),
            context_window=lambda: 200_000,
        )
        self.toolset = CombinedToolset([ToolList(builtins), self.lazy])
        self.activation = self.lazy.activation
        self.tool_search = self.lazy.tool_search

    def offered(self) -> tuple[Tool, ...]:
        return self.toolset.offered()

    def find(self, name: str) -> Tool | None:
        return self.toolset.find(name)

    def names(self) -> tuple[str, ...]:
        return self.toolset.names()

    def system_addendum(self) -> str:
        return self.toolset.system_addendum()

    def note_call(self, name: str) -> AgentEvent | None:
        return self.toolset.note_call(name)

    def search_tools(self, query: str, max_results: int) -> SearchOutcome:
        return self.lazy.search_tools(query, max_results)
