"""Built-in tools and the tool interface shared with MCP tools."""
