"""TodoWrite: Claude Code's schema and answers, the list per agent, the REPL checklist."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from caliban.agent import Agent
from caliban.events import AgentEvent, ToolFinished, ToolStarted
from caliban.messages import TextPart, ToolResult
from caliban.providers.scripted import ScriptedProvider, reply, tool_call
from caliban.repl.render import Renderer
from caliban.tools.base import CallContext, ToolEnv
from caliban.tools.builtin import builtin_tools
from caliban.tools.todo_write import RESULT, TodoWrite, current_todos
from caliban.toolsets.tool_list import ToolList

pytestmark = pytest.mark.anyio

PLAN = [
    {"content": "Write the code", "status": "completed", "activeForm": "Writing the code"},
    {"content": "Run the tests", "status": "in_progress", "activeForm": "Running the tests"},
    {"content": "Ship it", "status": "pending", "activeForm": "Shipping it"},
]
CLAUDE_CODE_SCHEMA = {
    "type": "object",
    "properties": {
        "todos": {
            "description": "The updated todo list",
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "minLength": 1},
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                    "activeForm": {"type": "string", "minLength": 1},
                },
                "required": ["content", "status", "activeForm"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["todos"],
    "additionalProperties": False,
}


def test_the_schema_is_claude_codes() -> None:
    assert TodoWrite().spec.input_schema == CLAUDE_CODE_SCHEMA
    assert "TodoWrite" in [tool.name for tool in builtin_tools()]


async def test_each_call_replaces_the_list_and_reports_old_and_new(tmp_path: Path) -> None:
    env = ToolEnv(cwd=tmp_path, project_root=tmp_path)
    ctx = CallContext(env=env, call_id="t1")
    tool = TodoWrite()
    first = await tool.call({"todos": PLAN}, ctx)
    assert (first.as_text, first.is_error) == (RESULT, False)
    assert first.data == {"oldTodos": [], "newTodos": PLAN}
    assert current_todos(env.state) == PLAN

    all_done = [{**todo, "status": "completed"} for todo in PLAN]
    second = await tool.call({"todos": all_done}, ctx)
    assert second.data == {"oldTodos": PLAN, "newTodos": all_done}
    assert current_todos(env.state) == []  # a finished list is cleared, as in Claude Code


async def test_bad_items_are_refused_with_the_field_named(tmp_path: Path) -> None:
    ctx = CallContext(env=ToolEnv(cwd=tmp_path, project_root=tmp_path), call_id="t1")
    out = await TodoWrite().call({"todos": [{"content": "x", "status": "doing"}]}, ctx)
    assert out.is_error
    assert "todos.0.status" in out.as_text and "todos.0.activeForm" in out.as_text


async def test_a_sub_agent_keeps_its_own_list(tmp_path: Path) -> None:
    parent = ToolEnv(cwd=tmp_path, project_root=tmp_path)
    await TodoWrite().call({"todos": PLAN[:1]}, CallContext(env=parent, call_id="a"))
    child = parent.fork()
    assert current_todos(child.state) == []
    await TodoWrite().call({"todos": PLAN}, CallContext(env=child, call_id="b"))
    assert current_todos(parent.state) == []  # PLAN[:1] was all completed: cleared


async def test_the_loop_carries_the_structured_result_to_listeners(tmp_path: Path) -> None:
    events: list[AgentEvent] = []
    provider = ScriptedProvider([reply(tool_call("TodoWrite", {"todos": PLAN})), "Planned."])
    agent = Agent(
        provider=provider,
        model="m",
        system_prompt="s",
        toolset=ToolList([TodoWrite()]),
        env=ToolEnv(cwd=tmp_path, project_root=tmp_path),
        emit=events.append,
    )
    await agent.run("plan it")
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.data == {"oldTodos": [], "newTodos": PLAN}
    assert finished.result.text == RESULT
    json.dumps(finished.data)  # JSON-ready, for stream-json's tool_use_result


def render(call_args: dict[str, Any], data: Any) -> list[str]:
    out = io.StringIO()
    renderer = Renderer(Console(file=out, width=100, force_terminal=False, color_system=None))
    call = tool_call("TodoWrite", call_args)
    renderer(ToolStarted(call=call))
    result = ToolResult(tool_call_id=call.id, content=(TextPart(text=RESULT),))
    renderer(ToolFinished(call=call, result=result, data=data))
    return [line.rstrip() for line in out.getvalue().splitlines() if line.strip()]


def test_the_repl_draws_a_checklist() -> None:
    assert render({"todos": PLAN}, {"oldTodos": [], "newTodos": PLAN}) == [
        "● Update Todos",
        "  ⎿  ☒ Write the code",
        "     ☐ Run the tests",
        "     ☐ Ship it",
    ]


def test_the_checklist_marks_progress_with_styles() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system="standard")
    renderer = Renderer(console)
    call = tool_call("TodoWrite", {"todos": PLAN})
    result = ToolResult(tool_call_id=call.id, content=(TextPart(text=RESULT),))
    renderer(ToolFinished(call=call, result=result, data={"oldTodos": [], "newTodos": PLAN}))
    text = out.getvalue()
    assert "\x1b[2;9m☒ Write the code" in text  # dim, struck through
    assert "\x1b[1m☐ Run the tests" in text  # bold: in progress
