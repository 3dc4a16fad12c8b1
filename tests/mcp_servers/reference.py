"""The five public reference MCP servers, as installed by `.ci/install-reference-servers PREFIX`.

Shared by tests/test_mcp_reference.py and benchmarks/mcp_startup.py.
"""

from __future__ import annotations

from pathlib import Path

from caliban.mcp.config import ServerConfig


def reference_servers(prefix: Path, work: Path, *, timeout: float = 30) -> list[ServerConfig]:
    """Configs for everything, filesystem (rooted at ``work``), memory, time and git."""
    npm = prefix / "npm/node_modules/.bin"
    venv = prefix / "venv/bin"

    def server(name: str, command: Path, *args: str, **env: str) -> ServerConfig:
        return ServerConfig(
            name=name,
            transport="stdio",
            command=str(command),
            args=args,
            env=env,
            startup_timeout=timeout,
            tool_timeout=timeout,
        )

    return [
        server("everything", npm / "mcp-server-everything"),
        server("filesystem", npm / "mcp-server-filesystem", str(work)),
        server("memory", npm / "mcp-server-memory", MEMORY_FILE_PATH=str(work / "memory.jsonl")),
        server("time", venv / "mcp-server-time", "--local-timezone", "UTC"),
        server("git", venv / "mcp-server-git"),
    ]
