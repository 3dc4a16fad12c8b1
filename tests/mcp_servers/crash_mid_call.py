"""An MCP server whose ``crash`` tool kills the process in the middle of the call.

``whoami`` answers with the server's PID, so a test can see that a new process answered
after the crash.
"""

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("crashy")


@server.tool()
def whoami() -> str:
    """Return this server process's PID."""
    return str(os.getpid())


@server.tool()
def crash() -> str:
    """Exit the server process abruptly while the call is in flight."""
    print("segfault-like crash in native extension", file=sys.stderr, flush=True)
    os._exit(70)


if __name__ == "__main__":
    print(f"pid={os.getpid()}", file=sys.stderr, flush=True)
    server.run()
