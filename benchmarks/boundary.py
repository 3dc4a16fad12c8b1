"""Bounded inputs (issue 14): Edit on a large one-line file, and a tools/list_changed flood.

    python benchmarks/boundary.py

1. Edit on a 3 MB one-line file (``var a=1;`` 393,216 times): an ``old_string`` that occurs
   everywhere (the error lists lines), a unique one (the echo is cut around the change), and
   one that is missing (the "most similar lines" hint). Before issue 14 the first took over
   40 s (quadratic line numbering).
2. An MCP server sending 5,000 ``tools/list_changed`` notices: how many ``tools/list``
   requests caliban makes, with the debounce and with it switched off.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

from caliban.mcp.client import Limits, McpManager
from caliban.mcp.config import ServerConfig
from caliban.tools import _files
from caliban.tools.base import CallContext, ToolEnv
from caliban.tools.edit import Edit

SERVER = Path(__file__).resolve().parent.parent / "tests" / "mcp_servers" / "list_changed.py"


async def edit_large(directory: Path) -> None:
    path = directory / "bundle.min.js"
    path.write_text("var a=1;" * 393_216 + "UNIQUE;")
    env = ToolEnv(cwd=directory, project_root=directory)
    print(f"Edit on a {path.stat().st_size / 1e6:.1f} MB one-line file:")
    for label, old in (("non-unique", "var a=1;"), ("unique", "UNIQUE;"), ("missing", "var b=2;")):
        _files.record_read(env, path)
        started = time.perf_counter()
        out = await Edit().call(
            {"file_path": str(path), "old_string": old, "new_string": "X;"},
            CallContext(env=env, call_id="e"),
        )
        elapsed = time.perf_counter() - started
        outcome = "error" if out.is_error else "edited"
        print(
            f"  {label:<11} {elapsed:7.3f} s  {outcome:<6}  {len(out.as_text):>6,} characters back"
        )


async def flood(directory: Path, quiet: float) -> int:
    count = directory / f"lists-{quiet}"
    server = ServerConfig(
        name="changing",
        transport="stdio",
        command=sys.executable,
        args=(str(SERVER), "--count", str(count)),
    )
    async with McpManager([server], limits=Limits(refresh_quiet_s=quiet)) as manager:
        await manager.wait_ready()
        await manager.call_tool("changing", "flood", {"count": 5000})
        await asyncio.sleep(1)
    return len(count.read_text().splitlines())


async def main() -> None:
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        await edit_large(directory)
        debounced = await flood(directory, 0.25)
        undebounced = await flood(directory, 0.0)
        print("5,000 tools/list_changed notices → tools/list requests (1 at start included):")
        print(f"  debounced (0.25 s quiet period): {debounced}")
        print(f"  not debounced:                   {undebounced}")


if __name__ == "__main__":
    asyncio.run(main())
