"""The agent loop: build the request, stream the response, run the tools, repeat.

Everything else is a collaborator: the provider talks to the model, the toolset decides
which tools are offered, ``authorize`` applies the permission policy, and ``emit`` lets the
UI, headless output and transcript follow along. The loop imports none of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, assert_never

from caliban.events import (
    AgentEvent,
    ApiRetryEvent,
    AssistantDelta,
    AssistantMessage,
    HistoryAppended,
    Notice,
    ToolFinished,
    ToolResultsMessage,
    ToolStarted,
    UserPrompt,
)
from caliban.messages import Message, TextPart, ToolCall, ToolResult, Usage
from caliban.providers.base import (
    ApiRetry,
    Provider,
    ProviderRequest,
    ResponseDone,
    TextDelta,
    ToolCallStarted,
)
from caliban.tools.base import CallContext, Invocation, Tool, ToolEnv, ToolOutput
from caliban.toolsets.base import Toolset

Authorize = Callable[[Tool, Invocation, CallContext], Awaitable[str | None]]
"""Returns ``None`` to let a call run, or the reason it was denied (shown to the model)."""

RunSubtype = Literal["success", "error_max_turns", "error_during_execution"]
CUT_TWICE = (
    "The answer was cut at the output token limit (max_tokens) again after one continuation; "
    "it is incomplete."
)
CONTINUE_PROMPT = (
    "Your response was cut off at the output token limit. Continue exactly where you stopped."
)
INTERRUPTED = "The user interrupted this tool call before it finished."


async def allow_all(tool: Tool, invocation: Invocation, ctx: CallContext) -> str | None:
    return None


@dataclass(kw_only=True)
class Conversation:
    """The history one agent works on, and what it has cost so far."""

    messages: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    last_usage: Usage | None = None
    """Usage of the latest request: how full the context window is now."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunResult:
    subtype: RunSubtype
    text: str
    num_turns: int
    usage: Usage
    error: str | None = None

    @property
    def is_error(self) -> bool:
        return self.subtype != "success"


class Agent:
    """Runs prompts to completion against one conversation."""

    def __init__(
        self,
        *,
        provider: Provider,
        model: str,
        system_prompt: str,
        toolset: Toolset,
        env: ToolEnv,
        conversation: Conversation | None = None,
        authorize: Authorize = allow_all,
        emit: Callable[[AgentEvent], None] = lambda event: None,
        max_turns: int = 100,
        max_tokens: int = 16_384,
        parent_tool_use_id: str | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.system_prompt = system_prompt
        self.toolset = toolset
        self.env = env
        self.conversation = conversation or Conversation()
        self.authorize = authorize
        self.emit = emit
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self.parent_id = parent_tool_use_id

    def build_request(self) -> ProviderRequest:
        addendum = self.toolset.system_addendum()
        system = f"{self.system_prompt}\n\n{addendum}" if addendum else self.system_prompt
        return ProviderRequest(
            model=self.model,
            system=system,
            messages=tuple(self.conversation.messages),
            tools=tuple(tool.spec for tool in self.toolset.offered()),
            max_tokens=self.max_tokens,
        )

    async def run(self, prompt: str | Message) -> RunResult:
        """Send ``prompt`` and loop until the model answers without calling a tool."""
        message = Message.user(prompt) if isinstance(prompt, str) else prompt
        self._append(message, UserPrompt(message=message, parent_tool_use_id=self.parent_id))
        usage = Usage()
        cut_text: str | None = None  # an answer cut at max_tokens, continued once
        for turn in range(1, self.max_turns + 1):
            response = await self._stream(self.build_request())
            usage += response.usage
            calls = response.message.tool_calls
            if not calls:
                if response.stop_reason == "max_tokens":
                    if cut_text is None:
                        cut_text = response.message.text
                        self._append(Message.user(CONTINUE_PROMPT))
                        continue
                    self.emit(
                        Notice(level="warning", text=CUT_TWICE, parent_tool_use_id=self.parent_id)
                    )
                text = (cut_text or "") + response.message.text
                return RunResult(subtype="success", text=text, num_turns=turn, usage=usage)
            results = await self._dispatch(calls)
            tool_message = Message(role="user", parts=tuple(results))
            self._append(
                tool_message,
                ToolResultsMessage(message=tool_message, parent_tool_use_id=self.parent_id),
            )
        return RunResult(
            subtype="error_max_turns",
            text=self._last_text(),
            num_turns=self.max_turns,
            usage=usage,
            error=f"Reached the maximum number of turns ({self.max_turns}).",
        )

    def _append(self, message: Message, event: AgentEvent | None = None) -> None:
        """Every history change goes through here and is announced, so a transcript built
        from the events always matches the history."""
        self.conversation.messages.append(message)
        self.emit(event or HistoryAppended(message=message, parent_tool_use_id=self.parent_id))

    def _last_text(self) -> str:
        for message in reversed(self.conversation.messages):
            if message.role == "assistant" and message.text:
                return message.text
        return ""

    async def _stream(self, request: ProviderRequest) -> ResponseDone:
        partial: list[str] = []
        try:
            async for event in self.provider.stream(request):
                match event:
                    case TextDelta(text=text):
                        partial.append(text)
                        self.emit(AssistantDelta(text=text, parent_tool_use_id=self.parent_id))
                    case ApiRetry():
                        self.emit(
                            ApiRetryEvent(
                                attempt=event.attempt,
                                max_attempts=event.max_attempts,
                                delay_s=event.delay_s,
                                error=event.error,
                                status=event.status,
                                parent_tool_use_id=self.parent_id,
                            )
                        )
                    case ToolCallStarted():
                        pass
                    case ResponseDone():
                        self.conversation.usage += event.usage
                        self.conversation.last_usage = event.usage
                        self._append(
                            event.message,
                            AssistantMessage(
                                message=event.message,
                                usage=event.usage,
                                model=request.model,
                                parent_tool_use_id=self.parent_id,
                                stop_reason=event.stop_reason,
                            ),
                        )
                        return event
                    case _:
                        assert_never(event)
        except asyncio.CancelledError:
            # Keep what the user already saw, so the next prompt has it as context.
            if text := "".join(partial):
                self._append(Message(role="assistant", parts=(TextPart(text=text),)))
            raise
        raise RuntimeError(f"provider {self.provider.name} ended the stream without a response")

    async def _dispatch(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        tasks = [asyncio.ensure_future(self._run_tool(call)) for call in calls]
        try:
            return list(await asyncio.gather(*tasks))
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            # Every tool_use needs a tool_result, or the next request is malformed.
            finished = [
                task.result() if task.done() and not task.cancelled() else None for task in tasks
            ]
            results = tuple(
                result or _error_result(call.id, INTERRUPTED)
                for call, result in zip(calls, finished, strict=True)
            )
            self._append(Message(role="user", parts=results))
            raise

    async def _run_tool(self, call: ToolCall) -> ToolResult:
        tool = self.toolset.find(call.name)
        origin = tool.origin if tool is not None else None
        self.emit(ToolStarted(call=call, origin=origin, parent_tool_use_id=self.parent_id))
        started = time.perf_counter()
        output, denied = await self._call_tool(call, tool)
        result = ToolResult(tool_call_id=call.id, content=output.content, is_error=output.is_error)
        self.emit(
            ToolFinished(
                call=call,
                result=result,
                origin=origin,
                summary=output.summary,
                change=output.change,
                duration_ms=int((time.perf_counter() - started) * 1000),
                parent_tool_use_id=self.parent_id,
                structured=output.structured,
                denied=denied,
            )
        )
        return result

    async def _call_tool(self, call: ToolCall, tool: Tool | None) -> tuple[ToolOutput, bool]:
        """The call's output, and whether permission was denied."""
        if tool is None:
            return ToolOutput.error(_unknown_tool(call.name, self.toolset)), False
        if (raw := call.invalid_arguments) is not None:
            return ToolOutput.error(
                f"{call.name} did not run: its arguments were not a valid JSON object "
                f"({raw[:500]!r}). Call it again with a JSON object matching its schema."
            ), False
        bound = tool.bind(call.arguments)
        if isinstance(bound, str):
            return ToolOutput.error(bound), False
        ctx = CallContext(env=self.env, call_id=call.id, emit=self._emit_own)
        if (reason := await self.authorize(tool, bound, ctx)) is not None:
            return ToolOutput.error(f"Permission denied for {call.name}: {reason}"), True
        return await self._run_bound(call, bound, ctx), False

    async def _run_bound(self, call: ToolCall, bound: Invocation, ctx: CallContext) -> ToolOutput:
        if (event := self.toolset.note_call(call.name)) is not None:
            self._emit_own(event)
        try:
            return await bound.run(ctx)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a tool failure is a result the model reads
            return ToolOutput.error(f"{call.name} failed: {type(exc).__name__}: {exc}")

    def _emit_own(self, event: AgentEvent) -> None:
        """Emit an event of this agent's tools or toolset (e.g. a sub-agent's ToolSearch
        activation), stamped with this agent's parent id unless it already carries one."""
        if self.parent_id is not None and event.parent_tool_use_id is None:
            event = dataclasses.replace(event, parent_tool_use_id=self.parent_id)
        self.emit(event)


def _unknown_tool(name: str, toolset: Toolset) -> str:
    offered = [tool.name for tool in toolset.offered()]
    text = f"Unknown tool '{name}'. Available tools: {', '.join(sorted(offered))}"
    # Lazy MCP loading keeps most tools off the wire; naming them all could cost thousands
    # of tokens, so only the count and the closest names.
    if hidden := sorted(set(toolset.names()) - set(offered)):
        text += f". {len(hidden)} more tools are not loaded (ToolSearch finds them)"
        if close := difflib.get_close_matches(name, hidden, n=3):
            text += f"; closest names: {', '.join(close)}"
    return text


def _error_result(call_id: str, text: str) -> ToolResult:
    return ToolResult(tool_call_id=call_id, content=(TextPart(text=text),), is_error=True)
