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
        "--verbose",
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
    done = run(
        fake_model_server, "anthropic", project, "--output-format", "stream-json", "--verbose", "go"
    )
    [result] = user_frames(lines(done.stdout))
    assert result.get("is_error") is True
    assert "WebFetch(domain:127.0.0.1)" in json.dumps(result)  # how to allow it
    assert web.hits == []


def test_todowrite_is_a_normal_tool_call_in_stream_json(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    todos = [{"content": "Write it", "status": "in_progress", "activeForm": "Writing it"}]
    fake_model_server.add(tool_step("TodoWrite", {"todos": todos}), {"text": "planned"})
    done = run(
        fake_model_server,
        "anthropic",
        project,
        "--output-format",
        "stream-json",
        "--verbose",
        "plan",
    )
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


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def first_user_texts(request: CapturedRequest) -> list[str]:
    content = request.body["messages"][0]["content"]
    return [block["text"] for block in content if block.get("type") == "text"]


def test_a_custom_command_runs_headless(
    fake_model_server: FakeModelServer, project: Path, isolated_dirs: Path
) -> None:
    write(
        isolated_dirs / "claude",  # the user's ~/.claude: runs without trusting the project
        {
            "commands/mycmd.md": "---\ndescription: My custom command\n"
            "argument-hint: [file] [mode]\n---\nPlease handle $ARGUMENTS carefully.\n"
            "First: $1. Second: $2.\nBang: !`echo bang-output`\nFile: @hello.txt\n"
        },
    )
    write(project, {"hello.txt": "hello world\n"})
    fake_model_server.add({"text": "cmd done"})
    done = run(fake_model_server, "anthropic", project, "/mycmd foo bar")
    assert (done.returncode, done.stdout) == (0, "cmd done\n"), done.stderr
    called, read, header, body = first_user_texts(fake_model_server.requests[0])
    assert f'"file_path":"{project}/hello.txt"' in called and "hello world" in read
    assert header == (
        "<command-message>mycmd</command-message>\n<command-name>/mycmd</command-name>\n"
        "<command-args>foo bar</command-args>\n"
    )
    assert body == (
        "Please handle foo bar carefully.\nFirst: bar. Second: .\nBang: bang-output\n"
        "File: @hello.txt\n"
    )


def test_an_unknown_command_and_an_untrusted_snippet_make_no_request(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    write(project, {".claude/commands/bang.md": "Run !`touch ran.txt` now\n"})
    unknown = run(fake_model_server, "anthropic", project, "--output-format", "json", "/nosuch x")
    [result] = lines(unknown.stdout)
    assert (unknown.returncode, result["result"], result["num_turns"]) == (
        0,
        "Unknown command: /nosuch",
        0,
    )
    refused = run(fake_model_server, "anthropic", project, "/bang")
    assert refused.returncode == 1
    assert "not trusted" in refused.stderr and not (project / "ran.txt").exists()
    assert fake_model_server.requests == []


def test_a_skill_body_arrives_only_after_the_skill_call(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    write(
        project,
        {
            ".claude/skills/deploy-helper/SKILL.md": "---\nname: deploy-helper\n"
            "description: Helps deploy the app to staging.\n---\n\n# Deploy helper\n\n"
            "SKILL-BODY-MARKER: deploy with $ARGUMENTS.\n",
            ".claude/skills/deploy-helper/reference.md": "Reference details.\n",
        },
    )
    fake_model_server.add(
        tool_step("Skill", {"skill": "deploy-helper", "args": "staging"}), {"text": "deployed"}
    )
    done = run(
        fake_model_server,
        "anthropic",
        project,
        "--output-format",
        "stream-json",
        "--verbose",
        "deploy",
    )
    assert done.returncode == 0, done.stderr
    first, second = fake_model_server.requests
    assert "- deploy-helper: Helps deploy the app to staging." in json.dumps(first.body["system"])
    assert "SKILL-BODY-MARKER" not in json.dumps(first.body)
    assert "Skill" in first.tool_names
    assert "SKILL-BODY-MARKER: deploy with staging." in json.dumps(second.body["messages"])
    assert "reference.md" in json.dumps(second.body["messages"])
    assert "Skill" in lines(done.stdout)[0]["tools"]
