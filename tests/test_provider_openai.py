"""The OpenAI provider: what goes on the wire, usage, and compatible-server quirks through
the real SDK (raw SSE chunks from the fake server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_model_server import FakeModelServer
from hang import hang_guard

from caliban.messages import ImagePart, Message, TextPart, ToolCall, ToolResult, ToolSpec, Usage
from caliban.providers.base import (
    ApiRetry,
    ProviderError,
    ProviderRequest,
    ResponseDone,
    TextDelta,
    ToolCallStarted,
)
from caliban.providers.openai import OpenAIProvider, build_params
from caliban.providers.retry import RetryPolicy

pytestmark = pytest.mark.anyio


@pytest.fixture
async def provider(fake_model_server: FakeModelServer) -> AsyncIterator[OpenAIProvider]:
    made = OpenAIProvider(
        api_key="sk-test",
        base_url=fake_model_server.openai_base_url,
        retry=RetryPolicy(base_delay=0),
    )
    yield made
    await made.aclose()


async def run(
    provider: OpenAIProvider, *messages: Message, tools: tuple[ToolSpec, ...] = ()
) -> tuple[list[Any], ResponseDone]:
    request = ProviderRequest(
        model="gpt-test",
        system="Be brief.",
        messages=messages or (Message.user("hi"),),
        tools=tools,
    )
    with hang_guard():
        events = [event async for event in provider.stream(request)]
    assert isinstance(events[-1], ResponseDone)
    return events, events[-1]


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "local",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }


def tool_chunk(*deltas: dict[str, Any]) -> dict[str, Any]:
    return chunk({"tool_calls": list(deltas)})


async def test_request_body(provider: OpenAIProvider, fake_model_server: FakeModelServer) -> None:
    fake_model_server.add({"text": "ok"})
    spec = ToolSpec(
        name="Echo", description="Echo it.", input_schema={"properties": {"t": {"type": "string"}}}
    )
    await run(provider, tools=(spec,))
    [captured] = fake_model_server.requests
    assert captured.path == "/v1/chat/completions"
    assert captured.headers["authorization"] == "Bearer sk-test"
    body = captured.body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 16_384 and "max_completion_tokens" not in body  # custom base URL
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "Echo",
                "description": "Echo it.",
                "parameters": {"type": "object", "properties": {"t": {"type": "string"}}},
            },
        }
    ]


async def test_history_translation(
    provider: OpenAIProvider, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add({"text": "ok"})
    image = ImagePart(media_type="image/png", data="iVBORw0KGgo=")
    history = (
        Message.user("look"),
        Message(
            role="assistant",
            parts=(
                TextPart(text="Two things."),
                ToolCall(id="a", name="Shot", arguments={"x": 1}),
                ToolCall(id="b", name="Read", arguments={}),
            ),
        ),
        Message(
            role="user",
            parts=(
                ToolResult(tool_call_id="a", content=(TextPart(text="screen"), image)),
                ToolResult(
                    tool_call_id="b", content=(TextPart(text="no such file"),), is_error=True
                ),
            ),
        ),
        Message.user("and now?"),  # after a cancelled turn: two user messages in a row
    )
    await run(provider, *history)
    messages = fake_model_server.requests[0].body["messages"][1:]
    assert messages[0] == {"role": "user", "content": "look"}
    assert messages[1] == {
        "role": "assistant",
        "content": "Two things.",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "Shot", "arguments": '{"x": 1}'}},
            {"id": "b", "type": "function", "function": {"name": "Read", "arguments": "{}"}},
        ],
    }
    assert messages[2]["role"] == "tool" and messages[2]["tool_call_id"] == "a"
    assert messages[2]["content"].startswith("screen\n[1 image(s)")
    assert messages[3] == {"role": "tool", "tool_call_id": "b", "content": "Error: no such file"}
    assert messages[4] == {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "text", "text": "and now?"},
        ],
    }
    assert len(messages) == 5


async def test_official_endpoint_uses_max_completion_tokens() -> None:
    request = ProviderRequest(model="gpt-5.5", system="", messages=(Message.user("hi"),), tools=())
    params = build_params(request)
    assert params["max_completion_tokens"] == 16_384 and "max_tokens" not in params
    assert params["messages"] == [{"role": "user", "content": "hi"}]  # no empty system message
    assert "tools" not in params
    for url in (None, "https://api.openai.com/v1"):
        assert OpenAIProvider(api_key="k", base_url=url).token_limit_key == "max_completion_tokens"


async def test_server_rejecting_max_tokens_is_asked_again_with_max_completion_tokens(
    provider: OpenAIProvider, fake_model_server: FakeModelServer
) -> None:
    rejection = {
        "status": 400,
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
    }
    fake_model_server.add(rejection, {"text": "one"}, {"text": "two"})
    assert (await run(provider))[1].message.text == "one"
    assert (await run(provider))[1].message.text == "two"
    limits = [sorted(k for k in body if k.startswith("max_")) for body in fake_model_server.bodies]
    assert limits == [["max_tokens"], ["max_completion_tokens"], ["max_completion_tokens"]]


async def test_cached_tokens_become_cache_reads(
    provider: OpenAIProvider, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add(
        {
            "text": "ok",
            "usage": {"input_tokens": 40, "output_tokens": 8, "cache_read_input_tokens": 2000},
        }
    )
    _, final = await run(provider)
    assert final.usage == Usage(input_tokens=40, output_tokens=8, cache_read_tokens=2000)


async def test_missing_usage_is_estimated(
    provider: OpenAIProvider, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add({"sse": [chunk({"content": "Hello " * 50}), chunk({}, "stop"), "[DONE]"]})
    _, final = await run(provider, Message.user("x" * 4000))
    assert final.message.text == "Hello " * 50
    assert final.usage.input_tokens >= 1000 and final.usage.output_tokens >= 60


async def test_quirky_server_stream(
    provider: OpenAIProvider, fake_model_server: FakeModelServer
) -> None:
    """Missing ids, "" then "{}", null arguments, two calls in one chunk, text and tools."""
    fake_model_server.add(
        {
            "sse": [
                chunk({"role": "assistant", "content": None}),
                chunk({"content": "Let me look."}),
                tool_chunk({"index": 0, "function": {"name": "Ls", "arguments": ""}}),
                tool_chunk({"index": 0, "function": {"arguments": "{}"}}),
                tool_chunk(
                    {
                        "index": 1,
                        "type": "function",
                        "function": {"name": "Pwd", "arguments": None},
                    },
                    {"index": 2, "id": "c3", "function": {"name": "Read", "arguments": '{"path":'}},
                ),
                tool_chunk({"index": 2, "function": {"arguments": ' "a.txt"}'}}),
                chunk({}, "stop"),
                "[DONE]",
            ]
        }
    )
    events, final = await run(provider)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Let me look."]
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [e.name for e in started] == ["Ls", "Pwd", "Read"]
    ls, pwd, read = final.message.tool_calls
    assert (ls.name, ls.arguments) == ("Ls", {})
    assert (pwd.name, pwd.arguments) == ("Pwd", {})
    assert (read.id, read.arguments) == ("c3", {"path": "a.txt"})
    assert ls.id and pwd.id and ls.id != pwd.id
    assert [s.id for s in started] == [ls.id, pwd.id, "c3"]
    assert final.message.text == "Let me look." and final.stop_reason == "tool_use"


async def test_empty_stream_is_retried(
    provider: OpenAIProvider, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add({"sse": ["[DONE]"]}, {"text": "second"})
    events, final = await run(provider)
    assert final.message.text == "second"
    assert any(isinstance(e, ApiRetry) and "incomplete" in e.error for e in events)
    assert len(fake_model_server.requests) == 2


async def test_generated_ids_round_trip_in_the_next_request(
    provider: OpenAIProvider, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add(
        {
            "sse": [
                tool_chunk({"index": 0, "function": {"name": "Ls", "arguments": "{}"}}),
                chunk({}, "tool_calls"),
                "[DONE]",
            ]
        },
        {"text": "ok"},
    )
    _, first = await run(provider)
    [call] = first.message.tool_calls
    follow_up = Message(
        role="user", parts=(ToolResult(tool_call_id=call.id, content=(TextPart(text="a b"),)),)
    )
    await run(provider, Message.user("hi"), first.message, follow_up)
    sent = fake_model_server.requests[1].body["messages"]
    assert sent[2]["tool_calls"][0]["id"] == call.id and sent[3]["tool_call_id"] == call.id


async def test_malformed_chunk_is_retried_then_reported(
    provider: OpenAIProvider, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add({"sse": ["{not json"]}, {"text": "clean"})
    assert (await run(provider))[1].message.text == "clean"
    fake_model_server.add(*[{"sse": ["{not json"]}] * 4)
    with pytest.raises(ProviderError, match="after 4 attempts: malformed response from the server"):
        await run(provider)
