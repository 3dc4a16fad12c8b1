"""An MCP server that writes a file where it is told (for the sandbox's tests): ``write``
returns ``wrote PATH`` or the error it met."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("writer")


@server.tool()
def write(path: str, text: str) -> str:
    """Write TEXT to the file PATH."""
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as exc:
        return f"error: {exc}"
    return f"wrote {path}"


if __name__ == "__main__":
    server.run()
