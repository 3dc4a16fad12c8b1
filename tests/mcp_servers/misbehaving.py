"""An MCP server that misbehaves in ways a careless client pays for.

``fail`` answers with a JSON-RPC error of the given code and a message of ``size``
characters; ``long_line`` writes ``megabytes`` of stdout with no newline (one endless
message) and never answers; ``images`` returns ``count`` tiny PNGs; ``flood_stderr``
writes ``megabytes`` to stderr, then ``last words``, and exits; ``text`` returns ``size``
characters; ``manual``'s description is 198,028 characters; ``echo`` answers.
``--http PORT`` serves streamable HTTP on 127.0.0.1:PORT/mcp (``--json`` answering with JSON
bodies instead of SSE streams; ``--sse`` serves the legacy SSE transport on /sse instead).
"""

import base64
import os
import sys
import time

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

server = MCPServer("misbehaving")
WIRE = os.dup(1)  # the SDK points fd 1 at stderr while it serves; this is still the wire
# A 1x1 PNG.
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6364f8cf500f0003860180ad4a7d6b0000000049454e44ae426082"
    )
).decode("ascii")


@server.tool()
def echo(text: str) -> str:
    """Return TEXT."""
    return text


@server.tool(description="How to call every function. " + "function f(x): y. " * 11_000)
def manual() -> str:
    return "read the description"


@server.tool()
def text(size: int) -> str:
    """Return SIZE characters."""
    return "y" * size


@server.tool()
def fail(code: int, size: int) -> str:
    """Answer with a JSON-RPC error."""
    raise MCPError(code=code, message=("Server error: " + "x" * size)[:size])


@server.tool()
def long_line(megabytes: int) -> str:
    """Write MEGABYTES of stdout without a newline, then hang."""
    block = b"x" * (1024 * 1024)
    for _ in range(megabytes):
        os.write(WIRE, block)
    time.sleep(3600)
    return "unreachable"


@server.tool()
def images(count: int) -> list[types.ImageContent]:
    """Return COUNT tiny PNG images."""
    return [types.ImageContent(type="image", data=PIXEL, mime_type="image/png")] * count


@server.tool()
def flood_stderr(megabytes: int) -> str:
    """Write MEGABYTES of stderr, then a last line, and exit."""
    line = b"E" * 1023 + b"\n"
    for _ in range(megabytes * 1024):
        os.write(2, line)
    os.write(2, b"last words\n")
    os._exit(3)


if __name__ == "__main__":
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        if "--sse" in sys.argv:
            server.run("sse", host="127.0.0.1", port=port)
        else:
            json_response = "--json" in sys.argv
            server.run("streamable-http", host="127.0.0.1", port=port, json_response=json_response)
    else:
        server.run()
