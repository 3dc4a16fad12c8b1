"""A sub-agent end to end: the real ``caliban -p`` executable, the real Anthropic SDK against
the fake model server, and the stdio catalog MCP server, with lazy MCP loading on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hang import HANG_S

from caliban.permissions.trust import trust

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
CATALOG_SERVER = HERE / "mcp_servers" / "catalog_server.py"
LIST_PIPELINES = "mcp__catalog__list_pipelines"
AGENT_CALL = "toolu_agent_1"

CI_AGENT = """\
---
name: ci
description: Investigates CI failures.
tools: Read, Grep, mcp__catalog__list_pipelines, mcp__catalog__get_*
---
You investigate CI failures.
"""


def write_project(root: Path) -> None:
    trust(root)  # its mcp.toml servers start only in a trusted folder
    (root / ".caliban" / "agents").mkdir(parents=True)
    (root / ".caliban" / "agents" / "ci.md").write_text(CI_AGENT, encoding="utf-8")
    (root / ".caliban" / "config.toml").write_text("[tools]\nlazy_mcp = true\n", encoding="utf-8")
    server = json.dumps([str(CATALOG_SERVER)])
    (root / ".caliban" / "mcp.toml").write_text(
        f"[server.catalog]\ncommand = {json.dumps(sys.executable)}\nargs = {server}\n",
        encoding="utf-8",
    )


def test_child_messages_carry_parent_tool_use_id_in_stream_json(
    project: Path, fake_model_server: Any
) -> None:
    write_project(project)
    fake_model_server.add(
        {
            "tool_calls": [
                {"name": "ToolSearch", "arguments": {"query": "select:" + LIST_PIPELINES}}
            ]
        },
        {
            "text": "Delegating.",
            "tool_calls": [
                {
                    "id": AGENT_CALL,
                    "name": "Agent",
                    "arguments": {
                        "description": "Investigate red CI",
                        "prompt": "Why is CI red for acme/api?",
                        "subagent_type": "ci",
                    },
                }
            ],
        },
        {"tool_calls": [{"name": LIST_PIPELINES, "arguments": {"repository": "acme/api"}}]},
        {"text": "The deploy pipeline fails.", "usage": {"input_tokens": 300, "output_tokens": 9}},
        {"text": "CI is red: the deploy pipeline fails."},
    )
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_model_server.url,
    }
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("caliban")),
            "-p",
            "Why is CI red?",
            "--output-format",
            "stream-json",
            "--verbose",
            "--provider",
            "anthropic",
            "--model",
            "claude-test",
            "--allowed-tools",
            LIST_PIPELINES,
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    messages = [
        (line["type"], line["parent_tool_use_id"], line["message"]["content"][0]["type"])
        for line in lines
        if "message" in line
    ]
    # Claude Code's frames: one per content block; a child's prompt, tool calls and results
    # (not its text) with the Agent call's id.
    assert messages == [
        ("assistant", None, "tool_use"),  # ToolSearch
        ("user", None, "tool_result"),
        ("assistant", None, "text"),
        ("assistant", None, "tool_use"),  # Agent
        ("user", AGENT_CALL, "text"),  # the child's prompt
        ("assistant", AGENT_CALL, "tool_use"),  # the child calls list_pipelines
        ("user", AGENT_CALL, "tool_result"),
        ("user", None, "tool_result"),  # the Agent result
        ("assistant", None, "text"),
    ]
    tasks = [line["subtype"] for line in lines if line.get("subtype", "").startswith("task_")]
    assert tasks == ["task_started", "task_progress", "task_updated", "task_notification"]
    [child_results] = [
        line
        for line in lines
        if line["type"] == "user"
        and line["parent_tool_use_id"]
        and line["message"]["content"][0]["type"] == "tool_result"
    ]
    [child_result] = child_results["message"]["content"]
    assert child_result["type"] == "tool_result" and "acme/api" in json.dumps(child_result)
    agent_result = [m for m in lines if m.get("type") == "user"][-1]["message"]["content"][0]
    assert agent_result["tool_use_id"] == AGENT_CALL
    result_text = json.dumps(agent_result["content"])
    assert "The deploy pipeline fails." in result_text
    assert "[sub-agent ci: 2 turns" in result_text
    assert lines[-1]["type"] == "result" and lines[-1]["result"] == (
        "CI is red: the deploy pipeline fails."
    )
    # The result's usage is the parent's three requests; modelUsage counts the child's two
    # as well (as in Claude Code).
    assert lines[-1]["usage"]["input_tokens"] == 3 * 10
    assert lines[-1]["modelUsage"]["claude-test"]["inputTokens"] == 4 * 10 + 300
    assert lines[-1]["modelUsage"]["claude-test"]["outputTokens"] == 4 * 5 + 9

    requests = fake_model_server.requests
    assert len(requests) == 5
    child_first = requests[2]
    [child_prompt] = child_first.body["messages"][:1]
    assert "Why is CI red for acme/api?" in json.dumps(child_prompt["content"])
    system = json.dumps(child_first.body.get("system"))
    assert "You investigate CI failures." in system
    # The parent had found list_pipelines; the child inherits it (and may use it from turn 1).
    child_mcp = [n for n in child_first.tool_names if n.startswith("mcp__")]
    assert child_mcp == [LIST_PIPELINES]
    assert "Agent" not in child_first.tool_names
    assert set(child_first.tool_names) <= {"Read", "Grep", "ToolSearch", LIST_PIPELINES}
    # The parent's set is untouched by the child: its last request offers what it had.
    parent_mcp = [n for n in requests[4].tool_names if n.startswith("mcp__")]
    assert parent_mcp == [LIST_PIPELINES]
