"""Lazy MCP loading while servers start: a real McpManager and the stdio catalog server
(held back at start), sessions through the agent loop with the scripted provider.

ToolSearch waits for a server whose tools are not known yet and says so; its answer names
servers that failed; a cached catalog makes turn 1 complete; and the system prompt is
byte-identical before and after activations, and from one session to the next.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from hang import HANG_S, hang_guard
from lazy_fakes import lazy_settings, make_session

from caliban.events import AgentEvent, Notice
from caliban.mcp.catalog_cache import CatalogCache
from caliban.mcp.client import McpManager
from caliban.mcp.config import ServerConfig
from caliban.messages import ToolResult
from caliban.providers.scripted import ScriptedProvider, reply, tool_call

pytestmark = pytest.mark.anyio

SERVERS = Path(__file__).parent / "mcp_servers"
GET_ISSUE = "mcp__catalog__get_issue"
LIST_BUCKETS = "mcp__catalog__list_buckets"


def catalog(gate: Path, name: str = "catalog") -> ServerConfig:
    return ServerConfig(
        name=name,
        transport="stdio",
        command=sys.executable,
        args=(str(SERVERS / "catalog_server.py"),),
        env={"CATALOG_GATE": str(gate)},
        startup_timeout=HANG_S,
    )


def broken() -> ServerConfig:
    return ServerConfig(
        name="tracker",
        transport="stdio",
        command=sys.executable,
        args=(str(SERVERS / "exit_at_once.py"),),
    )


@asynccontextmanager
async def manager(*configs: ServerConfig, cache: CatalogCache | None) -> AsyncIterator[McpManager]:
    mcp = McpManager(configs, catalog_cache=cache)
    mcp.start()
    try:
        yield mcp
    finally:
        await mcp.aclose()


def results(provider: ScriptedProvider, request: int) -> list[ToolResult]:
    return [p for p in provider.requests[request].messages[-1].parts if isinstance(p, ToolResult)]


@pytest.mark.slow
async def test_toolsearch_waits_for_a_server_still_starting(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    events: list[AgentEvent] = []

    def release_on_wait(event: AgentEvent) -> None:
        events.append(event)
        if isinstance(event, Notice) and event.text.startswith("waiting for"):
            gate.touch()  # the server may start now that ToolSearch waits for it

    provider = ScriptedProvider(
        [
            reply(tool_call("ToolSearch", {"query": "fetch one issue with its comments"})),
            reply(tool_call(GET_ISSUE, {"issue": "PLAT-7"})),
            "PLAT-7 is open.",
        ]
    )
    async with manager(catalog(gate), cache=None) as mcp:
        session = make_session(provider, tmp_path, mcp=mcp)  # type: ignore[arg-type]
        session.add_listener(release_on_wait)
        with hang_guard():
            result = await session.run("what is PLAT-7?")
    assert result.text == "PLAT-7 is open."
    first = provider.requests[0]
    assert provider.offered[0] == ["Echo", "Note", "ToolSearch"]
    assert first.system.endswith("Servers still starting (ToolSearch waits for them): catalog")
    assert [e.text for e in events if isinstance(e, Notice)] == ["waiting for catalog…"]
    [found] = results(provider, 1)
    assert f"{GET_ISSUE} (newly activated)" in found.text
    [ran] = results(provider, 2)
    assert not ran.is_error and "PLAT-7" in ran.text


@pytest.mark.slow
async def test_the_answer_names_a_server_that_failed(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    provider = ScriptedProvider(
        [reply(tool_call("ToolSearch", {"query": "fetch one issue", "max_results": 1})), "ok"]
    )
    async with manager(catalog(gate), broken(), cache=None) as mcp:
        with hang_guard():
            await mcp.wait_ready()
        session = make_session(provider, tmp_path, mcp=mcp)  # type: ignore[arg-type]
        with hang_guard():
            await session.run("what is PLAT-7?")
    [found] = results(provider, 1)
    assert found.text.startswith("Found 1 MCP tool for 'fetch one issue'.")
    assert found.text.endswith(
        "MCP server 'tracker' is not available (exited with code 3 while starting): its tools "
        "could not be searched, so the tool you need may be there. Tell the user."
    )


@pytest.mark.slow
async def test_the_system_prompt_is_byte_stable_across_activations_and_sessions(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    cache = CatalogCache(tmp_path / "cache")
    async with manager(catalog(gate), cache=cache) as mcp:  # lists and caches the catalog
        await mcp.wait_ready(20)

    def steps() -> list[object]:
        return [
            reply(tool_call("ToolSearch", {"query": "fetch one issue", "max_results": 2})),
            reply(tool_call(LIST_BUCKETS, {"region": "eu-west-1"})),  # called by name
            reply(tool_call("ToolSearch", {"query": "select:mcp__catalog__list_pipelines"})),
            "done",
        ]

    gate.unlink()  # the next sessions' server stays starting until released
    prompts: list[list[str]] = []
    for _session in range(2):
        provider = ScriptedProvider(steps())  # type: ignore[arg-type]
        async with manager(catalog(gate), cache=cache) as mcp:
            session = make_session(
                provider,
                tmp_path,
                mcp=mcp,  # type: ignore[arg-type]
                settings=lazy_settings(True, cap=2),  # the third activation evicts
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(_release_after_first_request, provider, gate)
                with hang_guard():
                    await session.run("file a bug about the crash")
            assert mcp.status("catalog").state == "connected"
        gate.unlink()
        prompts.append([request.system for request in provider.requests])
        assert len({tuple(names) for names in provider.offered}) == 4  # each turn changed them
    assert len({*prompts[0], *prompts[1]}) == 1  # every request of both sessions: one prompt
    assert "40 MCP tools from 1 server are loaded on demand." in prompts[0][0]


async def _release_after_first_request(provider: ScriptedProvider, gate: Path) -> None:
    """Let the server start once the first request went out (it was sent from the cache)."""
    while not provider.requests:  # noqa: ASYNC110
        await anyio.sleep(0.01)
    gate.touch()  # noqa: ASYNC240 - a test signal, instant
