"""An MCP server whose ``unlock`` tool adds a tool and announces the change.

It announces it both ways: on the 2026-07-28 subscription bus (delivered through
``subscriptions/listen``) and as a legacy ``notifications/tools/list_changed`` (delivered on
2025-era connections; dropped by the SDK on modern ones).
"""

import os
import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("changing")


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


if __name__ == "__main__":
    print(f"pid={os.getpid()}", file=sys.stderr, flush=True)
    server.run()
