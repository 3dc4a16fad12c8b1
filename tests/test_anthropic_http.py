"""The Messages API transport (caliban.providers.anthropic_http, .sse) item by item: what the
``anthropic`` SDK did for us on this path — URL joining, credentials, headers, error bodies,
events in the stream, retry hints, proxies, connection reuse — against the fake server; and
one run of the real SDK against the same fake server, so the fake keeps speaking the wire."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from fake_model_server import FakeModelServer
from hang import hang_guard

from caliban.config.settings import Settings
from caliban.messages import Message
from caliban.providers.anthropic import AnthropicProvider
from caliban.providers.anthropic_http import API_VERSION, custom_headers, messages_url
from caliban.providers.base import ApiRetry, ProviderError, ProviderRequest, ResponseDone
from caliban.providers.guard import StreamLimits
from caliban.providers.retry import RetryPolicy, StreamRejected
from caliban.providers.select import create_provider, resolve_provider
from caliban.providers.sse import ServerSentEvent, SSEDecoder, server_sent_events

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(base_delay=0.0)
REQUEST = ProviderRequest(model="m", system="", messages=(Message.user("hi"),), tools=())


async def collect(provider: AnthropicProvider) -> list[Any]:
    try:
        with hang_guard():  # a hang guard, not a speed test
            return [event async for event in provider.stream(REQUEST)]
    finally:
        await provider.aclose()


def provider_at(url: str, **options: Any) -> AnthropicProvider:
    return AnthropicProvider(api_key="k", base_url=url, retry=FAST, **options)


# ---------------------------------------------------------------------------- SSE


def decode(*chunks: str) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)]


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_sse_every_line_ending(end: str) -> None:
    stream = f"event: a{end}data: 1{end}{end}data: 2{end}{end}"
    assert decode(stream) == [
        ServerSentEvent(event="a", data="1"),
        ServerSentEvent(event="message", data="2"),
    ]


def test_sse_crlf_cut_between_chunks_is_one_line_end() -> None:
    # Read as CR then LF, the cut would make an extra blank line and split nothing here,
    # but "data: a\r" + "\ndata: b\r\n\r\n" must give one event with two data lines.
    assert decode("data: a\r", "\ndata: b\r\n\r\n") == [ServerSentEvent(data="a\nb")]


def test_sse_one_character_at_a_time() -> None:
    stream = 'event: x\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
    assert decode(*stream) == [ServerSentEvent(event="x", data='{"a":\n1}')]


def test_sse_fields_as_the_spec_reads_them() -> None:
    stream = (
        "\ufeff: a comment\n"  # a byte-order mark first, then a comment
        "data:no space\n"
        "data:  two spaces\n"  # only one space is taken off
        "data\n"  # a field name alone: an empty value
        "retry: 10\n"
        "id: 7\n"
        "unknown: field\n"
        "\n"
        "event: empty\n"  # an event without data is not dispatched
        "\n"
        "id: bad\0id\n"  # an id with NUL is ignored
        "data: last\n"
        "\n"
        "data: cut off\n"  # the stream ends inside an event: dropped
    )
    assert decode(stream) == [
        ServerSentEvent(data="no space\n two spaces\n", id="7"),
        ServerSentEvent(data="last", id="7"),
    ]


async def test_sse_bytes_are_checked_before_decoding() -> None:
    async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
        for part in parts:
            yield part

    text = "café 東京".encode()
    split = [text[i : i + 1] for i in range(len(text))]
    events = [e async for e in server_sent_events(chunks(b"data: ", *split, b"\n\n"))]
    assert events == [ServerSentEvent(data="café 東京")]
    with pytest.raises(StreamRejected, match="not valid UTF-8"):
        [e async for e in server_sent_events(chunks(b"data: caf\xe9\n\n"))]
    limits = StreamLimits(max_event_bytes=100)
    with pytest.raises(StreamRejected, match="one server-sent event grew past 100 bytes"):
        [e async for e in server_sent_events(chunks(b"data: " + b"x" * 200), limits=limits)]


# ---------------------------------------------------------------------------- URL, headers


@pytest.mark.parametrize(
    ("base", "url"),
    [
        (None, "https://api.anthropic.com/v1/messages"),
        ("http://h:8", "http://h:8/v1/messages"),
        ("http://h:8/", "http://h:8/v1/messages"),
        ("http://h:8/v1", "http://h:8/v1/messages"),
        ("http://h:8/v1/", "http://h:8/v1/messages"),
        ("https://openrouter.ai/api", "https://openrouter.ai/api/v1/messages"),
        ("https://gw.example/team/anthropic", "https://gw.example/team/anthropic/v1/messages"),
    ],
)
def test_messages_url_with_and_without_v1(base: str | None, url: str) -> None:
    assert messages_url(base) == url


async def test_a_base_url_ending_in_v1_reaches_v1_messages(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.add({"text": "ok"})
    await collect(provider_at(fake_model_server.url + "/v1/"))
    assert [r.path for r in fake_model_server.requests] == ["/v1/messages"]


def test_custom_headers_lines() -> None:
    value = "X-Team: a: b\nbroken line\n  anthropic-beta : x-1 \n\n: no name"
    assert custom_headers(value) == {"X-Team": "a: b", "anthropic-beta": "x-1"}
    assert custom_headers(None) == {}


@pytest.mark.parametrize(
    ("environ", "sent", "absent"),
    [
        ({"ANTHROPIC_API_KEY": "sk-1"}, {"x-api-key": "sk-1"}, "authorization"),
        ({"ANTHROPIC_AUTH_TOKEN": "tok"}, {"authorization": "Bearer tok"}, "x-api-key"),
        (  # both: the key wins, as in the SDK; the token is not sent beside it
            {"ANTHROPIC_API_KEY": "sk-1", "ANTHROPIC_AUTH_TOKEN": "tok"},
            {"x-api-key": "sk-1"},
            "authorization",
        ),
        ({}, {"x-api-key": "not-needed"}, "authorization"),  # a local server, no key
        (
            {"ANTHROPIC_API_KEY": "sk-1", "ANTHROPIC_CUSTOM_HEADERS": "X-Team: t\nX-Other: o"},
            {"x-api-key": "sk-1", "x-team": "t", "x-other": "o"},
            "authorization",
        ),
    ],
)
async def test_credentials_and_custom_headers_from_the_environment(
    fake_model_server: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
    environ: dict[str, str],
    sent: dict[str, str],
    absent: str,
) -> None:
    # Keys come from the environ given; the provider reads its extra headers from os.environ.
    monkeypatch.delenv("ANTHROPIC_CUSTOM_HEADERS", raising=False)
    if "ANTHROPIC_CUSTOM_HEADERS" in environ:
        monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", environ["ANTHROPIC_CUSTOM_HEADERS"])
    fake_model_server.add({"text": "ok"})
    choice = resolve_provider(
        Settings(provider="anthropic"),
        provider=None,
        model="m",
        environ={**environ, "ANTHROPIC_BASE_URL": fake_model_server.url},
    )
    provider = create_provider(choice, retry=FAST)
    assert isinstance(provider, AnthropicProvider)
    await collect(provider)
    headers = fake_model_server.requests[0].headers
    assert {name: headers.get(name) for name in sent} == sent
    assert absent not in headers and headers["anthropic-version"] == API_VERSION


async def test_a_rejected_auth_token_names_its_variable(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.add({"status": 401, "message": "bad token"})
    choice = resolve_provider(
        Settings(provider="anthropic"),
        provider=None,
        model="m",
        environ={"ANTHROPIC_AUTH_TOKEN": "tok", "ANTHROPIC_BASE_URL": fake_model_server.url},
    )
    provider = create_provider(choice, retry=FAST)
    assert isinstance(provider, AnthropicProvider)
    with pytest.raises(ProviderError, match="set ANTHROPIC_AUTH_TOKEN") as raised:
        await collect(provider)
    assert "bad token" in str(raised.value) and raised.value.status == 401


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (  # the API's error body, with its request id
            {"status": 400, "message": "max_tokens: too big", "headers": {"request-id": "req_9"}},
            "400 invalid_request_error: max_tokens: too big (request id req_9)",
        ),
        (  # the request id in the body, where newer API errors also carry it
            {
                "status": 404,
                "body": {
                    "type": "error",
                    "error": {"type": "not_found_error", "message": "model: m"},
                    "request_id": "req_b",
                },
            },
            "404 not_found_error: model: m (request id req_b)",
        ),
        (  # an OpenAI-shaped body from a compatible server
            {"status": 422, "body": {"error": {"message": "bad field", "type": "invalid"}}},
            "422 invalid: bad field",
        ),
        ({"status": 422, "body": {"detail": "missing model"}}, "422: missing model"),
        (  # a proxy's page: its text, on one line
            {"status": 418, "body_text": "<html>\n<b>teapot</b>\n</html>"},
            "418: <html> <b>teapot</b> </html>",
        ),
        (  # a redirect is reported, not followed with the key
            {"status": 307, "headers": {"location": "http://elsewhere.example/v1/messages"}},
            "307: the server redirected to http://elsewhere.example/v1/messages",
        ),
    ],
)
async def test_error_bodies_become_one_line_errors(
    fake_model_server: FakeModelServer, step: dict[str, Any], expected: str
) -> None:
    fake_model_server.add(step)
    with pytest.raises(ProviderError) as raised:
        await collect(provider_at(fake_model_server.url))
    assert expected in str(raised.value) and "\n" not in str(raised.value)
    assert len(fake_model_server.requests) == 1  # none of these is retried


async def test_a_long_error_page_is_read_only_in_part(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.add({"status": 400, "body_text": "x" * 5_000_000})
    with pytest.raises(ProviderError, match=r"400: x+…") as raised:
        await collect(provider_at(fake_model_server.url))
    assert len(str(raised.value)) < 400


@pytest.mark.parametrize(
    ("first", "retried"),
    [
        ({"status": 529, "error_type": "overloaded_error"}, True),
        ({"status": 500, "headers": {"x-should-retry": "false"}}, False),
        ({"status": 400, "headers": {"x-should-retry": "true"}}, True),
        ({"status": 429, "retry_after": 0, "headers": {"x-should-retry": "true"}}, True),
    ],
)
async def test_overloaded_and_x_should_retry(
    fake_model_server: FakeModelServer, first: dict[str, Any], retried: bool
) -> None:
    fake_model_server.add(first, {"text": "second try"})
    provider = provider_at(fake_model_server.url)
    if not retried:
        with pytest.raises(ProviderError):
            await collect(provider)
        assert len(fake_model_server.requests) == 1
        return
    events = await collect(provider)
    assert [type(e) for e in events if isinstance(e, ApiRetry)] == [ApiRetry]
    assert events[-1].message.text == "second try"


# ---------------------------------------------------------------------------- the stream


def event_line(payload: Mapping[str, Any], name: str | None = None) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(payload)}\n\n"


TEXT_REPLY = [
    {"type": "message_start", "message": {"usage": {"input_tokens": 2, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hey"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
    {"type": "message_stop"},
]


async def test_pings_comments_unknown_events_and_unnamed_events_pass(
    fake_model_server: FakeModelServer,
) -> None:
    raw = ": keep-alive\r\n\r\n" + event_line({"type": "ping"}, "ping")
    raw += event_line(TEXT_REPLY[0], "message_start")
    raw += event_line({"type": "future_event", "x": 1}, "future_event")
    raw += "".join(event_line(event) for event in TEXT_REPLY[1:])  # no event: lines
    fake_model_server.add({"raw": raw.encode()})
    events = await collect(provider_at(fake_model_server.url))
    assert isinstance(done := events[-1], ResponseDone) and done.message.text == "hey"
    assert done.usage.output_tokens == 3


@pytest.mark.parametrize(
    ("error_type", "retried"), [("overloaded_error", True), ("invalid_request_error", False)]
)
async def test_an_error_event_mid_stream(
    fake_model_server: FakeModelServer, error_type: str, retried: bool
) -> None:
    error = {"type": "error", "error": {"type": error_type, "message": "mid-stream"}}
    fake_model_server.add({"sse": [TEXT_REPLY[0], {"type": "ping"}, error]}, {"text": "again"})
    provider = provider_at(fake_model_server.url)
    if retried:
        events = await collect(provider)
        [retry] = [e for e in events if isinstance(e, ApiRetry)]
        assert retry.status == 529 and "mid-stream" in retry.error
        assert events[-1].message.text == "again"
    else:
        with pytest.raises(ProviderError, match=f"{error_type}: mid-stream"):
            await collect(provider)


async def test_an_error_event_after_text_was_shown_is_an_error_not_a_retry(
    fake_model_server: FakeModelServer,
) -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    fake_model_server.add({"sse": [*TEXT_REPLY[:3], error]})
    with pytest.raises(ProviderError, match="broke off after part of it was shown"):
        await collect(provider_at(fake_model_server.url))
    assert len(fake_model_server.requests) == 1


# ---------------------------------------------------------------------------- connections


async def test_requests_reuse_one_connection(fake_model_server: FakeModelServer) -> None:
    fake_model_server.add({"text": "one"}, {"text": "two"})
    provider = provider_at(fake_model_server.url)
    try:
        for _ in range(2):
            with hang_guard():
                [event async for event in provider.stream(REQUEST)]
    finally:
        await provider.aclose()
    first, second = fake_model_server.requests
    assert first.peer == second.peer


async def test_a_proxy_from_the_environment_carries_the_request(
    fake_model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fake server stands in for the proxy: it gets the absolute URL a proxy is sent.
    monkeypatch.setenv("HTTP_PROXY", fake_model_server.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    fake_model_server.add({"text": "through the proxy"})
    events = await collect(provider_at("http://model.invalid:8080"))
    assert events[-1].message.text == "through the proxy"
    assert fake_model_server.requests[0].path == "http://model.invalid:8080/v1/messages"


async def test_no_proxy_from_the_environment_goes_direct(
    fake_model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    fake_model_server.add({"text": "direct"})
    events = await collect(provider_at(fake_model_server.url))
    assert events[-1].message.text == "direct"
    assert fake_model_server.requests[0].path == "/v1/messages"


# ---------------------------------------------------------------------------- the real SDK


@pytest.mark.slow  # imports the anthropic SDK: seconds of CPU
async def test_the_real_sdk_reads_the_fake_servers_stream(
    fake_model_server: FakeModelServer,
) -> None:
    """The fake server speaks the wire the SDK expects (the SDK is a test dependency only),
    and caliban sends what the SDK sends where it matters: path, version, body."""
    import anthropic

    step = {
        "thinking": "Let me see.",
        "text": "Reading.",
        "tool_calls": [{"id": "toolu_1", "name": "Read", "arguments": {"path": "a"}}],
    }
    fake_model_server.add(step, step)
    client = anthropic.AsyncAnthropic(api_key="k", base_url=fake_model_server.url, max_retries=0)
    try:
        with hang_guard():
            async with client.messages.stream(
                model="m", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
            ) as stream:
                final = await stream.get_final_message()
    finally:
        await client.close()
    assert [block.type for block in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[2].input == {"path": "a"} and final.stop_reason == "tool_use"
    await collect(provider_at(fake_model_server.url))
    sdk, ours = fake_model_server.requests
    assert ours.path == sdk.path
    for header in ("anthropic-version", "content-type", "accept"):
        assert ours.headers[header] == sdk.headers[header], header
    assert ours.body["stream"] is sdk.body["stream"] is True


@pytest.mark.parametrize("url", ["127.0.0.1:8080", "http://localhost:port"])
async def test_a_base_url_httpx2_cannot_use_is_one_clear_error(url: str) -> None:
    with pytest.raises(ProviderError, match="bad base URL"):
        await collect(provider_at(url))
