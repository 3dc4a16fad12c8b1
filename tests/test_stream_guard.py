"""What a model server may send: bytes that are not UTF-8, streams cut short, parts over
their limits, and "prompt too long" errors (both providers, against the fake server)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import FakeModelServer
from hang import hang_guard

from caliban.messages import Message
from caliban.providers.anthropic import AnthropicProvider
from caliban.providers.base import (
    ApiRetry,
    PromptTooLong,
    ProviderError,
    ProviderRequest,
    ResponseDone,
    TextDelta,
)
from caliban.providers.guard import StreamLimits
from caliban.providers.openai import OpenAIProvider
from caliban.providers.retry import RetryPolicy, StreamRejected, prompt_too_long
from caliban.providers.sse import server_sent_events

pytestmark = pytest.mark.anyio

RECORDED = Path(__file__).parent / "recorded" / "llama-server"

APIS = ["anthropic", "openai"]


def provider_for(
    api: str, server: FakeModelServer, limits: StreamLimits | None = None
) -> AnthropicProvider | OpenAIProvider:
    extra: dict[str, Any] = {"limits": limits} if limits else {}
    if api == "anthropic":
        return AnthropicProvider(
            api_key="k", base_url=server.url, retry=RetryPolicy(base_delay=0), **extra
        )
    return OpenAIProvider(
        api_key="k", base_url=server.openai_base_url, retry=RetryPolicy(base_delay=0), **extra
    )


async def collect(provider: AnthropicProvider | OpenAIProvider) -> list[Any]:
    request = ProviderRequest(model="m", system="", messages=(Message.user("hi"),), tools=())
    try:
        with hang_guard():
            return [event async for event in provider.stream(request)]
    finally:
        await provider.aclose()


def openai_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def sse(*events: tuple[str | None, Any]) -> bytes:
    """Raw SSE bytes; a ``bytes`` payload is sent as it is (to smuggle in invalid bytes)."""
    out = b""
    for name, payload in events:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        out += (f"event: {name}\n".encode() if name else b"") + b"data: " + data + b"\n\n"
    return out


NOT_UTF8 = {
    "anthropic": sse(
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        ),
        (
            "content_block_delta",
            b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
            b'"text":"caf\xe9"}}',
        ),
    ),
    "openai": sse(
        (None, openai_chunk({"role": "assistant", "content": "Hi"})),
        (None, b'{"choices":[{"index":0,"delta":{"content":"caf\xe9"}}]}'),
    ),
}


# ---------------------------------------------------------------------------- encoding


@pytest.mark.parametrize("api", APIS)
async def test_bytes_that_are_not_utf8_are_a_clean_error_not_retried(
    api: str, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add({"raw": NOT_UTF8[api]})
    with pytest.raises(ProviderError, match=r"not valid UTF-8 \(at byte \d+"):
        await collect(provider_for(api, fake_model_server))
    assert len(fake_model_server.requests) == 1


async def test_utf8_split_across_reads_and_events_split_across_chunks_are_fine() -> None:
    text = "naïve café — 東京"  # multi-byte characters, cut in the middle by one-byte reads
    chunk = json.dumps(openai_chunk({"content": text}, "stop"), ensure_ascii=False).encode()
    body = sse((None, chunk), (None, b"[DONE]"))

    async def one_byte_at_a_time() -> AsyncIterator[bytes]:
        for i in range(len(body)):
            yield body[i : i + 1]

    events = [event async for event in server_sent_events(one_byte_at_a_time())]
    assert json.loads(events[0].data)["choices"][0]["delta"]["content"] == text
    assert events[-1].data == "[DONE]"


async def test_one_event_over_the_limit_is_refused_even_when_split_in_small_reads() -> None:
    lines = b"".join(b"data: " + b"x" * 50 + b"\n" for _ in range(40))  # one event, 2 KB

    async def reads() -> AsyncIterator[bytes]:
        for i in range(0, len(lines), 7):
            yield lines[i : i + 7]

    limits = StreamLimits(max_event_bytes=1_000)
    with pytest.raises(StreamRejected, match="one server-sent event grew past 1,000 bytes"):
        async for _ in server_sent_events(reads(), limits=limits):
            pass


# ---------------------------------------------------------------------------- cut short


NO_DONE = [openai_chunk({"role": "assistant", "content": ""}), openai_chunk({}, "stop")]
NO_FINISH = [openai_chunk({"role": "assistant", "content": ""}), "[DONE]"]


@pytest.mark.parametrize(
    ("events", "reason"),
    [(NO_DONE, "without \\[DONE\\]"), (NO_FINISH, "without a finish_reason")],
)
async def test_openai_stream_cut_before_the_end_is_retried_not_taken_as_complete(
    fake_model_server: FakeModelServer, events: list[Any], reason: str
) -> None:
    fake_model_server.add({"sse": events}, {"text": "whole answer"})
    result = await collect(provider_for("openai", fake_model_server))
    [retry] = [e for e in result if isinstance(e, ApiRetry)]
    assert retry.error.startswith("incomplete response") and reason.replace("\\", "") in retry.error
    assert result[-1].message.text == "whole answer"


async def test_a_real_llama_server_stream_passes_and_the_same_stream_cut_does_not(
    fake_model_server: FakeModelServer,
) -> None:
    recorded = (RECORDED / "stream.sse").read_bytes()
    cut = recorded[: recorded.index(b'data: {"choices":[{"finish_reason":"length"')]
    fake_model_server.add({"raw": recorded}, {"raw": cut})
    events = await collect(provider_for("openai", fake_model_server))
    done = events[-1]
    assert done.message.text == "Hello! How can I assist" and done.stop_reason == "max_tokens"
    with pytest.raises(ProviderError, match="broke off after part of it was shown"):
        await collect(provider_for("openai", fake_model_server))


async def test_openai_answer_cut_after_text_was_shown_is_an_error(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.add(
        {
            "sse": [
                openai_chunk({"role": "assistant", "content": "The answer is "}),
                openai_chunk({"content": "forty"}),
            ]
        }
    )
    with pytest.raises(ProviderError, match="broke off after part of it was shown"):
        await collect(provider_for("openai", fake_model_server))


# ---------------------------------------------------------------------------- limits


@pytest.mark.parametrize("api", APIS)
async def test_tool_arguments_over_the_limit_are_refused(
    api: str, fake_model_server: FakeModelServer
) -> None:
    huge = json.dumps({"file_path": "a", "content": "x" * 3_000})
    fake_model_server.add({"tool_calls": [{"name": "Write", "arguments": huge}]})
    limits = StreamLimits(max_part_chars=2_000)
    with pytest.raises(ProviderError, match="arguments of tool call 'Write' grew past 2,000"):
        await collect(provider_for(api, fake_model_server, limits))
    assert len(fake_model_server.requests) == 1


@pytest.mark.parametrize("api", APIS)
async def test_a_text_block_over_the_limit_is_refused(
    api: str, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add({"text": "word " * 1_000})
    with pytest.raises(ProviderError, match="grew past 2,000 characters"):
        await collect(provider_for(api, fake_model_server, StreamLimits(max_part_chars=2_000)))


async def test_within_the_limits_nothing_changes(fake_model_server: FakeModelServer) -> None:
    fake_model_server.add({"text": "word " * 300})
    events = await collect(provider_for("openai", fake_model_server))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "word " * 300
    assert isinstance(events[-1], ResponseDone)


# ---------------------------------------------------------------------------- prompt too long


LLAMA_CPP_TOO_LONG = json.loads((RECORDED / "too_long.json").read_text())
OPENAI_TOO_LONG = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your "
        "messages resulted in 130512 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
VLLM_MAX_TOKENS_TOO_LARGE = {
    "object": "error",
    "message": "'max_tokens' or 'max_completion_tokens' is too large: 16384. This model's "
    "maximum context length is 8192 tokens and your request has 120 input tokens "
    "(16384 > 8192 - 120).",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}


@pytest.mark.parametrize(
    ("api", "step", "tokens", "limit"),
    [
        (
            "anthropic",
            {"status": 400, "message": "prompt is too long: 215003 tokens > 200000 maximum"},
            215_003,
            200_000,
        ),
        ("openai", {"status": 400, "body": OPENAI_TOO_LONG}, 130_512, 128_000),
        ("openai", {"status": 400, "body": LLAMA_CPP_TOO_LONG}, 9_030, 8_192),
    ],
)
async def test_prompt_too_long_is_its_own_error(
    fake_model_server: FakeModelServer, api: str, step: dict[str, Any], tokens: int, limit: int
) -> None:
    fake_model_server.add(step)
    provider = provider_for(api, fake_model_server)
    with pytest.raises(PromptTooLong) as caught:
        await collect(provider)
    assert (caught.value.tokens, caught.value.limit) == (tokens, limit)
    assert provider.context_window("m") == limit  # what the server said is the window now
    assert "no longer fits the model's context window" in str(caught.value)
    assert len(fake_model_server.requests) == 1


async def test_a_max_tokens_complaint_is_not_prompt_too_long(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.add({"status": 400, "body": VLLM_MAX_TOKENS_TOO_LARGE})
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for("openai", fake_model_server))
    assert not isinstance(caught.value, PromptTooLong)
    assert "is too large: 16384" in str(caught.value)


@pytest.mark.parametrize(
    ("message", "error_type", "code", "expected"),
    [
        ("input length and `max_tokens` exceed context limit: 197000 + 16384 > 200000, "
         "decrease input length or `max_tokens` and try again", None, None, (197_000, 200_000)),
        ("This model's maximum context length is 4096 tokens. However, you requested 4202 "
         "tokens (4102 in the messages, 100 in the completion).", None, None, (4_202, 4_096)),
        ("This endpoint's maximum context length is 32768 tokens. However, you requested "
         "about 40000 tokens (39000 of text input).", None, None, (40_000, 32_768)),
        ("Your input exceeds the context window of this model.", None, "context_length_exceeded",
         (None, None)),
        ("rate limited", "rate_limit_error", None, None),
    ],
)  # fmt: skip
def test_prompt_too_long_messages(
    message: str, error_type: str | None, code: str | None, expected: Any
) -> None:
    assert prompt_too_long(message, error_type=error_type, code=code) == expected
