"""Ranking tools for a request: the search behind ToolSearch and ``caliban mcp search``."""
