"""caliban: a terminal coding agent with lazy MCP tool loading."""

__version__ = "0.1.0"
