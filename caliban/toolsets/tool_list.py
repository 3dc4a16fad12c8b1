"""A fixed list of tools, offered in the order given."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from caliban.tools.base import McpOrigin
from caliban.toolsets.base import ChildScope, ToolsetView

if TYPE_CHECKING:
    from caliban.events import AgentEvent
    from caliban.tools.base import Tool


class ToolList:
    """Offers every tool it holds; a child keeps the ones its scope allows."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._by_name = {tool.name: tool for tool in tools}
        self._tools = tuple(self._by_name.values())

    def offered(self) -> tuple[Tool, ...]:
        return self._tools

    def find(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def system_addendum(self) -> str:
        return ""

    def note_call(self, name: str) -> AgentEvent | None:
        return None

    def describe(self) -> ToolsetView:
        mcp = tuple(tool for tool in self._tools if isinstance(tool.origin, McpOrigin))
        return ToolsetView(offered=self._tools, addendum="", mcp_tools=mcp)

    def for_child(self, scope: ChildScope) -> ToolList:
        return ToolList(tool for tool in self._tools if scope.allows(tool.name))
