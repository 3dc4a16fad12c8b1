"""The agent loop against the scripted provider."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from authorizers import Refusing
from hang import HANG_S, hang_guard
from pydantic import BaseModel

from caliban.agent import Agent, RunResult
from caliban.calls.bound import BoundCall
from caliban.calls.verdict import ALLOW, Ask, Decided, Deny, Settled
from caliban.events import AgentEvent, Notice, ToolFinished, ToolStarted
from caliban.messages import ToolResult
from caliban.providers.scripted import (
    HANG,
    CutOff,
    ScriptedProvider,
    ScriptExhausted,
    reply,
    tool_call,
)
from caliban.tools.base import BuiltinTool, CallContext, ToolEnv, ToolOutput
from caliban.toolsets.tool_list import ToolList

pytestmark = pytest.mark.anyio


class EchoInput(BaseModel):
    text: str
    delay: float = 0.0


class Echo(BuiltinTool[EchoInput]):
    name = "Echo"
    description = "Echo the text back."
    input_model = EchoInput
    read_only = True

    async def run(self, args: EchoInput, ctx: CallContext) -> ToolOutput:
        await asyncio.sleep(args.delay)
        return ToolOutput.text(f"echo: {args.text}")


class Boom(BuiltinTool[EchoInput]):
    name = "Boom"
    description = "Always raises."
    input_model = EchoInput

    async def run(self, args: EchoInput, ctx: CallContext) -> ToolOutput:
        raise RuntimeError("disk on fire")


def make_agent(
    provider: ScriptedProvider, events: list[AgentEvent] | None = None, **kw: Any
) -> Agent:
    sink = events if events is not None else []
    return Agent(
        provider=provider,
        model="test-model",
        system_prompt="You are a test.",
        toolset=ToolList([Echo(), Boom()]),
        env=ToolEnv(cwd=Path.cwd(), project_root=Path.cwd()),
        emit=sink.append,
        **kw,
    )


def results_of(provider: ScriptedProvider, request: int) -> list[ToolResult]:
    return [p for p in provider.requests[request].messages[-1].parts if isinstance(p, ToolResult)]


async def test_text_reply_ends_the_run() -> None:
    provider = ScriptedProvider(["Hello there."])
    result = await make_agent(provider).run("hi")
    assert result == RunResult(
        subtype="success", text="Hello there.", num_turns=1, usage=provider.usage
    )
    assert provider.offered == [["Echo", "Boom"]]
    assert provider.requests[0].system == "You are a test."


async def test_tool_call_result_goes_back_to_the_model() -> None:
    provider = ScriptedProvider(
        [reply("Let me echo.", tool_call("Echo", {"text": "ping"})), "Done."]
    )
    result = await make_agent(provider).run("go")
    assert result.text == "Done." and result.num_turns == 2
    [echoed] = results_of(provider, 1)
    assert echoed.text == "echo: ping" and not echoed.is_error


async def test_parallel_calls_run_concurrently_and_keep_call_order() -> None:
    provider = ScriptedProvider(
        [
            reply(
                tool_call("Echo", {"text": "slow", "delay": 0.2}),
                tool_call("Echo", {"text": "fast", "delay": 0.0}),
            ),
            "ok",
        ]
    )
    events: list[AgentEvent] = []
    loop = asyncio.get_running_loop()
    started = loop.time()
    await make_agent(provider, events).run("go")
    assert loop.time() - started < 0.35
    assert [r.text for r in results_of(provider, 1)] == ["echo: slow", "echo: fast"]
    finished = [e.result.text for e in events if isinstance(e, ToolFinished)]
    assert finished == ["echo: fast", "echo: slow"]


async def test_tool_failures_and_unknown_tools_become_error_results() -> None:
    provider = ScriptedProvider(
        [
            reply(
                tool_call("Boom", {"text": "x"}),
                tool_call("Nope", {}),
                tool_call("Echo", {"txt": "typo"}),
            ),
            "sorry",
        ]
    )
    await make_agent(provider).run("go")
    boom, unknown, invalid = results_of(provider, 1)
    assert boom.is_error and "disk on fire" in boom.text
    assert unknown.is_error and "Unknown tool 'Nope'" in unknown.text and "Echo" in unknown.text
    assert invalid.is_error and "text: Field required" in invalid.text


async def test_denied_call_tells_the_model_why() -> None:
    provider = ScriptedProvider([reply(tool_call("Echo", {"text": "x"})), "ok"])
    await make_agent(provider, authorizer=Refusing(lambda call: "plan mode is read-only")).run("go")
    [denied] = results_of(provider, 1)
    assert denied.is_error and "plan mode is read-only" in denied.text


async def test_max_turns_stops_with_error_subtype() -> None:
    provider = ScriptedProvider([reply(tool_call("Echo", {"text": str(i)})) for i in range(3)])
    result = await make_agent(provider, max_turns=3).run("loop forever")
    assert result.subtype == "error_max_turns" and result.num_turns == 3


async def test_unexpected_extra_request_fails_loudly() -> None:
    provider = ScriptedProvider([reply(tool_call("Echo", {"text": "x"}))])
    with pytest.raises(ScriptExhausted):
        await make_agent(provider).run("go")


async def test_cancelling_during_tools_keeps_history_valid() -> None:
    provider = ScriptedProvider([reply(tool_call("Echo", {"text": "x", "delay": 30})), "after"])
    started = asyncio.Event()

    def on_event(event: AgentEvent) -> None:
        if isinstance(event, ToolStarted):
            started.set()

    agent = make_agent(provider)
    agent.emit = on_event
    task = asyncio.create_task(agent.run("go"))
    await asyncio.wait_for(started.wait(), HANG_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = agent.conversation.messages[-1]
    [interrupted] = [p for p in last.parts if isinstance(p, ToolResult)]
    assert interrupted.is_error and "interrupted" in interrupted.text
    assert (await agent.run("next")).text == "after"


async def test_cancelling_a_hung_request_keeps_the_session_usable() -> None:
    provider = ScriptedProvider([HANG, "second answer"])
    agent = make_agent(provider)
    task = asyncio.create_task(agent.run("first"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await agent.run("again")).text == "second answer"


async def test_max_tokens_is_continued_once_then_reported() -> None:
    provider = ScriptedProvider([CutOff("The first half"), " and the rest."])
    events: list[AgentEvent] = []
    result = await make_agent(provider, events).run("long answer please")
    assert result.text == "The first half and the rest." and result.num_turns == 2
    assert "output token limit" in provider.requests[1].messages[-1].text
    assert not [e for e in events if isinstance(e, Notice)]

    twice = ScriptedProvider([CutOff("part one"), CutOff(" part two")])
    events = []
    result = await make_agent(twice, events).run("longer")
    assert result.text == "part one part two"
    [notice] = [e for e in events if isinstance(e, Notice)]
    assert notice.level == "warning" and "incomplete" in notice.text


async def test_a_read_only_call_repeated_turn_after_turn_is_held_back_then_stops_the_run() -> None:
    same = {"text": "current time"}
    provider = ScriptedProvider([reply(tool_call("Echo", same, id=f"c{n}")) for n in range(5)])
    agent = make_agent(provider)
    with hang_guard():
        result = await agent.run("what time is it?")
    assert [r.text for r in results_of(provider, 1)] == ["echo: current time"]
    [held] = results_of(provider, 2)
    assert (
        held.is_error
        and "you made this exact call (same arguments) in your previous turn" in held.text
    )
    assert result.subtype == "error_during_execution" and result.num_turns == 4
    assert result.error == (
        "Stopped: the model repeated the same tool call with the same arguments 3 turns in a row."
    )


async def test_changing_the_arguments_or_calling_a_tool_that_acts_is_never_held_back() -> None:
    provider = ScriptedProvider(
        [
            reply(tool_call("Echo", {"text": "a"})),
            reply(tool_call("Echo", {"text": "b"})),
            reply(tool_call("Boom", {"text": "x"})),
            reply(tool_call("Boom", {"text": "x"})),
            "done",
        ]
    )
    with hang_guard():
        result = await make_agent(provider).run("go")
    assert result.subtype == "success"
    assert results_of(provider, 2)[0].text == "echo: b"
    assert "disk on fire" in results_of(provider, 4)[0].text  # Boom ran both times


async def test_a_call_is_decided_again_when_a_parallel_cd_moved_it(tmp_path: Path) -> None:
    """While the user read "Write proj/notes.txt", an allowed `cd ../outside` in the same
    turn finished; the approved Write then wrote outside/notes.txt."""
    from caliban.permissions.rules import is_within
    from caliban.tools.bash import Bash
    from caliban.tools.write import Write

    project, outside = tmp_path / "proj", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    shown: list[Path] = []

    class AsksAboutWrites:
        def decide(self, call: BoundCall) -> Decided:
            return Ask(reason="it writes") if call.effects.writes else ALLOW

        async def ask(self, call: BoundCall, question: Ask) -> Settled:
            [target] = call.effects.writes  # what the question shows
            shown.append(target)
            if len(shown) == 1:  # the user takes a moment; the cd finishes meanwhile
                with hang_guard():
                    while call.env.cwd == project:  # noqa: ASYNC110
                        await asyncio.sleep(0.01)
            if is_within(target, project.resolve()):
                return ALLOW
            return Deny(reason="it writes outside the project", by="user")

    provider = ScriptedProvider(
        [
            reply(
                tool_call("Bash", {"command": "cd ../outside"}),
                tool_call("Write", {"file_path": "notes.txt", "content": "x"}),
            ),
            "ok",
        ]
    )
    agent = Agent(
        provider=provider,
        model="test-model",
        system_prompt="You are a test.",
        toolset=ToolList([Bash(), Write()]),
        env=ToolEnv(cwd=project, project_root=project),
        emit=[].append,
        authorizer=AsksAboutWrites(),
    )
    await agent.run("go")
    _, write = results_of(provider, 1)
    assert write.is_error and "outside the project" in write.text
    assert shown == [project.resolve() / "notes.txt", outside.resolve() / "notes.txt"]
    assert not (outside / "notes.txt").exists()
