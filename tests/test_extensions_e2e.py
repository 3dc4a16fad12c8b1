"""WebFetch, TodoWrite, custom commands and skills through the real executable (`caliban -p`),
the real SDKs and the fake model server; WebFetch reads a local web server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import CapturedRequest, FakeModelServer
from test_headless_e2e import lines, run
from web_server import WebServer

pytestmark = pytest.mark.slow


@pytest.fixture
def web() -> Iterator[WebServer]:
    with WebServer() as server:
        yield server


def tool_step(name: str, arguments: dict[str, Any], text: str = "") -> dict[str, Any]:
    return {"text": text, "tool_calls": [{"name": name, "arguments": arguments}]}


def user_frames(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        block
        for obj in objs
        if obj["type"] == "user"
        for block in obj["message"]["content"]
        if block["type"] == "tool_result"
    ]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_webfetch_answers_with_a_side_request_and_reports_redirects(
    fake_model_server: FakeModelServer, web: WebServer, provider: str, project: Path
) -> None:
    side_requests: list[CapturedRequest] = []

    def side(request: CapturedRequest) -> dict[str, Any]:
        side_requests.append(request)
        return {"text": "SIDE-MODEL SUMMARY: a big page."}

    fake_model_server.add(
        tool_step("WebFetch", {"url": f"{web.url}/big", "prompt": "Summarize the page"}),
        side,
        tool_step("WebFetch", {"url": f"{web.url}/redirect-cross", "prompt": "Summarize"}),
        {"text": "fetched"},
    )
    done = run(
        fake_model_server,
        provider,
        project,
        "--allowed-tools",
        "WebFetch(domain:127.0.0.1)",
        "--output-format",
        "stream-json",
        "fetch it",
    )
    assert done.returncode == 0, done.stderr
    objs = lines(done.stdout)
    assert objs[-1]["result"] == "fetched"
    summary, redirect = user_frames(objs)
    assert json.dumps(summary).count("SIDE-MODEL SUMMARY: a big page.") == 1
    assert "REDIRECT DETECTED" in json.dumps(redirect) and "localhost" in json.dumps(redirect)
    [side_request] = side_requests
    body = json.dumps(side_request.body)
    assert "BIG-MARKER" in body and "Summarize the page" in body
    assert not side_request.tool_names  # a side request carries no tools
    assert web.hits == ["/big", "/redirect-cross"]


def test_webfetch_is_denied_headless_without_a_rule(
    fake_model_server: FakeModelServer, web: WebServer, project: Path
) -> None:
    fake_model_server.add(
        tool_step("WebFetch", {"url": f"{web.url}/page", "prompt": "x"}), {"text": "denied"}
    )
    done = run(fake_model_server, "anthropic", project, "--output-format", "stream-json", "go")
    [result] = user_frames(lines(done.stdout))
    assert result.get("is_error") is True
    assert "WebFetch(domain:127.0.0.1)" in json.dumps(result)  # how to allow it
    assert web.hits == []


def test_todowrite_is_a_normal_tool_call_in_stream_json(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    todos = [{"content": "Write it", "status": "in_progress", "activeForm": "Writing it"}]
    fake_model_server.add(tool_step("TodoWrite", {"todos": todos}), {"text": "planned"})
    done = run(fake_model_server, "anthropic", project, "--output-format", "stream-json", "plan")
    objs = lines(done.stdout)
    [call] = [
        block
        for obj in objs
        if obj["type"] == "assistant"
        for block in obj["message"]["content"]
        if block["type"] == "tool_use"
    ]
    assert call["name"] == "TodoWrite" and call["input"] == {"todos": todos}
    [result] = user_frames(objs)
    assert "Todos have been modified successfully" in json.dumps(result)
    assert not result.get("is_error")
    assert "TodoWrite" in objs[0]["tools"]
