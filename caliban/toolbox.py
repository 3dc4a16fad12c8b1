"""The set of tools one agent can use, and which of them go on the wire each turn.

The loop asks a :class:`Toolbox` three things per turn: which tools to offer, what to add
to the system prompt, and which tool a call names. :class:`StaticToolbox` offers every tool
it holds; the lazy-MCP toolbox (``caliban.mcp.wire``) filters MCP tools through the
activation set.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from caliban.events import AgentEvent
from caliban.tools.base import Tool


class Toolbox(Protocol):
    def offered(self) -> tuple[Tool, ...]:
        """The tools to send with the next request, in a stable order."""
        ...

    def find(self, name: str) -> Tool | None:
        """The tool a call names, offered or not (deferred MCP tools stay callable)."""
        ...

    def system_addendum(self) -> str:
        """Text appended to the system prompt ('' for none)."""
        ...

    def note_call(self, name: str) -> AgentEvent | None:
        """Called before a tool runs; the lazy toolbox activates or refreshes MCP tools."""
        ...

    def names(self) -> list[str]:
        """Every callable tool name, for error messages."""
        ...


class StaticToolbox:
    """Offers every tool it holds, in the order given."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools = {tool.name: tool for tool in tools}
        self._offered = tuple(self._tools.values())

    def offered(self) -> tuple[Tool, ...]:
        return self._offered

    def find(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def system_addendum(self) -> str:
        return ""

    def note_call(self, name: str) -> AgentEvent | None:
        return None

    def names(self) -> list[str]:
        return list(self._tools)
