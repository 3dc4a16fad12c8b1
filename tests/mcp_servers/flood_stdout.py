"""An MCP server that first floods its stdout with lines that are not JSON-RPC (a library
printing progress, or a hostile server filling the client's log), then serves one tool.

``flood_stdout.py N`` writes N such lines (default 100,000).
"""

import sys

from mcp.server.mcpserver import MCPServer

lines = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
out = sys.stdout
for index in range(lines):
    out.write(f"loading shard {index} of the very large index, please wait...\n")
out.flush()

server = MCPServer("flood")


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


server.run()
