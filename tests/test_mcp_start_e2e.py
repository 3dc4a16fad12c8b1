"""``caliban -p`` does not hold its first request for MCP servers still starting (issue 30):
the real executable, the fake model server and the stdio catalog server (the MCP SDK's
server) held at start until the test opens its gate — when the first request has arrived.

Claude Code 2.1.197 does the same (recorded with tests/fixtures/claude_code/harness): its
first request carries the tools listed by then and ``WaitForMcpServers``; a server's tools
join a later request once it has listed them.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import CapturedRequest, FakeModelServer
from test_boundary_e2e import caliban

from caliban.permissions.trust import trust

pytestmark = pytest.mark.slow
SERVERS = Path(__file__).parent / "mcp_servers"
WAIT = "WaitForMcpServers"


def configure(project: Path, gate: Path, *, config: str = "") -> None:
    trust(project)
    (project / ".caliban" / "mcp.toml").write_text(
        "[server.catalog]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVERS / 'catalog_server.py'))}]\n"
        f"env = {{ CATALOG_GATE = {json.dumps(str(gate))} }}\n"
    )
    if config:
        (project / ".caliban" / "config.toml").write_text(config)


def tool_list_text(body_text: str) -> str:
    """The ``tools`` value of a request body exactly as it was sent."""
    match = re.search(r'"tools"\s*:\s*', body_text)
    assert match is not None, body_text[:200]
    _, end = json.JSONDecoder().raw_decode(body_text, match.end())
    return body_text[match.end() : end]


def frames(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_the_first_request_goes_first_and_wait_brings_the_servers_tools(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    gate = project / "gate"
    configure(project, gate)

    def first(request: CapturedRequest) -> dict[str, Any]:
        gate.touch()  # the server may start now that the first request has left
        return {"tool_calls": [{"name": WAIT, "arguments": {}}]}

    fake_model_server.add(
        first,
        {"tool_calls": [{"name": "mcp__catalog__get_issue", "arguments": {"issue": "PLAT-7"}}]},
        {"text": "PLAT-7 is open."},
    )
    done = caliban(fake_model_server, project, "--allowed-tools", "mcp__catalog", "what is PLAT-7?")
    assert done.returncode == 0, done.stderr
    before, after, _ = (tool_list_text(r.text) for r in fake_model_server.requests)
    names = [tool["name"] for tool in json.loads(before)]
    assert WAIT in names and not any(n.startswith("mcp__catalog__") for n in names)
    # The servers' tools join at the end: the earlier list is a prefix, byte for byte.
    assert after.startswith(before[:-1]) and "mcp__catalog__get_issue" in after[len(before) :]
    out = frames(done.stdout)
    assert {"name": "catalog", "status": "pending"} in out[0]["mcp_servers"]
    assert WAIT in out[0]["tools"]
    [waited] = [
        f for f in out if f["type"] == "user" and f["message"]["content"][0].get("tool_use_id")
    ][:1]
    block = waited["message"]["content"][0]
    # Claude Code's frame for the same call (2.1.197): the same text and tool_use_result.
    assert block["content"] == (
        "ready: true\nConnected (their tools are now available \u2014 call them directly): catalog"
    )
    assert block["is_error"] is False
    assert waited["tool_use_result"] == {
        "ready": True,
        "connected": ["catalog"],
        "failed": [],
        "stillPending": [],
        "needsAuth": [],
        "disabled": [],
        "unknown": [],
    }
    assert out[-1]["result"] == "PLAT-7 is open."


def test_a_server_that_never_starts_does_not_hold_the_run(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    configure(project, project / "never-opened")
    fake_model_server.add({"text": "ok"})
    done = caliban(fake_model_server, project, "say ok")
    assert done.returncode == 0, done.stderr
    assert frames(done.stdout)[-1]["result"] == "ok"
    [request] = fake_model_server.requests
    assert WAIT in request.tool_names


def test_wait_for_mcp_brings_back_the_wait(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    gate = project / "gate"
    gate.touch()
    configure(project, gate, config="[tools]\nwait_for_mcp = true\n")
    fake_model_server.add({"text": "ok"})
    done = caliban(fake_model_server, project, "say ok")
    assert done.returncode == 0, done.stderr
    [request] = fake_model_server.requests
    assert "mcp__catalog__get_issue" in request.tool_names
    assert WAIT not in request.tool_names
