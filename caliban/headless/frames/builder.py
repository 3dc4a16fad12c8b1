""":class:`FrameBuilder`: the listener that turns the loop's events into Claude Code's frames,
handing each kind to the piece that knows its shape."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, assert_never

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
    ConversationRewound,
    HistoryAppended,
    ModelChanged,
    ModelFallback,
    Notice,
    PermissionModeChanged,
    ToolFinished,
    ToolResultsMessage,
    ToolStarted,
    UserPrompt,
)
from caliban.headless.frames.assistant import (
    MainResponses,
    assistant_frame,
    block_uuid,
    synthetic_frame,
)
from caliban.headless.frames.common import (
    Frame,
    api_error_kind,
    new_response_id,
    now_iso,
    system_frame,
)
from caliban.headless.frames.result import TurnFigures, TurnOutcome, result_frame
from caliban.headless.frames.system import (
    activation_frame,
    api_retry_frame,
    compacted_frames,
    fallback_frame,
    init_frame,
)
from caliban.headless.frames.tasks import SubAgentTasks, background_frames
from caliban.headless.frames.tools import denial, tool_result_frame
from caliban.messages import ToolCall
from caliban.session.ledger import UsageByModel
from caliban.subagents import AGENT_TOOL_NAME
from caliban.tools.origin import ToolOrigin


@dataclass(kw_only=True)
class FrameBuilder:
    """Builds Claude Code's frames from loop events (see :mod:`caliban.headless.frames`)."""

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
    turn: TurnFigures = field(default_factory=TurnFigures, init=False)
    responses: MainResponses = field(init=False)
    tasks: SubAgentTasks = field(init=False)

    def __post_init__(self) -> None:
        self.responses = MainResponses(self)
        self.tasks = SubAgentTasks(self)

    def emit(self, frame: Frame) -> None:
        self.sink(frame)

    # ------------------------------------------------------------------ turns

    def begin_turn(self) -> None:
        """Reset the per-turn figures (called before the turn's ``init`` frame)."""
        self.turn = TurnFigures()
        self.responses.stream = None

    def init(self, info: dict[str, Any]) -> None:
        """The ``system/init`` frame of a turn; ``info`` has its values (see headless.run)."""
        self.emit(init_frame(info, self.session_id))

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
                "timestamp": now_iso(),
                "isReplay": True,
            }
        )

    def api_error(self, text: str, status: int | None) -> None:
        """The synthetic assistant frame Claude Code prints for an API error."""
        self.synthetic(text, error=api_error_kind(status))

    def synthetic(self, text: str, *, error: str | None = None) -> None:
        """An assistant frame that no model wrote (an API error, an unknown command)."""
        self.emit(synthetic_frame(text, error=error, session_id=self.session_id))

    def result(self, outcome: TurnOutcome, *, extra: dict[str, Any] | None = None) -> Frame:
        """The turn's ``result`` frame (also returned, for the text and json formats)."""
        frame = result_frame(
            outcome,
            self.turn,
            session_id=self.session_id,
            run_started=self.started,
            by_model=self.usage_by_model(),
            context_window=self.context_window,
        )
        frame.update(extra or {})
        return frame

    # ------------------------------------------------------------------ events

    def __call__(self, event: AgentEvent) -> None:
        child = event.parent_tool_use_id
        match event:
            case UserPrompt(message=message):
                if child is None:
                    self._request_starts()
                else:
                    self.tasks.started(child, message)
            case AssistantDelta(text=text):
                if child is None:
                    self.turn.first_token()
                    self.responses.delta(text, self.turn.ttft_ms)
            case AssistantThinkingDelta():
                if child is None:
                    self.turn.first_token()
            case AssistantMessage():
                self._response(event)
            case ToolStarted(call=call):
                if call.name == AGENT_TOOL_NAME:
                    self.tasks.call_started(call)
            case ToolFinished():
                self._tool_finished(event)
            case ToolResultsMessage() | HistoryAppended():
                if child is None and event.message.role == "user":
                    if isinstance(event, HistoryAppended):
                        self.turn.num_turns += 1  # the continuation prompt after max_tokens
                    self._request_starts()
            case ApiRetryEvent():
                self.emit(api_retry_frame(event, self.session_id))
            case ModelFallback():
                if child is None:
                    self.emit(fallback_frame(event, self.session_id))
            case BackgroundTaskUpdate():
                for frame in background_frames(event, self.session_id):
                    self.emit(frame)
            case ConversationCompacted():
                if child is None:
                    for frame in compacted_frames(event, self.session_id):
                        self.emit(frame)
            case ActivationChanged():
                self.emit(activation_frame(event, self.session_id))
            case PermissionModeChanged(mode=mode):
                if child is None:  # Claude Code's frame after an approved plan
                    self.emit(
                        system_frame("status", self.session_id, status=None, permissionMode=mode)
                    )
            case ModelChanged() | ConversationCleared() | ConversationRewound() | Notice():
                pass
            case _:
                assert_never(event)

    def _request_starts(self) -> None:
        self.turn.request_starts()
        if self.partial:
            self.emit(system_frame("status", self.session_id, status="requesting"))

    def _response(self, event: AssistantMessage) -> None:
        child = event.parent_tool_use_id
        if child is None:
            self.turn.response(event.usage, event.stop_reason, event.message.text)
            self.responses.response(event, self.turn.ttft_ms)
            return
        self.tasks.responded(child, event.usage)
        for index, part in enumerate(event.message.parts):
            if isinstance(part, ToolCall):  # a child's text is not shown (Claude Code)
                frame = assistant_frame(
                    event,
                    part,
                    response_id=new_response_id(),
                    uuid=block_uuid(event, index),
                    session_id=self.session_id,
                    tool_origin=self.tool_origin,
                )
                self.tasks.add_keys(frame, child)
                self.emit(frame)

    def _tool_finished(self, event: ToolFinished) -> None:
        child = event.parent_tool_use_id
        if event.denied:
            self.turn.denials.append(denial(event))
        if child is None:
            self.turn.num_turns = max(self.turn.num_turns, 1) + 1
            if event.call.name == AGENT_TOOL_NAME:
                self.tasks.finished(event.call.id, event.result)
        frame = tool_result_frame(event, session_id=self.session_id)
        self.tasks.add_keys(frame, child)
        self.emit(frame)
        if child is not None:
            self.tasks.tool_finished(child, event.call)
