"""An MCP server that notes how it ended in ``$LEAVING_LOG``: ``left`` when it left on its
own after its stdin closed (``$LEAVING_DELAY`` seconds later), ``terminated`` on SIGTERM."""

import os
import signal
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

LOG = Path(os.environ["LEAVING_LOG"])
server = MCPServer("leaving")


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


def terminated(*_: Any) -> None:
    with LOG.open("a") as log:
        log.write("terminated\n")
    os._exit(0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, terminated)
    server.run()
    time.sleep(float(os.environ.get("LEAVING_DELAY", "0")))
    with LOG.open("a") as log:
        log.write("left\n")
