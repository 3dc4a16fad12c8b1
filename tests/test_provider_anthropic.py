"""The Anthropic provider: what goes on the wire, prompt caching, usage, stop reasons."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_model_server import FakeModelServer
from hang import hang_guard

from caliban.messages import ImagePart, Message, TextPart, ToolCall, ToolResult, ToolSpec, Usage
from caliban.providers.anthropic import AnthropicProvider, MessagesStreamAccumulator
from caliban.providers.anthropic_http import API_VERSION
from caliban.providers.base import ProviderRequest, ResponseDone, TextDelta, ToolCallStarted
from caliban.providers.retry import IncompleteStream, RetryPolicy

pytestmark = pytest.mark.anyio

EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture
async def provider(fake_model_server: FakeModelServer) -> AsyncIterator[AnthropicProvider]:
    made = AnthropicProvider(
        api_key="sk-test", base_url=fake_model_server.url, retry=RetryPolicy(base_delay=0)
    )
    yield made
    await made.aclose()


async def run(
    provider: AnthropicProvider, *messages: Message, tools: tuple[ToolSpec, ...] = ()
) -> ResponseDone:
    request = ProviderRequest(
        model="claude-test", system="Be brief.", messages=messages, tools=tools
    )
    # A hang guard, not a speed test (a loaded machine is slow to start anything).
    with hang_guard():
        events = [event async for event in provider.stream(request)]
    assert isinstance(events[-1], ResponseDone)
    return events[-1]


def cache_marked(body: dict[str, Any]) -> list[str]:
    """Where the request put cache breakpoints, as 'system' or 'message N block M'."""
    marks = [
        "system" for block in body.get("system", []) if block.get("cache_control") == EPHEMERAL
    ]
    for i, message in enumerate(body["messages"]):
        for j, block in enumerate(message["content"]):
            if block.get("cache_control") == EPHEMERAL:
                marks.append(f"message {i} block {j}")
    return marks


def call(id: str, text: str = "x") -> ToolCall:
    return ToolCall(id=id, name="Echo", arguments={"text": text})


def result(id: str, text: str, *, is_error: bool = False) -> ToolResult:
    return ToolResult(tool_call_id=id, content=(TextPart(text=text),), is_error=is_error)


async def test_request_headers_model_system_and_tools(
    provider: AnthropicProvider, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add({"text": "ok"})
    spec = ToolSpec(name="Echo", description="Echo it.", input_schema={})
    await run(provider, Message.user("hi"), tools=(spec,))
    [captured] = fake_model_server.requests
    assert captured.path == "/v1/messages"
    assert captured.headers["x-api-key"] == "sk-test" and "authorization" not in captured.headers
    assert captured.headers["anthropic-version"] == API_VERSION
    assert captured.headers["content-type"] == "application/json"
    assert captured.headers["user-agent"].startswith("caliban/")
    body = captured.body
    assert (
        body["model"] == "claude-test" and body["stream"] is True and body["max_tokens"] == 16_384
    )
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    assert body["tools"] == [
        {
            "name": "Echo",
            "description": "Echo it.",
            "input_schema": {"type": "object", "properties": {}},
        }
    ]


async def test_cache_breakpoints_on_system_newest_and_previous_user_message(
    provider: AnthropicProvider, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add({"text": "done"})
    history = (
        Message.user("read a and b"),
        Message(role="assistant", parts=(TextPart(text="Reading."), call("t1"), call("t2"))),
        Message(role="user", parts=(result("t1", "A"), result("t2", "B"))),
        Message(role="assistant", parts=(call("t3"),)),
        Message(role="user", parts=(result("t3", "C"),)),
    )
    await run(provider, *history)
    body = fake_model_server.requests[0].body
    # The newest message, and the user message where the previous request put its breakpoint.
    assert cache_marked(body) == ["system", "message 2 block 1", "message 4 block 0"]
    assert len(cache_marked(body)) <= 4  # the API's limit


async def test_history_translation(
    provider: AnthropicProvider, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add({"text": "ok"})
    image = ImagePart(media_type="image/png", data="iVBORw0KGgo=")
    history = (
        Message.user("look"),
        Message(role="assistant", parts=(TextPart(text=""), call("t1", "shot"))),
        # A cancelled turn: interrupted results, then the next prompt — two user messages.
        Message(
            role="user",
            parts=(
                ToolResult(
                    tool_call_id="t1", content=(TextPart(text="pixels"), image), is_error=False
                ),
            ),
        ),
        Message.user("and now?"),
        Message(role="assistant", parts=(call("t2"),)),
        Message(role="user", parts=(result("t2", "boom", is_error=True),)),
    )
    await run(provider, *history)
    messages = fake_model_server.requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "tool_use", "id": "t1", "name": "Echo", "input": {"text": "shot"}}
    ]
    merged = messages[2]["content"]
    assert [b["type"] for b in merged] == ["tool_result", "text"]
    assert merged[0]["content"] == [
        {"type": "text", "text": "pixels"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
    ]
    assert "is_error" not in merged[0]
    assert merged[1]["text"] == "and now?"
    error_block = messages[4]["content"][0]
    assert error_block["is_error"] is True and error_block["content"][0]["text"] == "boom"


async def test_cache_usage_is_mapped(
    provider: AnthropicProvider, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add(
        {
            "text": "cached",
            "usage": {
                "input_tokens": 12,
                "output_tokens": 34,
                "cache_read_input_tokens": 5000,
                "cache_creation_input_tokens": 700,
            },
        }
    )
    final = await run(provider, Message.user("hi"))
    assert final.usage == Usage(
        input_tokens=12, output_tokens=34, cache_read_tokens=5000, cache_write_tokens=700
    )


@pytest.mark.parametrize(
    ("wire", "ours"),
    [
        ("max_tokens", "max_tokens"),
        ("refusal", "refusal"),
        ("pause_turn", "pause_turn"),  # resumed by the loop (web search)
        ("stop_sequence", "other"),
    ],
)
async def test_stop_reasons(
    provider: AnthropicProvider, fake_model_server: FakeModelServer, wire: str, ours: str
) -> None:
    fake_model_server.add({"text": "cut", "stop_reason": wire})
    assert (await run(provider, Message.user("hi"))).stop_reason == ours


async def test_client_is_created_lazily_and_warm_up_is_idempotent() -> None:
    provider = AnthropicProvider(api_key="k", base_url="http://127.0.0.1:9")
    assert provider._client is None
    provider.warm_up()
    client = provider._client
    assert client is not None
    await provider.prepare()
    assert provider._client is client
    await provider.aclose()
    assert provider._client is None


# ---------------------------------------------------------------------------- the accumulator


def test_accumulator_handles_initial_text_unknown_blocks_and_split_json() -> None:
    acc = MessagesStreamAccumulator()
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "server_tool_use", "id": "s", "name": "web_search"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"q": 1}'},
        },
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "text", "text": "Hi"},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": " there"},
        },
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "t", "name": "Echo"},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": ""},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"te'},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": 'xt": 1}'},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    shown = [out for event in events for out in acc.feed(event)]
    assert shown == [
        TextDelta(text="Hi"),
        TextDelta(text=" there"),
        ToolCallStarted(id="t", name="Echo"),
    ]
    message, usage, stop = acc.finish()
    assert message.text == "Hi there" and message.tool_calls == (
        ToolCall(id="t", name="Echo", arguments={"text": 1}),
    )
    assert usage == Usage(input_tokens=3, output_tokens=9) and stop == "tool_use"


def test_accumulator_tool_call_without_input_has_empty_arguments() -> None:
    acc = MessagesStreamAccumulator()
    acc.feed(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "Ls"},
        }
    )
    acc.feed(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 2},
        }
    )
    message, _, _ = acc.finish()
    assert message.tool_calls[0].arguments == {}


def test_accumulator_rejects_a_stream_cut_short() -> None:
    acc = MessagesStreamAccumulator()
    acc.feed({"type": "message_start", "message": {"usage": {"input_tokens": 3}}})
    acc.feed(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    )
    with pytest.raises(IncompleteStream):
        acc.finish()
