"""An MCP server whose ``unlock`` tool adds a tool and announces the change.

It announces it both ways: on the 2026-07-28 subscription bus (delivered through
``subscriptions/listen``) and as a legacy ``notifications/tools/list_changed`` (delivered on
2025-era connections; dropped by the SDK on modern ones). ``flood`` sends thousands of change
notices at once; with ``--count FILE`` each ``tools/list`` request appends a line to FILE.
"""

import argparse
import os
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

parser = argparse.ArgumentParser()
parser.add_argument("--count", help="append a line here for each tools/list request")
options = parser.parse_args()


def _count() -> None:
    if options.count:
        with open(options.count, "a", encoding="utf-8") as log:
            log.write("tools/list\n")


class CountingServer(MCPServer):
    async def _handle_list_tools(self, *args: Any, **kwargs: Any) -> Any:
        _count()
        return await super()._handle_list_tools(*args, **kwargs)


server = CountingServer("changing")


@server.tool()
def status() -> str:
    """Report whether the extra tool is unlocked."""
    return "locked"


@server.tool()
async def unlock(ctx: Context) -> str:
    """Add the tool 'deploy_preview' to this server."""

    def deploy_preview(branch: str) -> str:
        """Deploy a preview environment for a branch."""
        return f"preview of {branch} deployed"

    server.add_tool(deploy_preview)
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "unlocked"


@server.tool()
async def flood(ctx: Context, count: int = 5000) -> str:
    """Announce a tool-list change COUNT times, as fast as possible."""
    for _ in range(count):
        await ctx.notify_tools_changed()
        await ctx.session.send_tool_list_changed()
    return f"sent {count} notices"


if __name__ == "__main__":
    print(f"pid={os.getpid()}", file=sys.stderr, flush=True)
    server.run()
