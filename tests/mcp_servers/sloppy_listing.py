"""A minimal MCP server over stdio, written without the SDK (whose server will not send an
invalid tool), whose tool list has tools the protocol does not allow: an input schema without
``type``, one of type ``array``, a ``required`` that is not a list, and a tool without a name.
``ok`` and ``fine`` are valid and answer with their name; calling ``garbled`` gets an answer
that is not JSON-RPC (its result a string), ``badcontent`` one whose content is not a list.
With ``--garbled-initialize`` the answer to ``initialize`` is not JSON-RPC either."""

import json
import sys

TOOLS = [
    {"name": "ok", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "notype", "inputSchema": {"properties": {"a": {"type": "string"}}}},
    {"name": "arraytype", "inputSchema": {"type": "array"}},
    {"name": "badrequired", "inputSchema": {"type": "object", "required": "a"}},
    {"inputSchema": {"type": "object"}},
    {"name": "fine", "inputSchema": {"type": "object"}},
    {"name": "garbled", "inputSchema": {"type": "object"}},
    {"name": "badcontent", "inputSchema": {"type": "object"}},
]
GARBLED_INITIALIZE = "--garbled-initialize" in sys.argv


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        continue  # a notification
    if method == "initialize" and GARBLED_INITIALIZE:
        send({"jsonrpc": "2.0", "id": ident, "result": "hello"})
        continue
    if method == "initialize":
        result: object = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "sloppy", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        name = request["params"]["name"]
        if name == "garbled":
            result = "hello"
        elif name == "badcontent":
            result = {"content": "not a list"}
        else:
            result = {"content": [{"type": "text", "text": f"{name} ran"}]}
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": method}})
        continue
    send({"jsonrpc": "2.0", "id": ident, "result": result})
