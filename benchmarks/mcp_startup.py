"""How long until the five public reference MCP servers are ready, and how big their tools are.

    python benchmarks/mcp_startup.py [--runs 5] [--prefix DIR] [--json] [--only servers|caliban]
                                     [--before DIR]

Measures, for ``server-everything``, ``server-filesystem``, ``server-memory`` (npm) and
``mcp-server-time``, ``mcp-server-git`` (PyPI), through :class:`caliban.mcp.client.McpManager`:

* *concurrent*: all five started at once, time until every one is connected with its tools
  listed (what a caliban session does);
* *sequential*: started one after another, each connected before the next starts;
* the wire size of their tool definitions (compact JSON characters, ≈ tokens);
* *caliban*: the real ``caliban -p hi`` in a project with the five servers configured and
  ``tools.lazy_mcp = true``, against an instant fake model server (tests/fake_model_server.py):
  the whole run's wall time, when the first request reached the model, and how many of the
  50 reference tools its deferred paragraph announced ("complete tool view"). *cold*: no
  tool catalog cached (each run starts with an empty cache directory); *cached*: the
  catalogs an earlier run left in the cache; *no MCP*: the same project without servers, the
  floor the other rows compare to. Also ``caliban mcp search`` both ways, and the
  *first ToolSearch* of a cached run: the model (1 s to answer) searches on turn 1; the time
  from its answer to the next request is what the search cost (the index built then, or
  before in the background). ``--before DIR`` also runs ``python -m caliban`` from another
  checkout (``git archive`` of an older commit), alternating run by run with the working
  tree so both see the same load.

Each figure is the median of ``--runs`` runs after one warm-up run. The servers come from
``--prefix``, else ``$CALIBAN_REFERENCE_SERVERS``, else ``~/.cache/caliban/refsrv``, where
``.ci/install-reference-servers`` installs them when they are missing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
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

from fake_model_server import FakeModelServer  # noqa: E402
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


# ---------------------------------------------------------------------------- caliban -p

CALIBAN = [str(Path(sys.executable).parent / "caliban")]
MODEL_LATENCY_S = 1.0
_GROUP = re.compile(r"^- (\S+) \((\d+)\)", re.MULTILINE)


def _toml(servers: list[ServerConfig]) -> str:
    tables = []
    for s in servers:
        lines = [f"[server.{s.name}]", f"command = {json.dumps(s.command)}"]
        lines.append(f"args = {json.dumps(list(s.args))}")
        if s.env:
            pairs = ", ".join(f"{k} = {json.dumps(v)}" for k, v in s.env.items())
            lines.append(f"env = {{ {pairs} }}")
        lines.append(f"startup_timeout = {s.startup_timeout:g}")
        tables.append("\n".join(lines))
    return "\n\n".join(tables) + "\n"


def _announced(body: dict[str, Any]) -> int:
    """How many MCP tools the request's deferred paragraph announced (or sent eagerly)."""
    system = "".join(b["text"] for b in body.get("system", []))
    sent = sum(1 for t in body.get("tools", []) if t["name"].startswith("mcp__"))
    return sum(int(n) for _server, n in _GROUP.findall(system)) or sent


def caliban_project(prefix: Path, root: Path) -> tuple[Path, dict[str, str]]:
    """A project, the five servers in the user's mcp.toml (a project's would need the folder
    trusted first), lazy loading on, and an environment for caliban."""
    project = root / "project"
    (project / ".caliban").mkdir(parents=True)
    (project / ".git").mkdir()
    servers = reference_servers(prefix, project, timeout=30)
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "mcp.toml").write_text(_toml(servers))
    (project / ".caliban" / "config.toml").write_text("[tools]\nlazy_mcp = true\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(
        ANTHROPIC_API_KEY="bench",
        CALIBAN_CONFIG_DIR=str(root / "config"),
        CALIBAN_STATE_DIR=str(root / "state"),
        CALIBAN_DATA_DIR=str(root / "data"),
        CALIBAN_CACHE_DIR=str(root / "cache"),
    )
    return project, env


def one_p_run(project: Path, env: dict[str, str]) -> dict[str, float]:
    """One ``caliban -p hi``: wall seconds, first request seconds, tools announced."""
    with FakeModelServer([{"text": "Hello."}]) as server:
        started = time.time()
        done = subprocess.run(
            [*CALIBAN, "-p", "hi"],
            cwd=project,
            env={**env, "ANTHROPIC_BASE_URL": server.url},
            capture_output=True,
            text=True,
            timeout=120,
        )
        wall = time.time() - started
        if done.returncode != 0:
            raise SystemExit(f"caliban -p failed: {done.stderr}")
        [request] = server.requests
    return {
        "wall_s": wall,
        "first_request_s": request.received_at - started,
        "announced": _announced(request.body),
    }


def one_tool_search(project: Path, env: dict[str, str]) -> float:
    """Seconds from the model's ToolSearch call (sent after 1 s) to the next request."""
    search = {"name": "ToolSearch", "arguments": {"query": "what time is it in Tokyo"}}
    steps = [{"delay": MODEL_LATENCY_S, "tool_calls": [search]}, {"text": "It is noon."}]
    with FakeModelServer(steps) as server:
        done = subprocess.run(
            [*CALIBAN, "-p", "what time is it in Tokyo?"],
            cwd=project,
            env={**env, "ANTHROPIC_BASE_URL": server.url},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise SystemExit(f"caliban -p failed: {done.stderr}")
        first, second = server.requests
    return second.received_at - first.received_at - MODEL_LATENCY_S


def one_search(project: Path, env: dict[str, str], *flags: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [*CALIBAN, "mcp", "search", "what time is it in Tokyo", *flags],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise SystemExit(f"caliban mcp search failed: {done.stderr}")
    return time.perf_counter() - started


def _interleaved(variants: dict[str, dict[str, str]], runs: int, once: Any) -> dict[str, list[Any]]:
    """``once(label, env)`` ``runs`` times per variant, alternating the order every round, so
    both see the same machine load."""
    results: dict[str, list[Any]] = {label: [] for label in variants}
    for i in range(runs):
        order = list(variants.items())
        for label, env in order if i % 2 == 0 else reversed(order):
            results[label].append(once(label, env))
    return results


def _median_rows(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in rows) for key in rows[0]}


def measure_caliban(prefix: Path, runs: int, before: Path | None = None) -> dict[str, Any]:
    """Every figure for the working tree ("now"), and for the checkout ``before`` if given,
    run by run in alternation."""
    with tempfile.TemporaryDirectory(prefix="caliban-p-bench-") as tmp:
        project, env = caliban_project(prefix, Path(tmp))
        bare = Path(tmp) / "bare"  # the same project without MCP servers
        (bare / ".caliban").mkdir(parents=True)
        (bare / ".git").mkdir()
        (bare / ".caliban" / "config.toml").write_text("[tools]\nlazy_mcp = true\n")
        variants = {"now": {**env, "CALIBAN_CACHE_DIR": str(Path(tmp) / "cache-now")}}
        if before is not None:
            variants = {
                "before": {
                    **env,
                    "PYTHONPATH": str(before.resolve()),
                    "CALIBAN_CACHE_DIR": str(Path(tmp) / "cache-before"),
                },
                **variants,
            }

        def cache(env: dict[str, str]) -> Path:
            return Path(env["CALIBAN_CACHE_DIR"])

        def cold(_label: str, env: dict[str, str]) -> dict[str, float]:
            shutil.rmtree(cache(env), ignore_errors=True)
            return one_p_run(project, env)

        def connect(_label: str, env: dict[str, str]) -> float:
            shutil.rmtree(cache(env), ignore_errors=True)
            return one_search(project, env)

        for env in variants.values():
            one_p_run(project, env)  # warm-up: disk caches, .pyc files
        results: dict[str, dict[str, Any]] = {label: {} for label in variants}
        measured = {
            "cold": _interleaved(variants, runs, cold),
            "cached": _interleaved(variants, runs, lambda _l, e: one_p_run(project, e)),
            "no MCP": _interleaved(variants, runs, lambda _l, e: one_p_run(bare, e)),
            "first_tool_search_s": _interleaved(
                variants, runs, lambda _l, e: one_tool_search(project, e)
            ),
            "search_cached_s": _interleaved(variants, runs, lambda _l, e: one_search(project, e)),
            "search_connect_s": _interleaved(variants, runs, connect),
        }
        for key, by_label in measured.items():
            for label, rows in by_label.items():
                results[label][key] = (
                    _median_rows(rows) if isinstance(rows[0], dict) else statistics.median(rows)
                )
    return {"runs": runs, "load": os.getloadavg()[0], "variants": results}


def report_caliban(result: dict[str, Any]) -> None:
    variants: dict[str, dict[str, Any]] = result["variants"]
    print(f"caliban -p hi, 5 reference servers, lazy_mcp = true, median of {result['runs']} runs")
    print(f"(load average {result['load']:.1f} on {os.cpu_count()} CPUs)")
    labels = list(variants)
    width = 22

    def row(title: str, cells: list[str]) -> None:
        print(f"{title:<44}" + "".join(f"{c:>{width}}" for c in cells))

    row("", labels)
    for kind in ("cold", "cached", "no MCP"):
        row(
            f"{kind}: whole run / first request",
            [
                f"{v[kind]['wall_s']:.2f}s / {v[kind]['first_request_s']:.2f}s"
                for v in variants.values()
            ],
        )
    row(
        "tools announced on turn 1 (cold, cached)",
        [
            f"{v['cold']['announced']:.0f}, {v['cached']['announced']:.0f} of 50"
            for v in variants.values()
        ],
    )
    row(
        f"first ToolSearch, cached (model: {MODEL_LATENCY_S:g}s)",
        [f"{v['first_tool_search_s'] * 1000:.0f} ms" for v in variants.values()],
    )
    row("mcp search, catalogs cached", [f"{v['search_cached_s']:.2f}s" for v in variants.values()])
    row("mcp search, nothing cached", [f"{v['search_connect_s']:.2f}s" for v in variants.values()])


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
    parser.add_argument(
        "--only", choices=["servers", "caliban"], help="measure only one of the two parts"
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="DIR",
        help="also run this (older) checkout, alternating with the working tree",
    )
    opts = parser.parse_args()
    if opts.before:
        CALIBAN[:] = [sys.executable, "-m", "caliban"]  # the same way for both
    env_prefix = os.environ.get("CALIBAN_REFERENCE_SERVERS")
    prefix = opts.prefix or (Path(env_prefix) if env_prefix else DEFAULT_PREFIX)
    ensure_installed(prefix)
    runs = max(1, opts.runs)
    result: dict[str, Any] = {}
    if opts.only != "caliban":
        result["servers"] = asyncio.run(measure(prefix, runs))
    if opts.only != "servers":
        result["caliban"] = measure_caliban(prefix, runs, opts.before)
    if opts.json:
        print(json.dumps(result, indent=2))
        return
    if "servers" in result:
        report(result["servers"])
    if "caliban" in result:
        if "servers" in result:
            print()
        report_caliban(result["caliban"])


if __name__ == "__main__":
    main()
