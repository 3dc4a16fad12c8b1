"""MCP support: server connections, lazy tool activation and tool search."""
