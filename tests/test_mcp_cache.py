"""The per-server tool-list cache: what it keys on, what it never stores, and how the
manager serves it before a server has started, refreshes it, and forgets a failed server."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hang import HANG_S, hang_guard

from caliban.mcp import client
from caliban.mcp.catalog_cache import CachedListing, CatalogCache
from caliban.mcp.client import McpManager
from caliban.mcp.config import ServerConfig
from caliban.mcp.tools import McpTool
from caliban.tools.base import CallContext, ToolEnv

pytestmark = pytest.mark.anyio

SERVERS = Path(__file__).parent / "mcp_servers"


def catalog_server(name: str = "catalog", **env: str) -> ServerConfig:
    return ServerConfig(
        name=name,
        transport="stdio",
        command=sys.executable,
        args=(str(SERVERS / "catalog_server.py"),),
        env=env,
        startup_timeout=HANG_S,
    )


def tool(name: str, description: str = "Does a thing.") -> McpTool:
    return McpTool(
        server="catalog",
        tool_name=name,
        name=f"mcp__catalog__{name}",
        description=description,
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        annotations={"readOnlyHint": True},
    )


def ctx() -> CallContext:
    return CallContext(env=ToolEnv(cwd=Path.cwd(), project_root=Path.cwd()), call_id="c1")


def test_entries_round_trip_and_keep_no_secret_value(tmp_path: Path) -> None:
    cache = CatalogCache(tmp_path)
    config = catalog_server(API_TOKEN="s3cret-value")
    cache.store(config, [tool("get_issue"), tool("create_issue")])
    entry = cache.load(config)
    assert entry is not None
    loaded = entry.tools
    assert [t.name for t in loaded] == ["mcp__catalog__get_issue", "mcp__catalog__create_issue"]
    assert loaded[0] == dataclasses.replace(tool("get_issue"), timeout=config.tool_timeout)
    [path] = tmp_path.iterdir()
    text = path.read_text()
    assert "s3cret-value" not in text and "API_TOKEN" in text  # the name keys, not the value
    # Another value of the same variable: the same entry (the server's listing corrects it).
    assert cache.load(catalog_server(API_TOKEN="other")) == entry


def test_an_entry_is_read_once_with_the_instructions_and_the_offer_of_resources(
    tmp_path: Path,
) -> None:
    cache = CatalogCache(tmp_path)
    config = catalog_server()
    cache.store(config, [tool("get_issue")], "Issues are PLAT-n.", resources=True)
    entry = cache.load(config)
    assert entry is not None
    assert (entry.instructions, entry.resources) == ("Issues are PLAT-n.", True)
    cache.store(config, entry.tools)
    assert cache.load(config) == CachedListing(tools=entry.tools)


def test_a_tool_its_server_marks_always_load_stays_so_from_the_cache(tmp_path: Path) -> None:
    """Served from the cache before its server has listed, an alwaysLoad tool is still on the
    wire from the first request (it was deferred until the server answered)."""
    cache = CatalogCache(tmp_path)
    config = catalog_server()
    pinned = dataclasses.replace(tool("get_issue"), always_load=True)
    cache.store(config, [pinned, tool("create_issue")])
    entry = cache.load(config)
    assert entry is not None
    assert [t.always_load for t in entry.tools] == [True, False]


@pytest.mark.parametrize(
    "changed",
    [
        {"args": ("other.py",)},
        {"env": {"OTHER": "x"}},
        {"command": "/usr/bin/other"},
        {"cwd": Path("/tmp")},
        {"name": "renamed"},
    ],
)
def test_another_configuration_is_another_entry(tmp_path: Path, changed: dict[str, Any]) -> None:
    cache = CatalogCache(tmp_path)
    config = catalog_server()
    cache.store(config, [tool("get_issue")])
    other = dataclasses.replace(config, **changed)
    assert cache.load(other) is None and cache.load(config) is not None


def test_unreadable_or_foreign_entries_are_ignored(tmp_path: Path) -> None:
    cache = CatalogCache(tmp_path)
    config = catalog_server()
    cache.store(config, [tool("get_issue")])
    path = cache.path(config)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "identity": {**data["identity"], "format": 0}}))
    assert cache.load(config) is None
    path.write_text('{"identity": ')
    assert cache.load(config) is None
    path.write_text(json.dumps({**data, "extra": 1}))
    assert cache.load(config) is None
    cache.forget(config)
    assert not path.exists()


@pytest.mark.slow
async def test_cached_tools_are_served_before_the_server_starts_and_calls_wait_for_it(
    tmp_path: Path,
) -> None:
    cache = CatalogCache(tmp_path / "cache")
    gate = tmp_path / "gate"
    config = catalog_server(CATALOG_GATE=str(gate))
    async with McpManager([config], catalog_cache=cache) as manager:
        gate.touch()
        await manager.wait_ready(20)
    gate.unlink()
    assert cache.load(config) is not None  # the server's listing was stored

    manager = McpManager([config], catalog_cache=cache)
    try:
        listed = manager.tools()
        assert len(listed) == 40 and manager.unlisted() == ()
        manager.start()
        assert manager.status("catalog").state == "connecting"
        get_issue = next(t for t in listed if t.tool_name == "get_issue")
        with hang_guard():
            async with anyio.create_task_group() as tg:
                results = []

                async def call() -> None:
                    results.append(await get_issue.call({"issue": "PLAT-7"}, ctx()))

                tg.start_soon(call)
                await anyio.sleep(0.2)
                assert not results  # waiting for its server
                gate.touch()
        [result] = results
        assert not result.is_error and "PLAT-7" in result.as_text
        # The server listed the same tools: the catalog did not change.
        assert manager.version == 0 and manager.tools() is listed
    finally:
        await manager.aclose()


@pytest.mark.slow
async def test_a_different_listing_replaces_the_cached_one(tmp_path: Path) -> None:
    cache = CatalogCache(tmp_path)
    config = catalog_server()
    cache.store(config, [tool("retired_tool")])
    async with McpManager([config], catalog_cache=cache) as manager:
        assert [t.tool_name for t in manager.tools()] == ["retired_tool"]
        with hang_guard():
            await manager.wait_ready()
        assert manager.version == 1 and len(manager.tools()) == 40
    stored = cache.load(config)
    assert stored is not None and len(stored.tools) == 40
    assert "retired_tool" not in {t.tool_name for t in stored.tools}


async def test_a_server_that_fails_to_start_is_forgotten_a_slow_one_is_not(
    tmp_path: Path,
) -> None:
    cache = CatalogCache(tmp_path)
    failing = ServerConfig(
        name="broken",
        transport="stdio",
        command=sys.executable,
        args=(str(SERVERS / "exit_at_once.py"),),
    )
    slow = ServerConfig(
        name="slow",
        transport="stdio",
        command=sys.executable,
        args=(str(SERVERS / "hang_on_initialize.py"),),
        startup_timeout=0.5,
    )
    cache.store(failing, [tool("a")])
    cache.store(slow, [tool("b")])
    async with McpManager([failing, slow], catalog_cache=cache) as manager:
        assert len(manager.tools()) == 2  # both announced from the cache
        with hang_guard():
            statuses = await manager.wait_ready()
        assert [s.state for s in statuses] == ["failed", "failed"]
        assert len(manager.tools()) == 2  # kept for this session: calling one retries
    assert cache.load(failing) is None
    assert cache.load(slow) is not None


@pytest.mark.slow
async def test_unlisted_names_servers_whose_tools_are_not_known_yet(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    cache = CatalogCache(tmp_path / "cache")
    known = catalog_server("known", CATALOG_GATE=str(gate))
    cache.store(known, [tool("get_issue")])
    fresh = catalog_server("fresh", CATALOG_GATE=str(gate))
    async with McpManager([known, fresh], catalog_cache=cache) as manager:
        assert manager.unlisted() == ("fresh",)
        with hang_guard():
            async with anyio.create_task_group() as tg:
                tg.start_soon(manager.wait_listed, ["fresh"])
                await anyio.sleep(0.1)
                gate.touch()
        assert manager.unlisted() == ()
        assert manager.status("fresh").state == "connected"
    assert cache.load(fresh) is not None


@pytest.mark.slow
async def test_a_new_listing_is_written_after_the_first_request_could_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "CACHE_WRITE_DELAY", 3600.0)
    cache = CatalogCache(tmp_path)
    config = catalog_server()
    async with McpManager([config], catalog_cache=cache) as manager:
        with hang_guard():
            await manager.wait_ready()
        assert len(manager.tools()) == 40
        assert cache.load(config) is None  # not on the first request's path
    stored = cache.load(config)  # written when the manager closed, before its hour
    assert stored is not None and len(stored.tools) == 40
