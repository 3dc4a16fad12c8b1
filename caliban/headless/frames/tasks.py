"""Tasks: the sub-agents that Agent calls start, and background commands.

A sub-agent's work is framed by ``system/task_started`` … ``task_progress`` (one per tool
call it makes) … ``task_updated`` / ``task_notification``; its prompt is a ``user`` frame,
and its frames carry its ``subagent_type`` and ``task_description``. A background command
(Bash ``run_in_background``) gets ``task_started`` and ``task_updated`` (and, when stopped,
``task_notification``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from caliban.events import BackgroundTaskUpdate
from caliban.headless.frames.common import Frame, FrameContext, blocks, now_iso, system_frame
from caliban.messages import Message, ToolCall, ToolResult, Usage


@dataclass(kw_only=True)
class _Task:
    """A sub-agent started by an Agent call (for its task frames)."""

    task_id: str
    description: str
    subagent_type: str
    prompt: str
    started: float = field(default_factory=time.monotonic)
    tool_uses: int = 0
    tokens: int = 0

    def usage(self) -> dict[str, int]:
        return {
            "total_tokens": self.tokens,
            "tool_uses": self.tool_uses,
            "duration_ms": int((time.monotonic() - self.started) * 1000),
        }


class SubAgentTasks:
    """The sub-agents running now, keyed by the id of the Agent call that started each."""

    def __init__(self, ctx: FrameContext) -> None:
        self.ctx = ctx
        self.calls: dict[str, ToolCall] = {}
        """Agent calls seen starting: their arguments name the task."""
        self.tasks: dict[str, _Task] = {}

    def call_started(self, call: ToolCall) -> None:
        self.calls[call.id] = call

    def started(self, call_id: str, message: Message) -> None:
        """The sub-agent's prompt: ``task_started``, then the prompt as a ``user`` frame."""
        from caliban.tools.agent import agent_id

        call = self.calls.get(call_id)
        arguments = call.arguments if call is not None else {}
        task = _Task(
            task_id=agent_id(call_id),
            description=str(arguments.get("description") or ""),
            subagent_type=str(arguments.get("subagent_type") or "general-purpose"),
            prompt=message.text,
        )
        self.tasks[call_id] = task
        session_id = self.ctx.session_id
        self.ctx.emit(
            system_frame(
                "task_started",
                session_id,
                task_id=task.task_id,
                tool_use_id=call_id,
                description=task.description,
                subagent_type=task.subagent_type,
                task_type="local_agent",
                prompt=task.prompt,
            )
        )
        frame: Frame = {
            "type": "user",
            "message": {"role": "user", "content": blocks(message.parts)},
            "parent_tool_use_id": call_id,
            "session_id": session_id,
            "uuid": message.id,
            "timestamp": now_iso(),
        }
        self.add_keys(frame, call_id)
        self.ctx.emit(frame)

    def responded(self, call_id: str, usage: Usage) -> None:
        if (task := self.tasks.get(call_id)) is not None:
            task.tokens += usage.context_tokens + usage.output_tokens

    def tool_finished(self, call_id: str, call: ToolCall) -> None:
        """A sub-agent's tool call ended: ``task_progress``."""
        if (task := self.tasks.get(call_id)) is None:
            return
        task.tool_uses += 1
        self.ctx.emit(
            system_frame(
                "task_progress",
                self.ctx.session_id,
                task_id=task.task_id,
                tool_use_id=call_id,
                description=progress(call),
                subagent_type=task.subagent_type,
                usage=task.usage(),
                last_tool_name=call.name,
            )
        )

    def finished(self, call_id: str, result: ToolResult) -> None:
        """The Agent call returned: ``task_updated`` and ``task_notification``."""
        task = self.tasks.pop(call_id, None)
        if task is None:
            return
        status = "failed" if result.is_error else "completed"
        end = int(time.time() * 1000)
        session_id = self.ctx.session_id
        self.ctx.emit(
            system_frame(
                "task_updated",
                session_id,
                task_id=task.task_id,
                patch={"status": status, "end_time": end},
            )
        )
        self.ctx.emit(
            system_frame(
                "task_notification",
                session_id,
                task_id=task.task_id,
                tool_use_id=call_id,
                status=status,
                output_file="",
                summary=task.description,
                usage=task.usage(),
            )
        )

    def add_keys(self, frame: Frame, call_id: str | None) -> None:
        """The keys a sub-agent's frames carry: its type and its task's description."""
        if call_id is not None and (task := self.tasks.get(call_id)) is not None:
            frame["subagent_type"] = task.subagent_type
            frame["task_description"] = task.description


def background_frames(event: BackgroundTaskUpdate, session_id: str) -> list[Frame]:
    """A background command started, ended or was stopped."""
    if event.status == "running":
        return [
            system_frame(
                "task_started",
                session_id,
                task_id=event.task_id,
                tool_use_id=event.tool_use_id,
                description=event.description,
                task_type="local_bash",
            )
        ]
    patch = {"status": event.status, "end_time": event.end_time_ms}
    frames = [system_frame("task_updated", session_id, task_id=event.task_id, patch=patch)]
    if event.status == "killed":
        frames.append(
            system_frame(
                "task_notification",
                session_id,
                task_id=event.task_id,
                tool_use_id=event.tool_use_id,
                status="stopped",
                output_file="",
                summary=event.description,
            )
        )
    return frames


def progress(call: ToolCall) -> str:
    """``task_progress.description``: what a child's tool call did, as Claude Code puts it."""
    arguments = call.arguments
    match call.name:
        case "Bash":
            return (
                f"Running {arguments.get('description') or arguments.get('command') or 'a command'}"
            )
        case "Read":
            path = str(arguments.get("file_path") or "")
            return f"Reading {path.rsplit('/', 1)[-1]}" if path else "Reading"
        case "Grep" | "Glob":
            return f"Searching for {arguments.get('pattern') or ''}".strip()
        case "Write" | "Edit":
            path = str(arguments.get("file_path") or "")
            return f"Editing {path.rsplit('/', 1)[-1]}".strip()
        case _:
            return f"Running {call.name}"
