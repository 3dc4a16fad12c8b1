"""Transcripts: every history append is announced, written as one JSON line, and locked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hang import hang_guard
from pydantic import BaseModel

from caliban.agent import CONTINUE_PROMPT, INTERRUPTED, Agent
from caliban.events import (
    AgentEvent,
    AssistantDelta,
    AssistantMessage,
    HistoryAppended,
    ToolResultsMessage,
    ToolStarted,
    UserPrompt,
)
from caliban.messages import Message, TextPart, ToolResult
from caliban.providers.base import ProviderEvent, ProviderRequest, TextDelta
from caliban.providers.scripted import HANG, CutOff, ScriptedProvider, reply, tool_call
from caliban.tools.base import BuiltinTool, CallContext, ToolEnv, ToolOutput
from caliban.toolsets.tool_list import ToolList

pytestmark = pytest.mark.anyio


class SleepInput(BaseModel):
    seconds: float = 0.0


class Sleep(BuiltinTool[SleepInput]):
    name = "Sleep"
    description = "Sleep, then say so."
    input_model = SleepInput
    read_only = True

    async def run(self, args: SleepInput, ctx: CallContext) -> ToolOutput:
        await asyncio.sleep(args.seconds)
        return ToolOutput.text(f"slept {args.seconds}")


class Recorder(list[AgentEvent]):
    """Collects events; ``wait_for(kind)`` returns once one of that kind arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = asyncio.Event()

    def __call__(self, event: AgentEvent) -> None:
        self.append(event)
        self.arrived.set()

    async def wait_for(self, kind: type[Any]) -> None:
        while not any(isinstance(e, kind) for e in self):
            self.arrived.clear()
            await self.arrived.wait()


def make_agent(provider: Any, events: Recorder) -> Agent:
    return Agent(
        provider=provider,
        model="test-model",
        system_prompt="You are a test.",
        toolset=ToolList([Sleep()]),
        env=ToolEnv(cwd=Path.cwd(), project_root=Path.cwd()),
        emit=events,
    )


def history_from_events(events: list[AgentEvent]) -> list[Message]:
    """What a transcript reader rebuilds: every announced append, in order."""
    appended = (UserPrompt, AssistantMessage, ToolResultsMessage, HistoryAppended)
    return [e.message for e in events if isinstance(e, appended)]


# ---------------------------------------------------------------------------- the loop


async def test_every_append_of_a_normal_run_is_announced() -> None:
    events = Recorder()
    provider = ScriptedProvider([reply("Sleeping.", tool_call("Sleep", {})), "Done."])
    agent = make_agent(provider, events)
    await agent.run("go")
    assert len(agent.conversation.messages) == 4
    assert history_from_events(events) == agent.conversation.messages
    assert not any(isinstance(e, HistoryAppended) for e in events)


async def test_cancel_mid_tool_announces_the_interrupted_results() -> None:
    events = Recorder()
    provider = ScriptedProvider([reply("Sleeping.", tool_call("Sleep", {"seconds": 30}))])
    agent = make_agent(provider, events)
    with hang_guard():
        task = asyncio.ensure_future(agent.run("go"))
        await events.wait_for(ToolStarted)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    last = events[-1]
    assert isinstance(last, HistoryAppended)
    [result] = last.message.parts
    assert isinstance(result, ToolResult) and result.is_error and result.text == INTERRUPTED
    assert history_from_events(events) == agent.conversation.messages


async def test_cancel_mid_stream_announces_the_partial_reply() -> None:
    events = Recorder()

    class PartialThenHang:
        name = "partial"

        async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
            yield TextDelta(text="Half an ans")
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        def warm_up(self) -> None:
            pass

    agent = make_agent(PartialThenHang(), events)
    with hang_guard():
        task = asyncio.ensure_future(agent.run("go"))
        await events.wait_for(AssistantDelta)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert isinstance(events[-1], HistoryAppended)
    assert events[-1].message == Message(role="assistant", parts=(TextPart(text="Half an ans"),))
    assert history_from_events(events) == agent.conversation.messages


async def test_continue_prompt_after_max_tokens_is_announced() -> None:
    events = Recorder()

    agent = make_agent(ScriptedProvider([CutOff("part 1"), "part 2"]), events)
    result = await agent.run("write a lot")
    assert result.text == "part 1part 2"  # the cut answer and its continuation, joined
    continued = [e for e in events if isinstance(e, HistoryAppended)]
    assert [e.message for e in continued] == [Message.user(CONTINUE_PROMPT)]
    assert history_from_events(events) == agent.conversation.messages


async def test_hang_provider_cancel_before_any_text_appends_nothing_more() -> None:
    events = Recorder()
    agent = make_agent(ScriptedProvider([HANG]), events)
    with hang_guard():
        task = asyncio.ensure_future(agent.run("go"))
        await events.wait_for(UserPrompt)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert agent.conversation.messages == [Message.user("go")]
    assert history_from_events(events) == agent.conversation.messages
