"""``/mcp`` as a small manager: view a server's tools, disable and enable it — in the
running session and, as Claude Code's ``disabledMcpServers``, for this project from now on
(the user's own state, never the project's files)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hang import hang_guard
from mcp_servers.features import build
from test_mcp_offers import offered
from test_repl import CTRL_D, ENTER, harness

from caliban.mcp.client import McpManager
from caliban.mcp.config import ServerConfig, load_mcp_config, local_state_path

pytestmark = pytest.mark.anyio
FEATURES = Path(__file__).parent / "mcp_servers" / "features.py"


async def test_mcp_tools_shows_a_server_s_tools_and_their_hints_and_help_its_prompts(
    project: Path,
) -> None:
    async with McpManager(in_process={"travel": build()}, connect_mode="legacy") as manager:
        with hang_guard():
            await manager.wait_ready()
            await offered(manager, lambda: bool(manager.prompts()))
        async with harness([], project, mcp=manager) as h:
            keys = "/mcp tools travel" + ENTER + "/mcp tools nope" + ENTER + "/help" + ENTER
            await h.run(keys + CTRL_D)
    rows = {line.split()[0]: line for line in h.lines if line.lstrip().startswith("mcp__travel")}
    assert set(rows) >= {"mcp__travel__fares", "mcp__travel__cancel", "mcp__travel__book"}
    assert "destructive" in rows["mcp__travel__cancel"]
    assert "Cancel a trip" in rows["mcp__travel__cancel"]
    assert "destructive" not in rows["mcp__travel__fares"]
    assert "No MCP server 'nope' (servers: travel)" in h.lines
    assert "MCP prompts" in h.lines
    assert any(
        line.split() == ["/mcp__travel__plan", "city", "[days]", "Plan", "a", "trip."]
        for line in h.lines
    )


@pytest.mark.slow
async def test_disable_stops_a_server_for_this_project_and_enable_starts_it_again(
    project: Path,
) -> None:
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"travel": {"command": sys.executable, "args": [str(FEATURES)]}}})
    )
    [travel] = load_mcp_config(project, trusted=True).servers
    async with McpManager([travel]) as manager:
        with hang_guard():
            await manager.wait_ready()
        pid = manager.status("travel").pid
        assert pid is not None
        async with harness([], project, mcp=manager) as h:
            await h.run("/mcp disable travel" + ENTER + CTRL_D)
            assert manager.status("travel").state == "disabled"
            assert not [t for t in manager.tools() if t.server == "travel"]
            assert not manager.prompts() and not manager.resources()
            outcome = await manager.call_tool("travel", "fares", {"city": "Rome"})
            assert type(outcome).__name__ == "ServerDisabled"
            # The next session does not start it, -p included.
            [again] = load_mcp_config(project, trusted=True).servers
            assert again.disabled
            saved = json.loads(local_state_path(project).read_text())
            assert saved == {"disabledMcpServers": ["travel"]}

            await h.run("/mcp enable travel" + ENTER + CTRL_D)
            assert manager.status("travel").state == "connected"
            assert manager.status("travel").pid not in (None, pid)
            assert [t for t in manager.tools() if t.server == "travel"]
    assert "travel: disabled for this project; `/mcp enable travel` starts it again" in h.lines
    assert "travel: connected" in h.lines
    assert not load_mcp_config(project, trusted=True).servers[0].disabled
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["travel"]


async def test_enable_says_where_an_entry_disables_its_server(project: Path) -> None:
    (project / ".caliban" / "mcp.toml").write_text(
        '[server.off]\ncommand = "true"\ndisabled = true\n'
    )
    [off] = load_mcp_config(project, trusted=True).servers
    assert isinstance(off, ServerConfig) and off.disabled
    async with McpManager([off]) as manager, harness([], project, mcp=manager) as h:
        await h.run("/mcp enable off" + ENTER + CTRL_D)
        assert manager.status("off").state == "disabled"
    said = " ".join(h.lines)
    assert "off is disabled by its entry in" in said and "(disabled = true)" in said
