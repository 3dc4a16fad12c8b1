"""Lazy MCP loading: MCP tool schemas stay off the wire until the model finds them.

- :mod:`~caliban.mcp.lazy.policy`: whether loading is lazy, and which servers stay eager;
- :mod:`~caliban.mcp.lazy.activation`: the immutable set of tools found so far;
- :mod:`~caliban.mcp.lazy.catalog`: one version of the catalog, split and indexed;
- :mod:`~caliban.mcp.lazy.manifest`: the "deferred tools" paragraph of the system prompt;
- :mod:`~caliban.mcp.lazy.tool_search`: the ToolSearch tool and how its answers read;
- :mod:`~caliban.mcp.lazy.toolset`: the wrapper that filters the wire tool list each turn.
"""
