"""How long until the five public reference MCP servers are ready, and how big their tools are.

    python benchmarks/mcp_startup.py [--runs 5] [--prefix DIR] [--json]

Measures, for ``server-everything``, ``server-filesystem``, ``server-memory`` (npm) and
``mcp-server-time``, ``mcp-server-git`` (PyPI), through :class:`caliban.mcp.client.McpManager`:

* *concurrent*: all five started at once, time until every one is connected with its tools
  listed (what a caliban session does);
* *sequential*: started one after another, each connected before the next starts;
* the wire size of their tool definitions (compact JSON characters, ≈ tokens).

Each figure is the median of ``--runs`` runs after one warm-up run. The servers come from
``--prefix``, else ``$CALIBAN_REFERENCE_SERVERS``, else ``~/.cache/caliban/refsrv``, where
``.ci/install-reference-servers`` installs them when they are missing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests"))

from mcp_servers.reference import reference_servers  # noqa: E402

from caliban.mcp.client import McpManager, ServerStatus  # noqa: E402
from caliban.mcp.config import ServerConfig  # noqa: E402

INSTALLER = REPO_ROOT / ".ci" / "install-reference-servers"
DEFAULT_PREFIX = Path.home() / ".cache" / "caliban" / "refsrv"


def ensure_installed(prefix: Path) -> None:
    needed = [
        prefix / "npm/node_modules/.bin/mcp-server-everything",
        prefix / "venv/bin/mcp-server-git",
    ]
    if not all(p.exists() for p in needed):
        print(f"installing the reference servers into {prefix} ...", file=sys.stderr)
        subprocess.run([str(INSTALLER), str(prefix)], check=True)


def _check(statuses: list[ServerStatus]) -> None:
    failed = [f"{s.name}: {s.error}" for s in statuses if s.state != "connected"]
    if failed:
        raise SystemExit("reference servers failed to start:\n  " + "\n  ".join(failed))


async def concurrent(servers: list[ServerConfig]) -> tuple[float, list[ServerStatus]]:
    manager = McpManager(servers)
    try:
        started = time.perf_counter()
        manager.start()
        statuses = await manager.wait_ready()
        elapsed = time.perf_counter() - started
    finally:
        await manager.aclose()
    _check(statuses)
    return elapsed, statuses


async def sequential(servers: list[ServerConfig]) -> float:
    managers = []
    try:
        started = time.perf_counter()
        for server in servers:
            manager = McpManager([server])
            managers.append(manager)
            manager.start()
            _check(await manager.wait_ready())
        return time.perf_counter() - started
    finally:
        await asyncio.gather(*(m.aclose() for m in managers))


async def measure(prefix: Path, runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="caliban-mcp-bench-") as tmp:
        work = Path(tmp)
        os.environ.setdefault("CALIBAN_STATE_DIR", str(work / "state"))
        servers = reference_servers(prefix, work, timeout=60)
        _, statuses = await concurrent(servers)  # warm-up: disk caches, .pyc files
        await sequential(servers)
        together, one_by_one, per_server = [], [], {s.name: [] for s in servers}
        for _ in range(runs):
            elapsed, statuses = await concurrent(servers)
            together.append(elapsed)
            for status in statuses:
                per_server[status.name].append(status.connect_seconds or 0.0)
            one_by_one.append(await sequential(servers))
    return {
        "runs": runs,
        "concurrent_s": statistics.median(together),
        "sequential_s": statistics.median(one_by_one),
        "servers": [
            {
                "name": s.name,
                "protocol": s.protocol_version,
                "connect_s": statistics.median(per_server[s.name]),
                "tools": s.tool_count,
                "chars": s.tool_chars,
                "tokens": s.tool_tokens,
            }
            for s in statuses
        ],
    }


def report(result: dict[str, Any]) -> None:
    print(f"reference MCP servers, median of {result['runs']} runs")
    print(f"{'server':<12}{'protocol':>12}{'connect':>10}{'tools':>7}{'chars':>9}{'≈tokens':>9}")
    for s in result["servers"]:
        print(
            f"{s['name']:<12}{s['protocol']:>12}{s['connect_s']:>9.2f}s{s['tools']:>7}"
            f"{s['chars']:>9,}{s['tokens']:>9,}"
        )
    servers = result["servers"]
    print(
        f"{'total':<12}{'':>12}{'':>10}{sum(s['tools'] for s in servers):>7}"
        f"{sum(s['chars'] for s in servers):>9,}{sum(s['tokens'] for s in servers):>9,}"
    )
    print(f"all ready, started concurrently:   {result['concurrent_s']:.2f}s")
    print(f"all ready, started one by one:     {result['sequential_s']:.2f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="measured runs (default 5)")
    parser.add_argument("--prefix", type=Path, help="where the reference servers are installed")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    opts = parser.parse_args()
    env_prefix = os.environ.get("CALIBAN_REFERENCE_SERVERS")
    prefix = opts.prefix or (Path(env_prefix) if env_prefix else DEFAULT_PREFIX)
    ensure_installed(prefix)
    result = asyncio.run(measure(prefix, max(1, opts.runs)))
    if opts.json:
        print(json.dumps(result, indent=2))
    else:
        report(result)


if __name__ == "__main__":
    main()
