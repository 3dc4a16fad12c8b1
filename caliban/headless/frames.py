"""Claude Code's headless frames (``stream-json`` lines), built from the loop's events.

:class:`FrameBuilder` is a listener: it turns :mod:`caliban.events` into the frames Claude
Code 2.1.197 prints, field for field (recorded in ``tests/fixtures/claude_code``; the
end-to-end test compares them key by key). caliban adds keys, never renames or drops one:
``permission_mode`` next to ``permissionMode``, ``context`` in the result, ``error_message``
in ``api_retry``. Frames go to a ``sink``; :mod:`caliban.headless.run` decides whether they are
printed one per line, collected into an array (``json --verbose``) or dropped.

Shapes, briefly (docs/headless.md has the full list):

- ``system/init`` once per turn; ``assistant`` one frame per content block, all blocks of a
  response sharing ``message.id`` (``stop_reason`` is ``null``: the frame describes the
  block); ``user`` one frame per tool result, ``content`` a string for built-in tools (a
  list for MCP and sub-agent results) and ``tool_use_result`` the tool's structured result;
  ``result`` last, with ``permission_denials``, ``stop_reason``, ``modelUsage``.
- A sub-agent's frames carry ``parent_tool_use_id``: its prompt, its tool calls and results
  (not its text: Claude Code shows only the final answer, in the Agent result), framed by
  ``system/task_started`` … ``task_updated`` / ``task_notification``.
- ``system/mcp_activation`` (caliban's own, lazy MCP): the tools a ToolSearch or a direct
  call loaded (``activated``), those evicted, and the whole ``active`` set.
- ``stream_event`` frames (``--include-partial-messages``) are Anthropic stream events,
  rebuilt from what the provider streamed: text deltas as they arrive, each tool call's
  input in one ``input_json_delta`` when the response is complete.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

from caliban.events import (
    ActivationChanged,
    AgentEvent,
    ApiRetryEvent,
    AssistantDelta,
    AssistantMessage,
    AssistantThinkingDelta,
    BackgroundTaskUpdate,
    ConversationCleared,
    ConversationCompacted,
    HistoryAppended,
    ModelChanged,
    ModelFallback,
    Notice,
    ToolFinished,
    ToolResultsMessage,
    ToolStarted,
    UserPrompt,
)
from caliban.messages import ImagePart, Message, Part, TextPart, ToolCall, ToolResult, Usage
from caliban.providers.base import DEFAULT_MAX_TOKENS
from caliban.session.ledger import UsageByModel, total_cost
from caliban.session.pricing import cost_usd
from caliban.session.serialize import part_to_json, usage_to_api_json
from caliban.subagents import AGENT_TOOL_NAME
from caliban.tools.origin import McpOrigin, ToolOrigin

__all__ = ["FrameBuilder", "TurnOutcome", "api_error_kind"]

Frame = dict[str, Any]
ERROR_KINDS = {401: "authentication_failed", 403: "authentication_failed", 429: "rate_limit"}


def _uuid() -> str:
    return str(uuid.uuid4())


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def api_error_kind(status: int | None) -> str:
    """Claude Code's short name for an API error (``api_retry.error``, assistant ``error``)."""
    if status in ERROR_KINDS:
        return ERROR_KINDS[status]
    if status == 529:
        return "overloaded"
    if status is not None and status >= 500:
        return "server_error"
    if status == 400:
        return "invalid_request"
    return "unknown"


def _message_usage(usage: Usage) -> dict[str, Any]:
    """The ``usage`` of an ``assistant`` frame's message (the API's per-message shape)."""
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_write_tokens,
            "ephemeral_1h_input_tokens": 0,
        },
        "output_tokens": usage.output_tokens,
        "service_tier": "standard",
    }


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


@dataclass(kw_only=True)
class _Stream:
    """The response being streamed (``--include-partial-messages``)."""

    message_id: str
    text_open: bool = False


@dataclass(frozen=True, kw_only=True)
class TurnOutcome:
    """How a turn ended, for its result frame."""

    kind: Literal["success", "max_turns", "max_budget", "api_error", "interrupted", "error"]
    error: str | None = None
    status: int | None = None
    max_turns: int | None = None
    text: str | None = None
    """The result text when it did not come from the model (an unknown ``/command``)."""
    requested: bool = True
    """Whether the turn made a model request (Claude Code drops some keys when not)."""


@dataclass(kw_only=True)
class FrameBuilder:
    """Builds Claude Code's frames from loop events (see the module docstring)."""

    sink: Callable[[Frame], None]
    session_id: str = ""
    model: str = ""
    """The main agent's model (for ``message_start`` before the response is complete)."""
    partial: bool = False
    """``--include-partial-messages``: emit ``stream_event`` and ``status`` frames."""
    tool_origin: Callable[[str], ToolOrigin | None] = lambda name: None
    context_window: Callable[[str], int] = lambda model: 200_000
    usage_by_model: Callable[[], UsageByModel] = dict
    """What the run's requests used, per model (the session's ledger): ``total_cost_usd``
    and ``modelUsage`` price each model's tokens at its own price."""
    started: float = field(default_factory=time.monotonic)
    # per session
    tasks: dict[str, _Task] = field(default_factory=dict)
    agent_calls: dict[str, ToolCall] = field(default_factory=dict)
    # per turn
    turn_started: float = 0.0
    request_started: float | None = None
    api_ms: float = 0.0
    ttft_ms: int | None = None
    num_turns: int = 0
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    last_text: str = ""
    denials: list[dict[str, Any]] = field(default_factory=list)
    streamed: bool = False
    stream: _Stream | None = None

    def emit(self, frame: Frame) -> None:
        self.sink(frame)

    # ------------------------------------------------------------------ turns

    def begin_turn(self) -> None:
        """Reset the per-turn figures (called before the turn's ``init`` frame)."""
        self.turn_started = time.monotonic()
        self.request_started = None
        self.api_ms = 0.0
        self.ttft_ms = None
        self.num_turns = 0
        self.usage = Usage()
        self.stop_reason = None
        self.last_text = ""
        self.denials = []
        self.streamed = False
        self.stream = None

    def init(self, info: dict[str, Any]) -> None:
        """The ``system/init`` frame of a turn; ``info`` has its values (see assemble)."""
        frame: Frame = {"type": "system", "subtype": "init", **info}
        frame["session_id"] = self.session_id
        frame["uuid"] = _uuid()
        order = [
            "type",
            "subtype",
            "cwd",
            "session_id",
            "tools",
            "mcp_servers",
            "model",
            "permissionMode",
            "slash_commands",
            "apiKeySource",
            "claude_code_version",
            "output_style",
            "agents",
            "skills",
            "plugins",
            "analytics_disabled",
            "product_feedback_disabled",
            "uuid",
            "memory_paths",
            "fast_mode_state",
        ]
        self.emit({**{k: frame[k] for k in order if k in frame}, **frame})

    def user_echo(self, content: str | list[Any], message_id: str) -> None:
        """A stdin user message echoed back as sent (``--replay-user-messages``), with its
        id: what the Agent SDK's ``rewind_files`` names it by."""
        self.emit(
            {
                "type": "user",
                "message": {"role": "user", "content": content},
                "session_id": self.session_id,
                "parent_tool_use_id": None,
                "uuid": message_id,
                "timestamp": _now_iso(),
                "isReplay": True,
            }
        )

    # ------------------------------------------------------------------ events

    def __call__(self, event: AgentEvent) -> None:
        child = event.parent_tool_use_id
        match event:
            case UserPrompt(message=message):
                if child is None:
                    self._request_starts()
                else:
                    self._child_started(child, message)
            case AssistantDelta(text=text):
                if child is None:
                    self._delta(text)
            case AssistantMessage():
                self._assistant(event)
            case ToolStarted(call=call):
                if call.name == AGENT_TOOL_NAME:
                    self.agent_calls[call.id] = call
            case ToolFinished():
                self._tool_finished(event)
            case ToolResultsMessage() | HistoryAppended():
                if child is None and event.message.role == "user":
                    if isinstance(event, HistoryAppended):
                        self.num_turns += 1  # the continuation prompt after max_tokens
                    self._request_starts()
            case ApiRetryEvent():
                self._api_retry(event)
            case ModelFallback():
                if child is None:
                    self.emit(
                        self._system(
                            "model_fallback",
                            trigger="overloaded",
                            original_model=event.original_model,
                            fallback_model=event.fallback_model,
                            content=f"Switched to {event.fallback_model} due to high demand "
                            f"for {event.original_model}",
                        )
                    )
            case BackgroundTaskUpdate():
                self._background(event)
            case AssistantThinkingDelta():
                if child is None:
                    self._first_token()
            case ConversationCompacted():
                if child is None:
                    self._compacted(event)
            case ActivationChanged():
                self.emit(
                    self._system(
                        "mcp_activation",
                        activated=list(event.activated),
                        evicted=list(event.evicted),
                        active=list(event.active),
                        preactivated=event.preactivated,
                        parent_tool_use_id=child,
                    )
                )
            case ModelChanged() | ConversationCleared() | Notice():
                pass
            case _:
                assert_never(event)

    def _request_starts(self) -> None:
        self.request_started = time.monotonic()
        if self.partial:
            self.emit(self._system("status", status="requesting"))

    # ------------------------------------------------------------------ assistant

    def _first_token(self) -> None:
        """Note the time to the turn's first streamed token (``ttft_ms``)."""
        if self.ttft_ms is None and self.request_started is not None:
            self.ttft_ms = int((time.monotonic() - self.turn_started) * 1000)

    def _delta(self, text: str) -> None:
        self._first_token()
        if not self.partial:
            return
        stream = self._stream_start()
        if not stream.text_open:
            stream.text_open = True
            self._event(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                }
            )
        self._event(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            }
        )

    def _stream_start(self, usage: Usage | None = None, model: str | None = None) -> _Stream:
        if self.stream is None:
            self.stream = _Stream(message_id=f"msg_{uuid.uuid4().hex[:24]}")
            start = {
                "type": "message_start",
                "message": {
                    "id": self.stream.message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model or self.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": _message_usage(usage or Usage()),
                },
            }
            self._event(start, ttft_ms=self.ttft_ms or 0)
        return self.stream

    def _event(self, event: dict[str, Any], **extra: Any) -> None:
        self.emit(
            {
                "type": "stream_event",
                "event": event,
                "session_id": self.session_id,
                "parent_tool_use_id": None,
                "uuid": _uuid(),
                **extra,
            }
        )

    def _assistant(self, event: AssistantMessage) -> None:
        child = event.parent_tool_use_id
        if child is not None:
            if (task := self.tasks.get(child)) is not None:
                task.tokens += event.usage.context_tokens + event.usage.output_tokens
            for part in event.message.parts:
                if isinstance(part, ToolCall):  # a child's text is not shown (Claude Code)
                    self.emit(self._assistant_frame(event, part, f"msg_{uuid.uuid4().hex[:24]}"))
            return
        now = time.monotonic()
        if self.request_started is not None:
            self.api_ms += (now - self.request_started) * 1000
            self.request_started = None
        if self.ttft_ms is None:
            self.ttft_ms = int((now - self.turn_started) * 1000)
        self.streamed = True
        self.num_turns = max(self.num_turns, 1)
        self.usage += event.usage
        self.stop_reason = event.stop_reason
        if event.message.text:
            self.last_text = event.message.text
        stream = self._stream_start(event.usage, event.model) if self.partial else None
        message_id = stream.message_id if stream else f"msg_{uuid.uuid4().hex[:24]}"
        index = 1 if stream and stream.text_open else 0
        for part in event.message.parts:
            frame = self._assistant_frame(event, part, message_id)
            if stream is None:
                self.emit(frame)
                continue
            if isinstance(part, TextPart) and stream.text_open:
                self.emit(frame)
                self._event({"type": "content_block_stop", "index": 0})
                continue
            self._partial_block(part, index, frame)
            index += 1
        if stream is not None:
            self._event(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": event.stop_reason, "stop_sequence": None},
                    "usage": {
                        "input_tokens": event.usage.input_tokens,
                        "cache_creation_input_tokens": event.usage.cache_write_tokens,
                        "cache_read_input_tokens": event.usage.cache_read_tokens,
                        "output_tokens": event.usage.output_tokens,
                    },
                }
            )
            self._event({"type": "message_stop"})
            self.stream = None

    def _partial_block(self, part: Part, index: int, frame: Frame) -> None:
        block = part_to_json(part)
        if isinstance(part, ToolCall):
            start = {**block, "input": {}}
            self._event({"type": "content_block_start", "index": index, "content_block": start})
            for piece in ("", json.dumps(dict(part.arguments), ensure_ascii=False)):
                self._event(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    }
                )
        else:
            self._event({"type": "content_block_start", "index": index, "content_block": block})
        self.emit(frame)
        self._event({"type": "content_block_stop", "index": index})

    def _assistant_frame(self, event: AssistantMessage, part: Part, message_id: str) -> Frame:
        frame: Frame = {
            "type": "assistant",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": event.model,
                "content": [part_to_json(part)],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": _message_usage(event.usage),
                "context_management": None,
            },
            "parent_tool_use_id": event.parent_tool_use_id,
            "session_id": self.session_id,
            "uuid": _uuid(),
            "request_id": None,  # caliban does not keep the API's request id
        }
        if isinstance(part, ToolCall) and isinstance(
            origin := self.tool_origin(part.name), McpOrigin
        ):
            frame["tool_use_meta"] = [
                {
                    "id": part.id,
                    "display_name": origin.tool.replace("_", " ").replace("-", " ").title(),
                    "server_display_name": origin.server,
                }
            ]
        self._child_keys(frame, event.parent_tool_use_id)
        return frame

    def _child_keys(self, frame: Frame, child: str | None) -> None:
        if child is not None and (task := self.tasks.get(child)) is not None:
            frame["subagent_type"] = task.subagent_type
            frame["task_description"] = task.description

    # ------------------------------------------------------------------ tools

    def _tool_finished(self, event: ToolFinished) -> None:
        child = event.parent_tool_use_id
        call, result = event.call, event.result
        if event.denied:
            self.denials.append(
                {"tool_name": call.name, "tool_use_id": call.id, "tool_input": dict(call.arguments)}
            )
        if child is None:
            self.num_turns = max(self.num_turns, 1) + 1
            if call.name == AGENT_TOOL_NAME:
                self._child_finished(call.id, result)
        frame: Frame = {
            "type": "user",
            "message": {"role": "user", "content": [self._result_block(event)]},
            "parent_tool_use_id": child,
            "session_id": self.session_id,
            "uuid": _uuid(),
            "timestamp": _now_iso(),
        }
        if child is None:
            frame["tool_use_result"] = self._tool_use_result(event)
        else:
            self._child_keys(frame, child)
        self.emit(frame)
        if child is not None and (task := self.tasks.get(child)) is not None:
            task.tool_uses += 1
            self.emit(
                self._system(
                    "task_progress",
                    task_id=task.task_id,
                    tool_use_id=child,
                    description=_progress(call),
                    subagent_type=task.subagent_type,
                    usage=self._task_usage(task),
                    last_tool_name=call.name,
                )
            )

    def _result_block(self, event: ToolFinished) -> dict[str, Any]:
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

    def _tool_use_result(self, event: ToolFinished) -> Any:
        result = event.result
        if event.call.name == AGENT_TOOL_NAME and event.data is not None:
            return event.data  # a sub-agent that stopped early still reports its work
        if result.is_error:
            return f"Error: {result.text}"
        if event.data is not None:
            return event.data
        if isinstance(event.origin, McpOrigin):
            return [part_to_json(p) for p in result.content]
        return result.text

    # ------------------------------------------------------------------ sub-agents

    def _child_started(self, call_id: str, message: Message) -> None:
        from caliban.tools.agent import agent_id

        call = self.agent_calls.get(call_id)
        arguments = call.arguments if call is not None else {}
        task = _Task(
            task_id=agent_id(call_id),
            description=str(arguments.get("description") or ""),
            subagent_type=str(arguments.get("subagent_type") or "general-purpose"),
            prompt=message.text,
        )
        self.tasks[call_id] = task
        self.emit(
            self._system(
                "task_started",
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
            "message": {"role": "user", "content": _blocks(message.parts)},
            "parent_tool_use_id": call_id,
            "session_id": self.session_id,
            "uuid": message.id,
            "timestamp": _now_iso(),
        }
        self._child_keys(frame, call_id)
        self.emit(frame)

    def _child_finished(self, call_id: str, result: ToolResult) -> None:
        task = self.tasks.pop(call_id, None)
        if task is None:
            return
        status = "failed" if result.is_error else "completed"
        end = int(time.time() * 1000)
        self.emit(
            self._system(
                "task_updated", task_id=task.task_id, patch={"status": status, "end_time": end}
            )
        )
        self.emit(
            self._system(
                "task_notification",
                task_id=task.task_id,
                tool_use_id=call_id,
                status=status,
                output_file="",
                summary=task.description,
                usage=self._task_usage(task),
            )
        )

    def _task_usage(self, task: _Task) -> dict[str, int]:
        return {
            "total_tokens": task.tokens,
            "tool_uses": task.tool_uses,
            "duration_ms": int((time.monotonic() - task.started) * 1000),
        }

    # ------------------------------------------------------------------ other frames

    def _system(self, subtype: str, **fields: Any) -> Frame:
        return {
            "type": "system",
            "subtype": subtype,
            **fields,
            "uuid": _uuid(),
            "session_id": self.session_id,
        }

    def _compacted(self, event: ConversationCompacted) -> None:
        """Claude Code's boundary frame, then the summary as the user message it now is."""
        self.emit(
            self._system(
                "compact_boundary",
                compact_metadata={
                    "trigger": event.trigger,
                    "pre_tokens": event.pre_tokens,
                    "post_tokens": event.post_tokens,
                },
            )
        )
        if event.messages:
            self.emit(
                {
                    "type": "user",
                    "message": {
                        "role": "user",
                        "content": _blocks(event.messages[0].parts),
                    },
                    "parent_tool_use_id": None,
                    "session_id": self.session_id,
                    "uuid": event.messages[0].id,
                    "timestamp": _now_iso(),
                    "isSynthetic": True,
                }
            )

    def _api_retry(self, event: ApiRetryEvent) -> None:
        frame = {
            "type": "system",
            "subtype": "api_retry",
            # Claude Code numbers retries (1 = the first retry) and counts them in max_retries.
            "attempt": event.attempt - 1,
            "max_retries": event.max_attempts - 1,
            "retry_delay_ms": int(event.delay_s * 1000),
            "error_status": event.status,
            "error": api_error_kind(event.status),
            "session_id": self.session_id,
            "uuid": _uuid(),
            "error_message": event.error,
        }
        self.emit(frame)

    def _background(self, event: BackgroundTaskUpdate) -> None:
        if event.status == "running":
            self.emit(
                self._system(
                    "task_started",
                    task_id=event.task_id,
                    tool_use_id=event.tool_use_id,
                    description=event.description,
                    task_type="local_bash",
                )
            )
            return
        patch = {"status": event.status, "end_time": event.end_time_ms}
        self.emit(self._system("task_updated", task_id=event.task_id, patch=patch))
        if event.status == "killed":
            self.emit(
                self._system(
                    "task_notification",
                    task_id=event.task_id,
                    tool_use_id=event.tool_use_id,
                    status="stopped",
                    output_file="",
                    summary=event.description,
                )
            )

    def api_error(self, text: str, status: int | None) -> None:
        """The synthetic assistant frame Claude Code prints for an API error."""
        self.synthetic(text, error=api_error_kind(status))

    def synthetic(self, text: str, *, error: str | None = None) -> None:
        """An assistant frame that no model wrote (an API error, an unknown command)."""
        frame: Frame = {
            "type": "assistant",
            "message": {
                "id": _uuid(),
                "container": None,
                "model": "<synthetic>",
                "role": "assistant",
                "stop_details": None,
                "stop_reason": "stop_sequence",
                "stop_sequence": "",
                "type": "message",
                "usage": {
                    "input_tokens": 0,
                    "output_tokens": 0,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
                    "service_tier": None,
                    "cache_creation": {
                        "ephemeral_1h_input_tokens": 0,
                        "ephemeral_5m_input_tokens": 0,
                    },
                    "inference_geo": None,
                    "iterations": None,
                    "speed": None,
                },
                "content": [{"type": "text", "text": text}],
                "context_management": None,
            },
            "parent_tool_use_id": None,
            "session_id": self.session_id,
            "uuid": _uuid(),
            "error": error,
            "request_id": None,
        }
        if error is None:
            del frame["error"]
        self.emit(frame)

    # ------------------------------------------------------------------ result

    def result(self, outcome: TurnOutcome, *, extra: dict[str, Any] | None = None) -> Frame:
        """The turn's ``result`` frame (also returned, for the text and json formats)."""
        now = time.monotonic()
        common = {
            "duration_ms": int((now - self.turn_started) * 1000),
            "duration_api_ms": int(self.api_ms),
        }
        timings: dict[str, Any] = {}
        if self.streamed:
            ttft = self.ttft_ms or 0
            timings = {
                "ttft_ms": ttft,
                "ttft_stream_ms": ttft,
                "time_to_request_ms": int((self.turn_started - self.started) * 1000),
            }
        by_model = self.usage_by_model()
        totals = {
            "session_id": self.session_id,
            "total_cost_usd": total_cost(by_model),
            "usage": usage_to_api_json(self.usage),
            "modelUsage": self._model_usage(by_model),
            "permission_denials": list(self.denials),
        }
        num_turns = max(self.num_turns, 1)
        frame: Frame
        match outcome.kind:
            case "max_turns":
                frame = {
                    "type": "result",
                    "subtype": "error_max_turns",
                    **common,
                    "is_error": True,
                    "num_turns": num_turns,
                    "stop_reason": self.stop_reason,
                    **totals,
                    "terminal_reason": "max_turns",
                    "fast_mode_state": "off",
                    "uuid": _uuid(),
                    "errors": [f"Reached maximum number of turns ({outcome.max_turns})"],
                }
            case "max_budget":
                # Claude Code's shape: error_max_turns' without terminal_reason.
                frame = {
                    "type": "result",
                    "subtype": "error_max_budget_usd",
                    **common,
                    "is_error": True,
                    "num_turns": num_turns,
                    "stop_reason": self.stop_reason,
                    **totals,
                    "fast_mode_state": "off",
                    "uuid": _uuid(),
                    "errors": [outcome.error or "Reached maximum budget"],
                }
            case "interrupted" | "error":
                frame = {
                    "type": "result",
                    "subtype": "error_during_execution",
                    **common,
                    "is_error": True,
                    "num_turns": num_turns,
                    "stop_reason": self.stop_reason,
                    **totals,
                    "fast_mode_state": "off",
                    "uuid": _uuid(),
                    "errors": [outcome.error or "interrupted"],
                }
            case "success" | "api_error" if not outcome.requested:
                frame = {
                    "type": "result",
                    "subtype": "success",
                    "is_error": False,
                    **common,
                    "num_turns": 0,
                    "result": outcome.text or "",
                    "stop_reason": None,
                    **totals,
                    "fast_mode_state": "off",
                    "uuid": _uuid(),
                }
            case "success" | "api_error":
                failed = outcome.kind == "api_error"
                frame = {
                    "type": "result",
                    "subtype": "success",
                    "is_error": failed,
                    "api_error_status": outcome.status if failed else None,
                    **common,
                    **timings,
                    "num_turns": num_turns,
                    "result": (outcome.error or "") if failed else self.last_text,
                    "stop_reason": "stop_sequence" if failed else self.stop_reason,
                    **totals,
                    "terminal_reason": "completed",
                    "fast_mode_state": "off",
                    "uuid": _uuid(),
                }
            case _:
                assert_never(outcome.kind)
        if outcome.error and outcome.kind != "success":
            frame["error"] = outcome.error  # caliban's key, kept for earlier scripts
        frame.update(extra or {})
        return frame

    def _model_usage(self, by_model: UsageByModel) -> dict[str, Any]:
        return {
            model: {
                "inputTokens": usage.input_tokens,
                "outputTokens": usage.output_tokens,
                "cacheReadInputTokens": usage.cache_read_tokens,
                "cacheCreationInputTokens": usage.cache_write_tokens,
                "webSearchRequests": 0,
                "costUSD": cost_usd(model, usage),
                "contextWindow": self.context_window(model),
                "maxOutputTokens": DEFAULT_MAX_TOKENS,
            }
            for model, usage in by_model.items()
        }


def _blocks(parts: tuple[Part, ...]) -> list[dict[str, Any]]:
    return [part_to_json(p) for p in parts]


def _progress(call: ToolCall) -> str:
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
