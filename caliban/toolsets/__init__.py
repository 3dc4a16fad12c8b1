"""Toolsets: which tools one agent may call, and which of them go on the wire each turn.

An agent is given one :class:`~caliban.toolsets.base.Toolset`, composed once by wrapping:
a :class:`~caliban.toolsets.tool_list.ToolList` of built-ins, the MCP tools
(:class:`caliban.mcp.toolset.McpToolset`), a :class:`~caliban.toolsets.filtered.FilteredToolset`
for an allowlist, the lazy-loading wrapper (:class:`caliban.mcp.lazy.toolset.LazyMcpToolset`),
joined by a :class:`~caliban.toolsets.combined.CombinedToolset`. A sub-agent's toolset is
derived with :meth:`~caliban.toolsets.base.Toolset.for_child`.
"""
