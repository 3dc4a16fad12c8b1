"""Pre-activation end to end: the real ``caliban -p``, the five public reference MCP servers
(``--mcp-config``, as a Claude Code user passes them) loaded lazily, and a scripted model.

"What time is it right now in Tokyo?" is the request a small local model failed with lazy
loading (it never searched): with ``tools.preactivate`` the first request already carries
the time server's tool, so a model that calls what it sees answers in one round trip.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import FakeModelServer
from mcp_servers.reference import reference_servers
from test_lazy_e2e import caliban, system_sent, tools_sent

from caliban.permissions.trust import trust

pytestmark = [pytest.mark.slow, pytest.mark.reference_servers]

TIME_TOOL = "mcp__time__get_current_time"
REQUEST = "What time is it right now in Tokyo?"


@pytest.fixture
def mcp_config(tmp_path: Path) -> Path:
    prefix = os.environ.get("CALIBAN_REFERENCE_SERVERS")
    if not prefix:
        pytest.skip("needs the reference MCP servers (CALIBAN_REFERENCE_SERVERS)")
    work = tmp_path / "work"
    work.mkdir()
    servers = {
        s.name: {"command": s.command, "args": list(s.args), "env": dict(s.env)}
        for s in reference_servers(Path(prefix), work)
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def ask(
    server: FakeModelServer, project: Path, mcp_config: Path, preactivate: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One ``-p`` run whose model calls the time tool at once; (its first request, result)."""
    trust(project)  # lazy loading is the user's choice: a project's config sets it if trusted
    # Pre-activation ranks the tools known: the first request waits for the servers here.
    (project / ".caliban" / "config.toml").write_text(
        f"[tools]\nlazy_mcp = true\npreactivate = {preactivate}\nwait_for_mcp = true\n"
    )
    first = len(server.requests)
    server.add(
        {"tool_calls": [{"name": TIME_TOOL, "arguments": {"timezone": "Asia/Tokyo"}}]},
        {"text": "It is evening in Tokyo."},
    )
    done = caliban(
        "-p",
        REQUEST,
        "--mcp-config",
        str(mcp_config),
        "--allowed-tools",
        "mcp__time",
        "--output-format",
        "json",
        cwd=project,
        server=server,
    )
    assert done.returncode == 0, done.stderr
    return server.requests[first].body, json.loads(done.stdout)


def test_the_first_request_for_the_time_in_tokyo_carries_the_time_tool(
    fake_model_server: FakeModelServer, project: Path, mcp_config: Path
) -> None:
    request, result = ask(fake_model_server, project, mcp_config, preactivate=3)
    mcp = [name for name in tools_sent(request) if name.startswith("mcp__")]
    assert TIME_TOOL in mcp and len(mcp) <= 3, mcp
    assert list(tools_sent(request))[-len(mcp) :] == mcp  # appended: the cached prefix holds
    prompt = json.dumps(request["messages"][-1])
    assert REQUEST in prompt and "caliban loaded these MCP tools for this request: " in prompt
    loaded = result["context"]["mcp"]["preactivated"]
    assert {"name": TIME_TOOL, "used": True} in loaded
    assert all(not entry["used"] for entry in loaded if entry["name"] != TIME_TOOL)

    # Off: the first request carries no MCP tool, and the system prompt is the same bytes.
    bare, result = ask(fake_model_server, project, mcp_config, preactivate=0)
    assert [name for name in tools_sent(bare) if name.startswith("mcp__")] == []
    assert "caliban loaded" not in json.dumps(bare["messages"])
    assert system_sent(bare) == system_sent(request)
    assert result["context"]["mcp"]["preactivated"] == []
