"""Thinking and effort: what goes on the wire, what streams back, and what the history keeps
(both providers through their real SDKs against the fake server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_model_server import FakeModelServer
from hang import hang_guard

from caliban.agent import Agent
from caliban.events import AgentEvent, AssistantDelta, AssistantThinkingDelta
from caliban.messages import Message, TextPart, ThinkingPart, ToolCall, ToolResult, ToolSpec
from caliban.providers.anthropic import AnthropicProvider, build_params, thinking_style
from caliban.providers.base import (
    Effort,
    ProviderRequest,
    ResponseDone,
    TextDelta,
    ThinkingDelta,
)
from caliban.providers.openai import OpenAIProvider
from caliban.providers.retry import RetryPolicy
from caliban.session.serialize import message_from_json, message_to_json
from caliban.tools.base import ToolEnv
from caliban.toolsets.tool_list import ToolList

pytestmark = pytest.mark.anyio

NO_RETRY_WAIT = RetryPolicy(base_delay=0)


def anthropic(server: FakeModelServer, effort: Effort | None = None) -> AnthropicProvider:
    return AnthropicProvider(
        api_key="sk-test", base_url=server.url, retry=NO_RETRY_WAIT, effort=effort
    )


def openai(server: FakeModelServer, effort: Effort | None = None) -> OpenAIProvider:
    return OpenAIProvider(
        api_key="sk-test", base_url=server.openai_base_url, retry=NO_RETRY_WAIT, effort=effort
    )


async def run(
    provider: AnthropicProvider | OpenAIProvider,
    *messages: Message,
    model: str = "claude-opus-4-6",
) -> list[Any]:
    request = ProviderRequest(
        model=model,
        system="Be brief.",
        messages=messages or (Message.user("hi"),),
        tools=(ToolSpec(name="Read", description="Read a file."),),
    )
    try:
        with hang_guard():
            return [event async for event in provider.stream(request)]
    finally:
        await provider.aclose()


THOUGHT = "The user greets me. A short greeting back is right."


# ---------------------------------------------------------------------------- effort on the wire

ADAPTIVE = {"type": "adaptive"}


def budget(tokens: int) -> dict[str, Any]:
    return {"type": "enabled", "budget_tokens": tokens}


async def test_no_effort_sends_nothing_about_thinking(fake_model_server: FakeModelServer) -> None:
    fake_model_server.add({"text": "ok"}, {"text": "ok"})
    await run(anthropic(fake_model_server))
    await run(openai(fake_model_server), model="qwen")
    sent_anthropic, sent_openai = fake_model_server.bodies
    assert set(sent_anthropic) == {"model", "max_tokens", "messages", "system", "tools", "stream"}
    assert sent_anthropic["max_tokens"] == 16_384
    assert set(sent_openai) == {
        "model",
        "messages",
        "stream",
        "stream_options",
        "max_tokens",
        "tools",
    }


@pytest.mark.parametrize(
    ("model", "effort", "thinking", "extra", "max_tokens"),
    [
        ("claude-opus-4-6", "high", ADAPTIVE, {"output_config": {"effort": "high"}}, 32_000),
        ("claude-sonnet-5-5", "medium", ADAPTIVE, {"output_config": {"effort": "medium"}}, 24_000),
        ("claude-haiku-4-5-20251001", "low", budget(4_000), {}, 16_384),
        ("claude-opus-4-1-20250805", "high", budget(24_000), {}, 32_000),
    ],
)
async def test_effort_turns_thinking_on_in_the_form_the_model_knows(
    fake_model_server: FakeModelServer,
    model: str,
    effort: Effort,
    thinking: dict[str, Any],
    extra: dict[str, Any],
    max_tokens: int,
) -> None:
    fake_model_server.add({"text": "ok"})
    await run(anthropic(fake_model_server, effort), model=model)
    [body] = fake_model_server.bodies
    assert body["thinking"] == thinking
    assert {k: body[k] for k in extra} == extra and ("output_config" in body) == bool(extra)
    assert body["max_tokens"] == max_tokens
    if "budget_tokens" in thinking:
        assert body["max_tokens"] > thinking["budget_tokens"]


@pytest.mark.parametrize(
    ("model", "style"),
    [
        ("claude-3-7-sonnet-20250219", "budget"),
        ("claude-sonnet-4-20250514", "budget"),
        ("claude-haiku-4-5@20251001", "budget"),
        ("claude-opus-4-6", "adaptive"),
        ("claude-opus-4-7", "adaptive"),
        ("claude-fable-5", "adaptive"),
        ("claude-mythos-preview", "adaptive"),
        ("glm-4.6", "budget"),  # another model behind an Anthropic-compatible API
    ],
)
def test_thinking_style_by_model(model: str, style: str) -> None:
    assert thinking_style(model) == style


async def test_a_model_rejecting_adaptive_thinking_is_asked_again_with_a_budget(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.add(
        {"status": 400, "message": "thinking.type: adaptive thinking is not supported"},
        {"text": "ok"},
        {"text": "again"},
    )
    provider = anthropic(fake_model_server, "medium")
    await run(provider, model="claude-new-9")
    await run(provider, model="claude-new-9")
    first, retried, later = fake_model_server.bodies
    assert first["thinking"] == {"type": "adaptive"} and "output_config" in first
    assert retried["thinking"] == {"type": "enabled", "budget_tokens": 12_000}
    assert "output_config" not in retried
    assert later["thinking"] == retried["thinking"]  # remembered for this model


async def test_an_unrelated_bad_request_is_not_retried_with_other_thinking(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.add({"status": 400, "message": "messages: roles must alternate"})
    with pytest.raises(Exception, match="roles must alternate"):
        await run(anthropic(fake_model_server, "low"))
    assert len(fake_model_server.requests) == 1


async def test_openai_effort_is_reasoning_effort_and_dropped_when_rejected(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.add(
        {"text": "ok"},
        {
            "status": 400,
            "message": "Unsupported parameter: 'reasoning_effort' is not supported with "
            "this model.",
        },
        {"text": "ok"},
        {"text": "ok"},
    )
    await run(openai(fake_model_server, "high"), model="o4-mini")
    provider = openai(fake_model_server, "low")
    await run(provider, model="gpt-4.1")
    await run(provider, model="gpt-4.1")
    reasoning, rejected, retried, later = fake_model_server.bodies
    assert reasoning["reasoning_effort"] == "high" and rejected["reasoning_effort"] == "low"
    assert "reasoning_effort" not in retried and "reasoning_effort" not in later


# ---------------------------------------------------------------------------- thinking streamed


async def test_anthropic_thinking_streams_apart_from_the_answer(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.add({"thinking": THOUGHT, "signature": "sig-123", "text": "Hello!"})
    events = await run(anthropic(fake_model_server, "low"))
    thought = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    answer = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert thought == THOUGHT and answer == "Hello!"
    done = events[-1]
    assert isinstance(done, ResponseDone)
    assert done.message.text == "Hello!"
    assert done.message.parts[0] == ThinkingPart(
        text=THOUGHT, signature="sig-123", model="claude-opus-4-6"
    )


async def test_thinking_goes_back_to_anthropic_exactly_as_received(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.add(
        {
            "thinking": THOUGHT,
            "signature": "sig-123",
            "redacted_thinking": "EncryptedBlob==",
            "tool_calls": [{"id": "toolu_1", "name": "Read", "arguments": {"file_path": "a"}}],
        },
        {"text": "done"},
    )
    provider = anthropic(fake_model_server, "low")
    first = await run(provider)
    reply = first[-1].message
    history = (
        Message.user("hi"),
        reply,
        Message(
            role="user",
            parts=(ToolResult(tool_call_id="toolu_1", content=(TextPart(text="A"),)),),
        ),
    )
    await run(anthropic(fake_model_server, "low"), *history)
    assistant = fake_model_server.bodies[1]["messages"][1]
    assert assistant["content"] == [
        {"type": "thinking", "thinking": THOUGHT, "signature": "sig-123"},
        {"type": "redacted_thinking", "data": "EncryptedBlob=="},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a"}},
    ]


async def test_thinking_is_sent_only_to_the_model_that_wrote_it(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.add({"text": "ok"}, {"text": "ok"})
    history = (
        Message.user("hi"),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="hmm", signature="s", model="claude-opus-4-6"),
                ThinkingPart(text="from a local model"),  # no signature
                TextPart(text="Hello"),
            ),
        ),
        Message.user("and?"),
    )
    await run(anthropic(fake_model_server), *history, model="claude-haiku-4-5")
    await run(openai(fake_model_server), *history, model="qwen")
    to_sonnet, to_openai = fake_model_server.bodies
    assert to_sonnet["messages"][1]["content"] == [{"type": "text", "text": "Hello"}]
    assert to_openai["messages"][2] == {"role": "assistant", "content": "Hello"}


def test_cache_breakpoint_never_lands_on_a_thinking_block() -> None:
    only_thinking = Message(
        role="assistant", parts=(ThinkingPart(text="t", signature="s", model="m"),)
    )
    call = ToolCall(id="c", name="Read", arguments={})
    with_call = Message(
        role="assistant", parts=(ThinkingPart(text="t", signature="s", model="m"), call)
    )
    body = build_params(
        ProviderRequest(
            model="m", system="", messages=(Message.user("a"), with_call, only_thinking), tools=()
        )
    )
    last = body["messages"][-1]["content"]  # the two assistant messages, merged
    marked = [block["type"] for block in last if "cache_control" in block]
    assert [block["type"] for block in last] == ["thinking", "tool_use", "thinking"]
    assert marked == ["tool_use"]


async def test_openai_compatible_reasoning_is_thinking_and_never_sent_back(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.add(
        {"thinking": "Let me think.", "reasoning_key": "reasoning", "text": "Four."},
        {"text": "ok"},
    )
    events = await run(openai(fake_model_server), model="qwen3")
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "Let me think."
    message = events[-1].message
    assert message.text == "Four." and message.thinking == "Let me think."
    await run(openai(fake_model_server), Message.user("2+2?"), message, Message.user("x"))
    assert fake_model_server.bodies[1]["messages"][2] == {"role": "assistant", "content": "Four."}


# ---------------------------------------------------------------------------- history and loop


def test_thinking_survives_serialisation() -> None:
    message = Message(
        role="assistant",
        parts=(
            ThinkingPart(text="why", signature="sig", model="claude-opus-4-6"),
            ThinkingPart(redacted_data="blob", model="claude-opus-4-6"),
            ThinkingPart(text="local reasoning"),
            TextPart(text="answer"),
        ),
    )
    data = message_to_json(message)
    assert data["content"][:2] == [
        {"type": "thinking", "thinking": "why", "signature": "sig", "model": "claude-opus-4-6"},
        {"type": "redacted_thinking", "data": "blob", "model": "claude-opus-4-6"},
    ]
    assert message_from_json(data) == message


async def test_the_loop_streams_thinking_as_its_own_event_and_keeps_it_out_of_the_result(
    fake_model_server: FakeModelServer, tmp_path: Path
) -> None:
    fake_model_server.add({"thinking": THOUGHT, "text": "Hello!"})
    events: list[AgentEvent] = []
    provider = anthropic(fake_model_server, "low")
    agent = Agent(
        provider=provider,
        model="claude-opus-4-6",
        system_prompt="Be brief.",
        toolset=ToolList([]),
        env=ToolEnv(cwd=tmp_path, project_root=tmp_path),
        emit=events.append,
    )
    try:
        with hang_guard():
            result = await agent.run("hi")
    finally:
        await provider.aclose()
    thinking = "".join(e.text for e in events if isinstance(e, AssistantThinkingDelta))
    text = "".join(e.text for e in events if isinstance(e, AssistantDelta))
    assert thinking == THOUGHT and text == "Hello!" and result.text == "Hello!"
    assert agent.conversation.messages[-1].thinking == THOUGHT


async def test_the_scripted_provider_streams_thinking_too(tmp_path: Path) -> None:
    from caliban.providers.scripted import ScriptedProvider, reply

    events: list[AgentEvent] = []
    agent = Agent(
        provider=ScriptedProvider([reply(ThinkingPart(text="hmm, easy"), "4")]),
        model="m",
        system_prompt="",
        toolset=ToolList([]),
        env=ToolEnv(cwd=tmp_path, project_root=tmp_path),
        emit=events.append,
    )
    result = await agent.run("2+2?")
    assert "".join(e.text for e in events if isinstance(e, AssistantThinkingDelta)) == "hmm, easy"
    assert result.text == "4"
