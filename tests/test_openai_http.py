"""The Chat Completions transport (caliban.providers.openai_http) item by item: what the
``openai`` SDK did for us on this path — URL, key and account headers, error bodies of the
servers people run, errors inside the stream, [DONE] — against the fake server; and one run
of the real SDK against the same fake server, so the fake keeps speaking the wire."""

from __future__ import annotations

from typing import Any

import pytest
from fake_model_server import FakeModelServer
from hang import hang_guard

from caliban.messages import Message
from caliban.providers.base import ApiRetry, ProviderError, ProviderRequest, ResponseDone
from caliban.providers.openai import OpenAIProvider
from caliban.providers.openai_http import account_headers, chat_url
from caliban.providers.retry import RetryPolicy

pytestmark = pytest.mark.anyio

REQUEST = ProviderRequest(model="m", system="", messages=(Message.user("hi"),), tools=())


def provider_at(url: str | None) -> OpenAIProvider:
    return OpenAIProvider(api_key="sk-o", base_url=url, retry=RetryPolicy(base_delay=0.0))


async def collect(provider: OpenAIProvider, turns: int = 1) -> list[Any]:
    try:
        with hang_guard():  # a hang guard, not a speed test
            return [event for _ in range(turns) async for event in provider.stream(REQUEST)]
    finally:
        await provider.aclose()


@pytest.mark.parametrize(
    ("base", "url"),
    [
        (None, "https://api.openai.com/v1/chat/completions"),
        ("http://h:8080/v1", "http://h:8080/v1/chat/completions"),
        ("http://h:8080/v1/", "http://h:8080/v1/chat/completions"),
        ("https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1/chat/completions"),
    ],
)
def test_chat_url(base: str | None, url: str) -> None:
    assert chat_url(base) == url


async def test_headers_key_and_account_from_the_environment(
    fake_model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-1")
    fake_model_server.add({"text": "one"}, {"text": "two"})
    events = await collect(provider_at(fake_model_server.openai_base_url), turns=2)
    assert [e.message.text for e in events if isinstance(e, ResponseDone)] == ["one", "two"]
    first, second = fake_model_server.requests
    assert first.path == "/v1/chat/completions"
    assert first.headers["authorization"] == "Bearer sk-o"
    assert first.headers["openai-organization"] == "org-1"
    assert first.headers["openai-project"] == "proj-1"
    assert first.headers["user-agent"].startswith("caliban/")
    assert second.peer == first.peer  # the body was read past [DONE]: the connection is reused


def test_account_headers_only_when_set() -> None:
    assert account_headers({}) == {}
    assert account_headers({"OPENAI_ORG_ID": "o"}) == {"openai-organization": "o"}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (  # OpenAI, with its request id
            {"error": {"message": "bad model", "type": "invalid_request_error", "code": None}},
            "400 invalid_request_error: bad model (request id req_o)",
        ),
        (  # vLLM: the fields at the top
            {"object": "error", "message": "bad", "type": "BadRequestError", "code": 400},
            "400 BadRequestError: bad",
        ),
        (  # llama.cpp: an int code, the type its own
            {"error": {"code": 400, "message": "nope", "type": "invalid_request_error"}},
            "400 invalid_request_error: nope",
        ),
        ({"detail": "Not allowed"}, "400: Not allowed"),  # a FastAPI server
    ],
)
async def test_error_bodies_of_the_servers_people_run(
    fake_model_server: FakeModelServer, body: dict[str, Any], expected: str
) -> None:
    fake_model_server.add({"status": 400, "body": body, "headers": {"x-request-id": "req_o"}})
    with pytest.raises(ProviderError) as raised:
        await collect(provider_at(fake_model_server.openai_base_url))
    assert expected.replace(" (request id req_o)", "") in str(raised.value)
    assert "request id req_o" in str(raised.value)
    assert len(fake_model_server.requests) == 1


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        ({"message": "server overloaded", "type": "server_error", "code": 503}, True),
        ({"message": "content policy", "type": "invalid_request_error", "code": 400}, False),
        ({"type": "server_error"}, True),  # no message: the SDK's words
    ],
)
async def test_an_error_chunk_inside_the_stream(
    fake_model_server: FakeModelServer, error: dict[str, Any], retried: bool
) -> None:
    fake_model_server.add({"sse": [{"error": error}]}, {"text": "again"})
    provider = provider_at(fake_model_server.openai_base_url)
    if not retried:
        with pytest.raises(ProviderError, match="content policy"):
            await collect(provider)
        return
    events = await collect(provider)
    [retry] = [e for e in events if isinstance(e, ApiRetry)]
    assert (error.get("message") or "An error occurred during streaming") in retry.error
    assert events[-1].message.text == "again"


@pytest.mark.slow  # imports the openai SDK: a second or more of CPU
async def test_the_real_sdk_reads_the_fake_servers_stream(
    fake_model_server: FakeModelServer,
) -> None:
    """The fake server speaks the wire the SDK expects (the SDK is a test dependency only),
    and caliban posts where the SDK posts."""
    import openai

    step = {"text": "Reading.", "tool_calls": [{"id": "c1", "name": "Read", "arguments": {}}]}
    fake_model_server.add(step, step)
    client = openai.AsyncOpenAI(
        api_key="sk-o", base_url=fake_model_server.openai_base_url, max_retries=0
    )
    try:
        with hang_guard():
            stream = await client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [chunk async for chunk in stream]
    finally:
        await client.close()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [c.choices[0].delta.tool_calls for c in chunks if c.choices]
    assert text == "Reading." and any(calls) and chunks[-1].usage is not None
    await collect(provider_at(fake_model_server.openai_base_url))
    sdk, ours = fake_model_server.requests
    assert ours.path == sdk.path
    for header in ("authorization", "content-type", "accept"):
        assert ours.headers[header] == sdk.headers[header], header
