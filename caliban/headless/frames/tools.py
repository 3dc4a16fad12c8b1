"""A tool's result as Claude Code frames it: a ``user`` frame per result, its ``content`` a
string for built-in tools (blocks for MCP and sub-agent results, and for images), and, on
the main thread, ``tool_use_result``: the tool's structured result."""

from __future__ import annotations

from typing import Any

from caliban.events import ToolFinished
from caliban.headless.frames.common import Frame, new_uuid, now_iso
from caliban.mcp.wait import WAIT_TOOL_NAME
from caliban.messages import ImagePart
from caliban.session.serialize import part_to_json
from caliban.subagents import AGENT_TOOL_NAME
from caliban.tools.origin import McpOrigin


def tool_result_frame(event: ToolFinished, *, session_id: str) -> Frame:
    """The ``user`` frame of one tool result (a sub-agent's gets its task's keys after)."""
    frame: Frame = {
        "type": "user",
        "message": {"role": "user", "content": [result_block(event)]},
        "parent_tool_use_id": event.parent_tool_use_id,
        "session_id": session_id,
        "uuid": new_uuid(),
        "timestamp": now_iso(),
    }
    if event.parent_tool_use_id is None:
        frame["tool_use_result"] = tool_use_result(event)
    return frame


def denial(event: ToolFinished) -> dict[str, Any]:
    """A ``permission_denials`` entry of the result frame."""
    call = event.call
    return {"tool_name": call.name, "tool_use_id": call.id, "tool_input": dict(call.arguments)}


def result_block(event: ToolFinished) -> dict[str, Any]:
    result = event.result
    content: Any
    # Claude Code: a string, except a sub-agent's answer, a successful MCP result without
    # structuredContent and a result with images, which keep their blocks.
    mcp_blocks = isinstance(event.origin, McpOrigin) and event.data is None
    agent_blocks = event.call.name == AGENT_TOOL_NAME and event.data is not None
    images = any(isinstance(p, ImagePart) for p in result.content)
    if images or agent_blocks or (mcp_blocks and not result.is_error):
        content = [part_to_json(p) for p in result.content]
    else:
        content = result.text
    if event.call.name == WAIT_TOOL_NAME:  # Claude Code's block for it, ready or not
        return {
            "type": "tool_result",
            "tool_use_id": result.tool_call_id,
            "content": content,
            "is_error": result.is_error,
        }
    if result.is_error:
        return {
            "type": "tool_result",
            "content": content,
            "is_error": True,
            "tool_use_id": result.tool_call_id,
        }
    block: dict[str, Any] = {
        "tool_use_id": result.tool_call_id,
        "type": "tool_result",
        "content": content,
    }
    if event.call.name == "Bash":  # Claude Code sets is_error: false for Bash only
        block["is_error"] = False
    return block


def tool_use_result(event: ToolFinished) -> Any:
    result = event.result
    if event.call.name in (AGENT_TOOL_NAME, WAIT_TOOL_NAME) and event.data is not None:
        # A sub-agent that stopped early still reports its work; a wait, whom it waited for.
        return event.data
    if result.is_error:
        return f"Error: {result.text}"
    if event.data is not None:
        return event.data
    if isinstance(event.origin, McpOrigin):
        return [part_to_json(p) for p in result.content]
    return result.text
