"""An MCP server's elicitation under ``--input-format stream-json``: forwarded to the Agent
SDK as Claude Code 2.1.197 forwards it (``tests/fixtures/claude_code/elicitation_*``, recorded
with ``harness/record_elicitation.py``): a ``control_request`` of subtype ``elicitation``
whose ``action`` and ``content`` reach the server; an error response, or stdin closing,
cancels. Through the real executable, against the SDK server of ``mcp_servers/features.py``,
and with the Python Agent SDK as the client (it answers the subtype with an error)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_code_recordings import FIXTURES
from fake_model_server import FakeModelServer
from hang import hang_guard
from test_mcp_features import add_travel
from test_permission_prompt_stdio_e2e import Run, sdk_session, success

from caliban.mcp.elicit import ElicitAnswer, Elicitation
from caliban.mcp.sdk_elicit import StdioElicitor, answer_from

pytestmark = pytest.mark.anyio
STREAM_JSON = ("--output-format", "stream-json", "--verbose", "--input-format", "stream-json")
BOOK = [
    {"tool_calls": [{"id": "toolu_b1", "name": "mcp__travel__book", "arguments": {}}]},
    {"text": "Done."},
]


def recorded_request(name: str) -> dict[str, Any]:
    frames = (FIXTURES / name / "stdout.jsonl").read_text().splitlines()
    [request] = [f for f in map(json.loads, frames) if f["type"] == "control_request"]
    body: dict[str, Any] = request["request"]
    return body


def recorded_result(name: str) -> str:
    frames = (FIXTURES / name / "stdout.jsonl").read_text().splitlines()
    for frame in map(json.loads, frames):
        content = frame.get("message", {}).get("content")
        if frame["type"] == "user" and content[0].get("tool_use_id") == "toolu_b1":
            return str(content[0]["content"][0]["text"])
    raise AssertionError(name)


def travel_project(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    add_travel(project, os.environ)
    return project


def book(server: FakeModelServer, project: Path, answer: Any) -> tuple[Run, str]:
    server.add(*BOOK)
    run = sdk_session(
        server, project, answer, "--allowedTools", "mcp__travel__book", argv=("-p", *STREAM_JSON)
    )
    assert run.code == 0, run.stderr
    return run, json.dumps(run.tool_result()["content"])


@pytest.mark.slow
def test_the_agent_sdk_answers_an_elicitation_as_claude_code_asks_it(
    fake_model_server: FakeModelServer, tmp_path: Path
) -> None:
    project = travel_project(tmp_path)
    asked: list[dict[str, Any]] = []

    def accept(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request["request"])
        content = {"name": "Ada", "seats": 2, "window": True}
        return success(request, {"action": "accept", "content": content})

    _, result = book(fake_model_server, project, accept)
    assert asked == [recorded_request("elicitation_accept")]  # Claude Code's very frame
    assert recorded_result("elicitation_accept") in result

    def refuse(request: dict[str, Any]) -> dict[str, Any]:
        failed = {"subtype": "error", "request_id": request["request_id"], "error": "unknown"}
        return {"type": "control_response", "response": failed}

    _, result = book(fake_model_server, project, refuse)
    assert recorded_result("elicitation_error") == "booking canceld" and "canceld" in result

    _, result = book(fake_model_server, project, lambda request: None)  # stdin closes
    assert "booking canceld" in result


async def test_the_elicitor_cancels_what_is_not_an_answer() -> None:
    sent: list[dict[str, Any]] = []
    elicitor = StdioElicitor(send=sent.append)
    request = Elicitation(server="s", message="?", url="https://example.com/x", elicitation_id="e1")
    waiting = asyncio.ensure_future(elicitor(request))
    await asyncio.sleep(0)
    [frame] = sent
    assert frame["request"] == {
        "subtype": "elicitation",
        "mcp_server_name": "s",
        "message": "?",
        "mode": "url",
        "url": "https://example.com/x",
        "elicitation_id": "e1",
    }
    assert not elicitor.answer({"response": {"request_id": "other"}})
    ok = {"subtype": "success", "request_id": frame["request_id"], "response": {"action": "accept"}}
    assert elicitor.answer({"response": ok})
    assert await waiting == ElicitAnswer(action="accept", content={})
    nested = {"subtype": "success", "response": {"action": "accept", "content": {"a": {"b": 1}}}}
    assert answer_from(nested) == ElicitAnswer(action="cancel")
    assert answer_from({"subtype": "success", "response": {"action": "maybe"}}).action == "cancel"
    elicitor.close()
    assert (await elicitor(request)).action == "cancel"


@pytest.mark.slow
async def test_the_python_agent_sdk_as_client_gets_a_cancelled_elicitation(
    tmp_path: Path,
) -> None:
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage

    project = travel_project(tmp_path)
    with FakeModelServer(BOOK) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env.update(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.anthropic_base_url)
        options = ClaudeAgentOptions(
            cli_path=str(Path(sys.executable).parent / "caliban"),
            cwd=str(project),
            env=env,
            allowed_tools=["mcp__travel__book"],
        )
        with hang_guard():
            async with ClaudeSDKClient(options) as client:
                await client.query("book a seat")
                async for message in client.receive_response():
                    if isinstance(message, ResultMessage):
                        assert not message.is_error, message.result
        answered = json.dumps(server.requests[-1].body["messages"][-1])
    assert "booking canceld" in answered  # the SDK does not know the subtype: cancelled
