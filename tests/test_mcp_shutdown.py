"""Stopping stdio MCP servers at the end of a session: one that was only asked for its
tools is stopped at once (nothing to save, and a headless run's exit should not wait a
second or more for it); one that answered a request first gets its grace period to leave on
its own after its stdin closes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hang import hang_guard

from caliban.mcp import stdio
from caliban.mcp.client import McpManager
from caliban.mcp.config import ServerConfig
from caliban.tools.base import CallContext, ToolEnv

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).parent / "mcp_servers" / "leaving.py"


def leaving(name: str, log: Path, *, delay: float = 0.0) -> ServerConfig:
    return ServerConfig(
        name=name,
        transport="stdio",
        command=sys.executable,
        args=(str(SERVER),),
        env={"LEAVING_LOG": str(log), "LEAVING_DELAY": str(delay)},
    )


async def test_a_server_only_listed_is_stopped_at_once_a_used_one_leaves_on_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A grace period longer than the test: a server given one leaves on its own.
    monkeypatch.setattr(stdio, "STOP_GRACE", 3600.0)
    listed, used = tmp_path / "listed.log", tmp_path / "used.log"
    servers = [leaving("listed", listed, delay=3600.0), leaving("used", used)]
    with hang_guard():
        async with McpManager(servers) as manager:
            statuses = await manager.wait_ready()
            assert [s.state for s in statuses] == ["connected", "connected"]
            [ping] = [t for t in manager.tools() if t.server == "used"]
            env = ToolEnv(cwd=tmp_path, project_root=tmp_path)
            result = await ping.call({}, CallContext(env=env, call_id="c1"))
            assert not result.is_error and "pong" in result.as_text
    assert listed.read_text() == "terminated\n"  # not after its hour of grace
    assert used.read_text() == "left\n"
