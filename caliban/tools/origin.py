"""Where a tool comes from: built into caliban, or an MCP server's (which one, and under what
name). Every tool carries one; nothing identifies a tool's kind by parsing its name."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BUILTIN", "BuiltinOrigin", "McpOrigin", "ToolOrigin"]


@dataclass(frozen=True, slots=True)
class BuiltinOrigin:
    """A tool implemented in caliban."""


@dataclass(frozen=True, kw_only=True, slots=True)
class McpOrigin:
    """A tool of an MCP server."""

    server: str
    """The server's name in the configuration."""
    tool: str
    """The name the server knows the tool by."""


ToolOrigin = BuiltinOrigin | McpOrigin
BUILTIN = BuiltinOrigin()
