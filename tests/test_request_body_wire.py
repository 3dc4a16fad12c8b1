"""A long session's request through the real HTTP path: the bytes the fake server receives
are the ones a fresh encoder writes, sent in their chunks with a ``Content-Length`` (not a
chunked upload, which some OpenAI-compatible servers reject), and a retried request sends
the same bytes again."""

from __future__ import annotations

import pytest
from fake_model_server import FakeModelServer
from hang import hang_guard
from test_wire_encoding import long_turns, request

from caliban.providers import anthropic, openai
from caliban.providers.base import ApiRetry
from caliban.providers.retry import RetryPolicy

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("api", ["anthropic", "openai"])
async def test_a_retried_long_request_sends_the_same_bytes_with_their_length(
    api: str, fake_model_server: FakeModelServer
) -> None:
    retry = RetryPolicy(base_delay=0)
    provider = (
        anthropic.AnthropicProvider(api_key="k", base_url=fake_model_server.url, retry=retry)
        if api == "anthropic"
        else openai.OpenAIProvider(
            api_key="k", base_url=fake_model_server.openai_base_url, retry=retry
        )
    )
    history = long_turns(200)  # as at 300: a merged kept chunk, a kept one, the unkept rest
    fake_model_server.add({"text": "one"}, {"status": 500, "retry_after": 0}, {"text": "two"})
    try:
        with hang_guard():
            async for _ in provider.stream(request(history[:-2])):  # kept chunks made
                pass
            events = [event async for event in provider.stream(request(history))]
    finally:
        await provider.aclose()
    assert any(isinstance(event, ApiRetry) for event in events)
    fresh = (
        anthropic.RequestEncoder().body(request(history))
        if api == "anthropic"
        else openai.RequestEncoder().encode(request(history), token_limit_key="max_tokens").body
    )
    assert len(fresh.chunks) > 3  # kept chunks of the history among them
    failed, retried = fake_model_server.requests[1:]
    expected = bytes(fresh).decode()
    for sent in (failed, retried):
        assert sent.text == expected
        assert sent.headers["content-length"] == str(fresh.size)
        assert "transfer-encoding" not in sent.headers
