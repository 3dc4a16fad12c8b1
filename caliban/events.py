"""What the agent loop emits. The REPL, headless output and transcripts consume these.

Every event carries ``parent_tool_use_id``: ``None`` for the main agent, the id of the
``Agent`` tool call for a sub-agent's events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from caliban.messages import Message, ToolCall, ToolResult, Usage
from caliban.tools.diff import FileChange
from caliban.tools.origin import ToolOrigin


@dataclass(frozen=True, kw_only=True, slots=True)
class UserPrompt:
    message: Message
    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AssistantDelta:
    text: str
    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AssistantThinkingDelta:
    """A piece of the model's reasoning, streamed before its answer. Never part of the answer
    text; the complete reasoning arrives as a ``ThinkingPart`` of the ``AssistantMessage``."""

    text: str
    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AssistantMessage:
    """One complete model response, with the usage of that request."""

    message: Message
    usage: Usage
    model: str
    parent_tool_use_id: str | None = None
    stop_reason: str | None = None
    """Why the response ended (``end_turn``, ``tool_use``, ``max_tokens``, …)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolStarted:
    call: ToolCall
    origin: ToolOrigin | None = None
    """Where the tool comes from; ``None`` when the call names no tool."""
    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolFinished:
    call: ToolCall
    result: ToolResult
    origin: ToolOrigin | None = None
    summary: str | None = None
    change: FileChange | None = None
    """The file a Write or Edit changed, before and after (for showing the diff)."""
    data: Any = None
    """The tool's structured result (``ToolOutput.data``: Claude Code's ``tool_use_result``)."""
    duration_ms: int = 0
    parent_tool_use_id: str | None = None
    denied: bool = False
    """The permission policy (or the user) refused the call; it did not run."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResultsMessage:
    """The user-role message carrying every result of one turn, as appended to history."""

    message: Message
    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class HistoryAppended:
    """A message appended to history without an event of its own: the partial reply or the
    "interrupted" tool results kept on cancellation, or the continue-prompt after a reply
    was cut off at the token limit. With the events above, every append is announced."""

    message: Message
    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelChanged:
    """The session switched models (``/model``); later prompts use ``model``."""

    model: str
    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class PermissionModeChanged:
    """The session's permission mode changed during a turn (an approved plan ended plan
    mode); later calls are decided in ``mode``."""

    mode: str
    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ConversationCleared:
    """The session started a new, empty conversation (``/clear``)."""

    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ConversationRewound:
    """The conversation was cut back to before one user prompt (``/rewind``): ``messages``
    is the whole history now, ``active`` the lazily loaded MCP tools as they were then
    (``None``: not recorded)."""

    to: str
    """The id of the prompt it was cut before."""
    messages: tuple[Message, ...]
    active: tuple[str, ...] | None = None
    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ConversationCompacted:
    """The history was compacted: its older part is now one summary message (``messages``
    is the whole new history, so a transcript can resume from here)."""

    trigger: Literal["auto", "manual"]
    messages: tuple[Message, ...]
    summary: str
    pre_tokens: int
    post_tokens: int
    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ApiRetryEvent:
    attempt: int
    max_attempts: int
    delay_s: float
    error: str
    status: int | None = None
    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelFallback:
    """The model stayed overloaded through every retry; the turn goes on with another
    (``--fallback-model``)."""

    original_model: str
    fallback_model: str
    error: str
    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ActivationChanged:
    """The lazy-MCP activation set changed (found by ToolSearch or called directly)."""

    activated: tuple[str, ...]
    evicted: tuple[str, ...]
    active: tuple[str, ...]
    parent_tool_use_id: str | None = None
    preactivated: bool = False
    """Loaded for the user's prompt before the model saw it (``tools.preactivate``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BackgroundTaskUpdate:
    """A background command (Bash ``run_in_background``) started, finished or was stopped."""

    task_id: str
    tool_use_id: str
    """The Bash call that started it."""
    status: Literal["running", "completed", "failed", "killed"]
    description: str
    command: str
    end_time_ms: int | None = None
    """When it ended (Unix time, milliseconds); ``None`` while running."""
    parent_tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Notice:
    """Something the user should see that is not part of the conversation."""

    level: Literal["info", "warning", "error"]
    text: str
    parent_tool_use_id: str | None = None


AgentEvent = (
    UserPrompt
    | AssistantDelta
    | AssistantThinkingDelta
    | AssistantMessage
    | ToolStarted
    | ToolFinished
    | ToolResultsMessage
    | HistoryAppended
    | ModelChanged
    | PermissionModeChanged
    | ConversationCleared
    | ConversationRewound
    | ConversationCompacted
    | ApiRetryEvent
    | ModelFallback
    | ActivationChanged
    | BackgroundTaskUpdate
    | Notice
)
