"""Lazy MCP loading: tool-definition tokens of the first request, eager vs lazy.

Run: ``python benchmarks/lazy_tokens.py`` (``--no-servers`` to build the real catalogs from
their JSON instead of serving them from a test MCP server; ``--sizes`` for the synthetic ones).

For each catalog a real :class:`~caliban.session.session.Session` builds its first request twice —
``tools.lazy_mcp = false`` and ``true`` — and the request goes through the providers' own
body builders (``caliban.providers.anthropic.build_params``, ``openai.wire_tool``). Counted is
what lazy loading changes on the wire: the MCP tool definitions (eager), or the ToolSearch
definition plus the deferred paragraph in the system prompt (lazy). Built-in tools and the
base system prompt are the same either way and left out. Tokens are caliban's offline
estimate (``caliban.util.tokens``: compact JSON or text, 4 characters a token).

Catalogs:

* the five reference servers (``benchmarks/reference_tools.json``: everything, filesystem,
  memory, time, git) and a GitHub-sized server (``../shared/eval/catalog_github.json``, 117
  real tools), each served over stdio by ``tests/mcp_servers/catalog_server.py --catalog`` and
  listed by caliban's MCP client, so the schemas are exactly what a server hands over;
* synthetic catalogs of 50, 200, 1,000 and 5,000 tools (``_catalogs.synthetic_catalog``).

Also timed, at 1,000 tools: the per-turn wire filter (the session toolset's ``offered`` plus
``system_addendum``: steady state, right after an activation, after a catalog change) and the
``/context`` report.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _catalogs import EVAL_DIR, REFERENCE_TOOLS, REPO_ROOT, synthetic_catalog

from caliban.config.settings import Settings
from caliban.mcp.tools import McpTool
from caliban.messages import Message
from caliban.providers.anthropic import build_params
from caliban.providers.openai import wire_tool as openai_wire_tool
from caliban.providers.scripted import ScriptedProvider
from caliban.search.index import SearchDoc
from caliban.session.context import context_report
from caliban.session.session import Session
from caliban.tools.base import CallContext, ToolEnv, call_tool
from caliban.tools.builtin import builtin_tools
from caliban.util.tokens import estimate_json_tokens, estimate_tokens, json_size

CATALOG_SERVER = REPO_ROOT / "tests" / "mcp_servers" / "catalog_server.py"
GITHUB = EVAL_DIR / "catalog_github.json"


class Catalog:
    """The part of McpManager a Session reads, over a fixed list of tools."""

    def __init__(self, tools: Sequence[McpTool]) -> None:
        self._tools = tuple(tools)

    def tools(self) -> tuple[McpTool, ...]:
        return self._tools

    def server_names(self) -> list[str]:
        return list(dict.fromkeys(t.server for t in self._tools))

    def server_config(self, name: str) -> None:
        return None

    def statuses(self) -> list[Any]:
        return []

    def unlisted(self) -> tuple[str, ...]:
        return ()  # every server has listed its tools

    async def wait_listed(
        self,
        names: Sequence[str],
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> list[Any]:
        return []


def from_docs(docs: Sequence[SearchDoc]) -> list[McpTool]:
    return [
        McpTool(
            server=d.server,
            tool_name=d.tool,
            name=d.name,
            description=d.description,
            input_schema=d.input_schema,
        )
        for d in docs
    ]


def server_files(tmp: Path) -> list[tuple[str, Path]]:
    """One ``{"server", "tools"}`` file per real server, for catalog_server.py --catalog."""
    files = []
    for server in json.loads(REFERENCE_TOOLS.read_text())["servers"]:
        path = tmp / f"{server['server']}.json"
        path.write_text(json.dumps({"server": server["server"], "tools": server["tools"]}))
        files.append((server["server"], path))
    if GITHUB.is_file():
        files.append(("github", GITHUB))
    return files


async def served_tools(files: Sequence[tuple[str, Path]]) -> list[McpTool]:
    """Start a stdio test server per catalog file and list the tools through caliban's client."""
    from caliban.mcp.client import McpManager
    from caliban.mcp.config import ServerConfig

    configs = [
        ServerConfig(
            name=name,
            transport="stdio",
            command=sys.executable,
            args=(str(CATALOG_SERVER), "--catalog", str(path)),
            startup_timeout=30,
        )
        for name, path in files
    ]
    async with McpManager(configs) as manager:
        statuses = await manager.wait_ready(timeout=60)
        failed = [s.name for s in statuses if s.state != "connected"]
        if failed:
            raise SystemExit(f"test servers did not start: {failed}")
        return list(manager.tools())


def real_tools(serve: bool) -> list[McpTool]:
    if serve:
        with tempfile.TemporaryDirectory() as tmp:
            return asyncio.run(served_tools(server_files(Path(tmp))))
    from _catalogs import load_github_catalog, load_reference_tools

    docs = load_reference_tools()
    if GITHUB.is_file():
        docs += load_github_catalog(EVAL_DIR)
    return from_docs(docs)


# ---------------------------------------------------------------------------- measuring


@dataclass(frozen=True, kw_only=True)
class Row:
    label: str
    tools: int
    servers: int
    eager_tokens: int
    eager_chars: int
    lazy_tokens: int
    lazy_chars: int
    paragraph_tokens: int
    openai_eager_tokens: int
    openai_lazy_tokens: int

    @property
    def saved(self) -> float:
        return 100 * (1 - self.lazy_tokens / self.eager_tokens)


def session(tools: Sequence[McpTool], lazy: bool) -> Session:
    root = Path.cwd()
    return Session(
        settings=Settings.model_validate({"tools": {"lazy_mcp": lazy}}),
        provider=ScriptedProvider([]),
        model="claude-sonnet-4-5",
        system_prompt="(base system prompt)",
        env=ToolEnv(cwd=root, project_root=root),
        builtins=builtin_tools(),
        mcp=Catalog(tools),  # type: ignore[arg-type]
    )


def first_request(tools: Sequence[McpTool], lazy: bool) -> tuple[dict[str, Any], str]:
    """The Anthropic request body of the first turn, and the system-prompt addendum."""
    agent = session(tools, lazy).agent()
    agent.conversation.messages.append(Message.user("hello"))
    body = build_params(agent.build_request())
    return body, agent.toolset.system_addendum()


def measure(label: str, tools: Sequence[McpTool]) -> Row:
    builtin = {t.name for t in builtin_tools()}
    eager_body, _ = first_request(tools, lazy=False)
    lazy_body, addendum = first_request(tools, lazy=True)
    eager_defs = [t for t in eager_body["tools"] if t["name"] not in builtin]
    lazy_defs = [t for t in lazy_body["tools"] if t["name"] not in builtin]
    assert len(eager_defs) == len(tools) and [t["name"] for t in lazy_defs] == ["ToolSearch"]
    lazy_text = "\n\n" + addendum  # as appended to the system prompt
    specs = [t.spec for t in tools]
    toolsearch = session(tools, True).toolset.find("ToolSearch")
    assert toolsearch is not None
    return Row(
        label=label,
        tools=len(tools),
        servers=len({t.server for t in tools}),
        eager_tokens=sum(estimate_json_tokens(t) for t in eager_defs),
        eager_chars=sum(json_size(t) for t in eager_defs),
        lazy_tokens=sum(estimate_json_tokens(t) for t in lazy_defs) + estimate_tokens(lazy_text),
        lazy_chars=sum(json_size(t) for t in lazy_defs) + len(lazy_text),
        paragraph_tokens=estimate_tokens(lazy_text),
        openai_eager_tokens=sum(estimate_json_tokens(openai_wire_tool(s)) for s in specs),
        openai_lazy_tokens=estimate_json_tokens(openai_wire_tool(toolsearch.spec))
        + estimate_tokens(lazy_text),
    )


def after_one_search(tools: Sequence[McpTool], query: str) -> tuple[int, int, int]:
    """(result tokens, tool tokens on the next request, tools activated) for one ToolSearch."""
    s = session(tools, True)
    toolsearch = s.toolset.find("ToolSearch")
    assert toolsearch is not None and s.activation is not None
    ctx = CallContext(env=s.env, call_id="bench")
    output = asyncio.run(call_tool(toolsearch, {"query": query}, ctx))
    builtin = {t.name for t in builtin_tools()}
    defs = [t.spec.as_dict() for t in s.toolset.offered() if t.name not in builtin]
    addendum = s.toolset.system_addendum()
    on_wire = sum(estimate_json_tokens(d) for d in defs) + estimate_tokens(addendum)
    return estimate_tokens(output.as_text), on_wire, len(s.activation.get())


def filter_cost(n: int) -> tuple[float, float, float, float]:
    """µs at ``n`` tools: a turn's wire filter in steady state, after an activation and after a
    catalog change, and one ``/context`` report."""
    tools = from_docs(synthetic_catalog(n, seed=1))
    s = session(tools, True)
    cell = s.activation
    assert cell is not None
    cell.activate([t.name for t in tools[:10]])
    toolset = s.toolset

    def turn() -> None:
        toolset.offered()
        toolset.system_addendum()

    turn()
    steady = _median_us(turn, 2000)
    names = [t.name for t in tools]

    def activate_then_turn() -> None:
        cell.activate([names[int(time.perf_counter_ns()) % n]])
        turn()

    activated = _median_us(activate_then_turn, 300)
    assert isinstance(s.mcp, Catalog)
    mcp = s.mcp

    def catalog_change_then_turn() -> None:
        mcp._tools = tuple(tools)  # a new tuple: the manager's tool list changed
        turn()

    changed = _median_us(catalog_change_then_turn, 50)
    context = _median_us(lambda: context_report(s), 200)
    return steady, activated, changed, context


def _median_us(fn: Any, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e6


# ---------------------------------------------------------------------------- output


def print_table(rows: Sequence[Row]) -> None:
    print(
        "| catalog | tools | servers | eager tokens | lazy tokens (ToolSearch + paragraph) "
        "| saved | OpenAI shape: eager / lazy |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.label} | {r.tools:,} | {r.servers} | {r.eager_tokens:,} "
            f"({r.eager_chars:,} chars) | {r.lazy_tokens:,} ({r.paragraph_tokens:,} paragraph) "
            f"| {r.saved:.1f}% | {r.openai_eager_tokens:,} / {r.openai_lazy_tokens:,} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--no-servers", action="store_true", help="read the real catalogs, do not serve them"
    )
    parser.add_argument("--sizes", type=int, nargs="*", default=[50, 200, 1000, 5000])
    args = parser.parse_args()

    real = real_tools(serve=not args.no_servers)
    source = "JSON" if args.no_servers else "stdio test servers"
    reference = [t for t in real if t.server != "github"]
    github = [t for t in real if t.server == "github"]
    rows = [measure("reference servers (5)", reference)]
    if github:
        rows.append(measure("GitHub", github))
        rows.append(measure("reference + GitHub", real))
    else:
        print(f"(GitHub catalog not found at {GITHUB}: its rows are skipped)")
    for n in args.sizes:
        rows.append(measure(f"synthetic {n:,}", from_docs(synthetic_catalog(n, seed=1))))
    print(f"First request, tool-definition tokens (real catalogs from {source}):\n")
    print_table(rows)

    print("\nOne ToolSearch on the real catalog (default max_results 5):\n")
    print("| query | result tokens | MCP tokens on the next request | active |")
    print("|---|---|---|---|")
    for query in ("create a pull request", "what time is it in Tokyo", "read a file"):
        result, wire, active = after_one_search(real, query)
        print(f"| {query} | {result:,} | {wire:,} | {active} |")

    steady, activated, changed, context = filter_cost(1000)
    print("\nWire filter per turn at 1,000 MCP tools (median):")
    print(f"  unchanged turn: {steady:.1f} µs; after an activation: {activated:.1f} µs;")
    print(f"  after a catalog change (split and paragraph rebuilt): {changed:.0f} µs")
    print(f"/context report at 1,000 MCP tools (median): {context:.0f} µs")


if __name__ == "__main__":
    main()
