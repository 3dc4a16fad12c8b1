"""A minimal stdio MCP server that lists the tools of a JSON file: for start-up benchmarks.

    python benchmarks/_static_mcp_server.py TOOLS.json

TOOLS.json is a list of MCP tool objects (``name``, ``description``, ``inputSchema``). It
speaks newline-delimited JSON-RPC with the standard library only, so it answers
``initialize`` and ``tools/list`` within milliseconds whichever client starts it: what a
benchmark compares is the client, not the server's own start-up. ``tools/call`` answers
``ok``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def answer(message: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    method = message.get("method")
    if "id" not in message:
        return None  # a notification
    result: dict[str, Any]
    if method == "initialize":
        version = message.get("params", {}).get("protocolVersion", "2025-06-18")
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "static", "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": tools}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "ok"}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"method not found: {method}"}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    tools = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line), tools)
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
