"""The agent loop: build the request, stream the response, run the tools, repeat.

Everything else is a collaborator: the provider talks to the model, the toolset decides
which tools are offered, each tool call goes through its stages in
:class:`~caliban.calls.pipeline.CallPipeline` (where the ``authorizer`` applies the permission
policy), and ``emit`` lets the UI, headless output and transcript follow along. The loop
imports none of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, assert_never

from caliban.calls.pipeline import CallPipeline
from caliban.calls.resolve import RepeatGuard
from caliban.calls.verdict import ALLOW_ALL, Authorizer
from caliban.compaction import CompactionFailed, CompactionPolicy, Trigger
from caliban.events import (
    AgentEvent,
    ApiRetryEvent,
    AssistantDelta,
    AssistantMessage,
    AssistantThinkingDelta,
    ConversationCompacted,
    HistoryAppended,
    ModelFallback,
    Notice,
    ToolResultsMessage,
    UserPrompt,
)
from caliban.hooks import NO_HOOKS, STOP_BLOCK_CAP, LoopHooks
from caliban.messages import Message, TextPart, ToolCall, ToolResult, Usage
from caliban.providers.base import (
    DEFAULT_MAX_TOKENS,
    ApiRetry,
    PromptTooLong,
    Provider,
    ProviderError,
    ProviderRequest,
    ResponseDone,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
)
from caliban.session.ledger import UsageLedger
from caliban.tools.base import ToolEnv
from caliban.toolsets.base import PromptTools, Toolset

OVERLOADED = 529
"""Anthropic's status for an overloaded model: what ``--fallback-model`` falls back on."""
RunSubtype = Literal["success", "error_max_turns", "error_during_execution", "error_max_budget_usd"]
CUT_TWICE = (
    "The answer was cut at the output token limit (max_tokens) again after one continuation; "
    "it is incomplete."
)
CONTINUE_PROMPT = (
    "Your response was cut off at the output token limit. Continue exactly where you stopped."
)
INTERRUPTED = "The user interrupted this tool call before it finished."
NOT_RUN_OVER_BUDGET = "Not run: the spending limit (--max-budget-usd) was reached."
SIDE_SYSTEM = "You answer one request about the text you are given, briefly and accurately."
SIDE_MAX_TOKENS = 4_096


@dataclass(kw_only=True)
class Conversation:
    """The history one agent works on. What it cost is the session's
    :class:`~caliban.session.ledger.UsageLedger`'s."""

    messages: list[Message] = field(default_factory=list)
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
        ledger: UsageLedger | None = None,
        authorizer: Authorizer = ALLOW_ALL,
        emit: Callable[[AgentEvent], None] = lambda event: None,
        max_turns: int = 100,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        parent_tool_use_id: str | None = None,
        compaction: CompactionPolicy | None = None,
        web_search: bool = False,
        hooks: LoopHooks = NO_HOOKS,
        prompt_tools: Callable[[str], PromptTools | None] | None = None,
        over_budget: Callable[[], str | None] | None = None,
        fallback_models: Sequence[str] = (),
    ) -> None:
        self.provider = provider
        self.model = model
        self.system_prompt = system_prompt
        self.toolset = toolset
        self.env = env
        self.conversation = conversation or Conversation()
        self.ledger = ledger if ledger is not None else UsageLedger()
        """Where every request's usage is recorded, under the model that served it (the
        session's, shared with its sub-agents)."""
        self.authorizer = authorizer
        self.emit = emit
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self.parent_id = parent_tool_use_id
        self.compaction = compaction
        self.web_search = web_search
        """Offer the provider's own web search (see ``ProviderRequest.web_search``)."""
        self.repeat_guard = RepeatGuard()
        self.hooks = hooks
        self.prompt_tools = prompt_tools
        """Loads the tools a user's prompt most likely needs before it is sent (lazy MCP)."""
        self._stop: str | None = None
        """Set when a PreToolUse hook asked to end the turn after its tool ran."""
        self.fallback_models = list(fallback_models)
        """Models to switch to, in order, when the model stays overloaded through every
        retry (``--fallback-model``); for this run only: the next prompt tries the first
        model again, as Claude Code does."""
        self.over_budget = over_budget
        """Asked after each response: why the run must stop now (``--max-budget-usd``)."""
        self._ended = False
        """Set when a tool's result ends the turn (:attr:`ToolOutput.ends_turn`)."""

    def build_request(self) -> ProviderRequest:
        addendum = self.toolset.system_addendum()
        system = f"{self.system_prompt}\n\n{addendum}" if addendum else self.system_prompt
        return ProviderRequest(
            model=self.model,
            system=system,
            messages=tuple(self.conversation.messages),
            tools=tuple(tool.spec for tool in self.toolset.offered()),
            max_tokens=self.max_tokens,
            web_search=self.web_search,
        )

    async def run(self, prompt: str | Message) -> RunResult:
        """Send ``prompt`` and loop until the model answers without calling a tool."""
        message = Message.user(prompt) if isinstance(prompt, str) else prompt
        usage = Usage()
        if self.parent_id is None:  # a user's prompt, not a sub-agent's task
            verdict = await self.hooks.prompt_submitted(message.text)
            if verdict.blocked is not None:
                text = (
                    f"UserPromptSubmit operation blocked by hook:\n{verdict.blocked}\n\n"
                    f"Original prompt: {message.text}"
                )
                return RunResult(subtype="success", text=text, num_turns=0, usage=usage)
            request = message.text
            if verdict.context:
                message = _with_part(message, TextPart(text=verdict.context))
            if self.prompt_tools is not None and (loaded := self.prompt_tools(request)):
                if loaded.note:
                    message = _with_part(message, TextPart(text=loaded.note))
                self.emit(loaded.event)
        self._append(message, UserPrompt(message=message, parent_tool_use_id=self.parent_id))
        cut_text: str | None = None  # an answer cut at max_tokens, continued once
        stop_feedback = 0  # times Stop hooks sent the model back to work
        for turn in range(1, self.max_turns + 1):
            response = await self._respond()
            usage += response.usage
            if self.over_budget is not None and (spent := self.over_budget()) is not None:
                # As Claude Code does: the response that crossed the budget is the last one,
                # and its tool calls do not run (each is answered, so the history stays valid
                # for --continue).
                if calls := response.message.tool_calls:
                    unrun = Message(
                        role="user",
                        parts=tuple(_error_result(c.id, NOT_RUN_OVER_BUDGET) for c in calls),
                    )
                    self._append(
                        unrun, ToolResultsMessage(message=unrun, parent_tool_use_id=self.parent_id)
                    )
                return RunResult(
                    subtype="error_max_budget_usd",
                    text=response.message.text,
                    num_turns=turn,
                    usage=usage,
                    error=spent,
                )
            calls = response.message.tool_calls
            if not calls:
                if response.stop_reason == "pause_turn":
                    continue  # the provider's own tools paused: the history resumes them
                if response.stop_reason == "max_tokens":
                    if cut_text is None:
                        cut_text = response.message.text
                        self._append(Message.user(CONTINUE_PROMPT))
                        continue
                    self.emit(
                        Notice(level="warning", text=CUT_TWICE, parent_tool_use_id=self.parent_id)
                    )
                text = (cut_text or "") + response.message.text
                if stop_feedback < STOP_BLOCK_CAP and (
                    feedback := await self.hooks.stopping(
                        text, subagent=self.parent_id is not None, again=stop_feedback > 0
                    )
                ):
                    stop_feedback += 1
                    self._append(Message.user(feedback))
                    continue
                return RunResult(subtype="success", text=text, num_turns=turn, usage=usage)
            results = await self._dispatch(calls)
            tool_message = Message(role="user", parts=tuple(results))
            self._append(
                tool_message,
                ToolResultsMessage(message=tool_message, parent_tool_use_id=self.parent_id),
            )
            if self._stop is not None:  # a PreToolUse hook said "continue": false
                return RunResult(subtype="success", text="", num_turns=turn, usage=usage)
            if self._ended:  # the answer came as a tool call (StructuredOutput)
                self._ended = False
                return RunResult(
                    subtype="success", text=self._last_text(), num_turns=turn, usage=usage
                )
            if self.repeat_guard.end_turn():
                return RunResult(
                    subtype="error_during_execution",
                    text=self._last_text(),
                    num_turns=turn,
                    usage=usage,
                    error=f"Stopped: the model repeated the same tool call with the same "
                    f"arguments {self.repeat_guard.turns} turns in a row.",
                )
        return RunResult(
            subtype="error_max_turns",
            text=self._last_text(),
            num_turns=self.max_turns,
            usage=usage,
            error=f"Reached the maximum number of turns ({self.max_turns}).",
        )

    async def _respond(self) -> ResponseDone:
        """The model's next response; the history is compacted first when it has grown past
        the policy's share of the window, or once when the provider says it is too long."""
        policy = self.compaction
        if policy is not None and policy.due(self.conversation.last_usage):
            try:
                await self.compact("auto")
            except CompactionFailed as exc:
                # Due again with nothing new to summarise (a system prompt past the
                # threshold), a hook that stopped it, no summary: the request goes as it is,
                # and the provider says whether it fits.
                self.emit(
                    Notice(
                        level="warning",
                        text=f"automatic compaction did not happen: {exc}",
                        parent_tool_use_id=self.parent_id,
                    )
                )
        try:
            return await self._request()
        except PromptTooLong as too_long:
            if policy is None:
                raise
            try:
                await self.compact("auto")
            except CompactionFailed:
                raise too_long from None
            return await self._request()

    async def _request(self) -> ResponseDone:
        """One response, from a fallback model when the model is overloaded (HTTP 529)
        after every retry and a fallback is left."""
        while True:
            try:
                return await self._stream(self.build_request())
            except ProviderError as exc:
                if exc.status != OVERLOADED or not self.fallback_models:
                    raise
                original, self.model = self.model, self.fallback_models.pop(0)
                self.emit(
                    ModelFallback(
                        original_model=original,
                        fallback_model=self.model,
                        error=str(exc),
                        parent_tool_use_id=self.parent_id,
                    )
                )

    async def compact(self, trigger: Trigger, instructions: str | None = None) -> None:
        """Replace the older part of the history with a summary (see :mod:`caliban.compaction`).

        Raises :class:`~caliban.compaction.CompactionFailed` when there is nothing to compact.
        """
        from caliban.compaction import compact

        if (blocked := await self.hooks.compacting(trigger, instructions)) is not None:
            raise CompactionFailed(f"a PreCompact hook stopped it: {blocked}")
        window = self.compaction.window() if self.compaction is not None else 0
        last = self.conversation.last_usage
        lazy = self.toolset.describe().lazy
        result = await compact(
            self.provider,
            self.build_request(),
            window=window,
            instructions=instructions,
            active_tools=lazy.active if lazy is not None else (),
            measured_tokens=last.context_tokens if last is not None else None,
            keep_recent=trigger == "auto",
        )
        self.conversation.messages = list(result.messages)
        self.ledger.record(self.model, result.usage)
        self.conversation.last_usage = None  # measured before compaction: no longer true
        self.emit(
            ConversationCompacted(
                trigger=trigger,
                messages=result.messages,
                summary=result.summary,
                pre_tokens=result.pre_tokens,
                post_tokens=result.post_tokens,
                parent_tool_use_id=self.parent_id,
            )
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
                    case ThinkingDelta(text=text):
                        self.emit(
                            AssistantThinkingDelta(text=text, parent_tool_use_id=self.parent_id)
                        )
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
                        self.ledger.record(request.model, event.usage)
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
        """Run the calls concurrently, each through the pipeline; results in call order."""
        pipeline = CallPipeline(
            toolset=self.toolset,
            env=self.env,
            authorizer=self.authorizer,
            hooks=self.hooks,
            repeat_guard=self.repeat_guard,
            emit=self._emit_own,
            ask_model=self.ask_model,
        )
        tasks = [asyncio.ensure_future(pipeline.run(call)) for call in calls]
        try:
            outcomes = list(await asyncio.gather(*tasks))
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            # Every tool_use needs a tool_result, or the next request is malformed.
            finished = [
                task.result().result if task.done() and not task.cancelled() else None
                for task in tasks
            ]
            results = tuple(
                result or _error_result(call.id, INTERRUPTED)
                for call, result in zip(calls, finished, strict=True)
            )
            self._append(Message(role="user", parts=results))
            raise
        for outcome in outcomes:
            if outcome.stop is not None:
                self._stop = outcome.stop
            if outcome.ends_turn:
                self._ended = True
        return [outcome.result for outcome in outcomes]

    async def ask_model(self, prompt: str) -> str:
        """A side request to this agent's provider and model: no tools, no history, nothing
        emitted (a tool's own question, e.g. WebFetch's). Its tokens go in the ledger."""
        request = ProviderRequest(
            model=self.model,
            system=SIDE_SYSTEM,
            messages=(Message.user(prompt),),
            tools=(),
            max_tokens=SIDE_MAX_TOKENS,
        )
        async for event in self.provider.stream(request):
            if isinstance(event, ResponseDone):
                self.ledger.record(request.model, event.usage)
                return event.message.text
        raise RuntimeError(f"provider {self.provider.name} ended the stream without a response")

    def _emit_own(self, event: AgentEvent) -> None:
        """Emit an event of this agent's tools or toolset (e.g. a sub-agent's ToolSearch
        activation), stamped with this agent's parent id unless it already carries one."""
        if self.parent_id is not None and event.parent_tool_use_id is None:
            event = dataclasses.replace(event, parent_tool_use_id=self.parent_id)
        self.emit(event)


def _with_part(message: Message, part: TextPart) -> Message:
    """``message`` with ``part`` added at the end; the same message, so the same id."""
    return dataclasses.replace(message, parts=(*message.parts, part))


def _error_result(call_id: str, text: str) -> ToolResult:
    return ToolResult(tool_call_id=call_id, content=(TextPart(text=text),), is_error=True)
