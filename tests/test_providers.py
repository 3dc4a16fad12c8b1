"""Both real providers, through their real SDKs, against the fake model server."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import UNEXPECTED, FakeModelServer
from hang import HANG_S, hang_guard
from pydantic import BaseModel

from caliban.agent import Agent
from caliban.events import AgentEvent, ApiRetryEvent
from caliban.messages import INVALID_ARGUMENTS_KEY, Message, ToolResult, ToolSpec
from caliban.providers.anthropic import AnthropicProvider
from caliban.providers.base import (
    ApiRetry,
    ProviderError,
    ProviderEvent,
    ProviderRequest,
    ResponseDone,
    TextDelta,
    ToolCallStarted,
)
from caliban.providers.openai import OpenAIProvider
from caliban.providers.retry import RetryPolicy
from caliban.tools.base import BuiltinTool, CallContext, ToolEnv, ToolOutput
from caliban.toolsets.tool_list import ToolList

pytestmark = pytest.mark.anyio

APIS = ["anthropic", "openai"]
FAST = RetryPolicy(base_delay=0.0)
ECHO_SPEC = ToolSpec(
    name="Echo",
    description="Echo the text back.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
)

Provider = AnthropicProvider | OpenAIProvider
MakeProvider = Callable[..., Provider]


def new_provider(
    api: str,
    server: FakeModelServer,
    *,
    retry: RetryPolicy = FAST,
    key_env: str | None = None,
    base_url: str | None = None,
) -> Provider:
    url = base_url or server.base_url(api)
    if api == "anthropic":
        return AnthropicProvider(
            api_key="test-key", base_url=url, retry=retry, key_env=key_env or "ANTHROPIC_API_KEY"
        )
    return OpenAIProvider(
        api_key="test-key", base_url=url, retry=retry, key_env=key_env or "OPENAI_API_KEY"
    )


@pytest.fixture
async def make_provider() -> AsyncIterator[MakeProvider]:
    """``new_provider``, closing every provider made when the test ends."""
    made: list[Provider] = []

    def make(*args: Any, **kwargs: Any) -> Provider:
        made.append(new_provider(*args, **kwargs))
        return made[-1]

    yield make
    for provider in made:
        await provider.aclose()


def request(*messages: Message, tools: Sequence[ToolSpec] = (ECHO_SPEC,)) -> ProviderRequest:
    return ProviderRequest(
        model="test-model",
        system="You are a test.",
        messages=messages or (Message.user("hi"),),
        tools=tuple(tools),
    )


async def collect(provider: Provider, req: ProviderRequest | None = None) -> list[ProviderEvent]:
    # A hang guard, not a speed test: the first request imports the SDK, which takes tens of
    # seconds on a loaded machine.
    with hang_guard():
        return [event async for event in provider.stream(req or request())]


def done(events: list[ProviderEvent]) -> ResponseDone:
    assert isinstance(events[-1], ResponseDone), events
    return events[-1]


@pytest.fixture(params=APIS)
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_text_reply_streams_deltas_then_the_message(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    fake_model_server.add({"text": "Hello there, this reply arrives in pieces."})
    events = await collect(make_provider(api, fake_model_server))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1 and "".join(deltas) == "Hello there, this reply arrives in pieces."
    final = done(events)
    assert final.message.text == "Hello there, this reply arrives in pieces."
    assert final.stop_reason == "end_turn" and not final.message.tool_calls
    assert final.usage.input_tokens == 10 and final.usage.output_tokens == 5


async def test_one_tool_call(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    fake_model_server.add(
        {"tool_calls": [{"name": "Echo", "id": "c1", "arguments": {"text": "a long argument"}}]}
    )
    events = await collect(make_provider(api, fake_model_server))
    assert [e for e in events if isinstance(e, ToolCallStarted)] == [
        ToolCallStarted(id="c1", name="Echo")
    ]
    final = done(events)
    [call] = final.message.tool_calls
    assert (call.id, call.name, dict(call.arguments)) == ("c1", "Echo", {"text": "a long argument"})
    assert final.stop_reason == "tool_use"


async def test_text_and_two_parallel_tool_calls(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    fake_model_server.add(
        {
            "text": "Both at once.",
            "tool_calls": [
                {"name": "Echo", "arguments": {"text": "one"}},
                {"name": "Echo", "arguments": {"text": "two", "n": [1, 2, {"x": None}]}},
            ],
        }
    )
    final = done(await collect(make_provider(api, fake_model_server)))
    assert final.message.text == "Both at once."
    first, second = final.message.tool_calls
    assert first.arguments == {"text": "one"}
    assert second.arguments == {"text": "two", "n": [1, 2, {"x": None}]}
    assert first.id != second.id


async def test_429_is_retried_after_the_servers_retry_after(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    fake_model_server.add({"status": 429, "retry_after": 0, "message": "slow down"}, {"text": "ok"})
    events = await collect(make_provider(api, fake_model_server, retry=RetryPolicy(base_delay=30)))
    [retry] = [e for e in events if isinstance(e, ApiRetry)]
    assert retry.attempt == 2 and retry.max_attempts == 4 and retry.status == 429
    assert retry.delay_s == 0 and "slow down" in retry.error
    assert done(events).message.text == "ok"
    assert len(fake_model_server.requests) == 2


async def test_retry_after_ms_beats_the_backoff(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    fake_model_server.add({"status": 529, "retry_after_ms": 50}, {"text": "ok"})
    events = await collect(make_provider(api, fake_model_server, retry=RetryPolicy(base_delay=30)))
    [retry] = [e for e in events if isinstance(e, ApiRetry)]
    assert retry.delay_s == pytest.approx(0.05)


async def test_401_names_the_key_variable(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    fake_model_server.add({"status": 401, "message": "invalid x-api-key"})
    with pytest.raises(ProviderError) as caught:
        await collect(make_provider(api, fake_model_server, key_env="MY_TEAM_KEY"))
    message = str(caught.value)
    assert message.startswith(
        f"invalid API key for {api}: set MY_TEAM_KEY or providers.{api}.api_key_env"
    )
    assert "invalid x-api-key" in message and "\n" not in message
    assert len(fake_model_server.requests) == 1  # never retried


async def test_5xx_gives_up_after_four_tries(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    fake_model_server.add(*[{"status": 503, "message": "down for maintenance"}] * 4)
    events: list[ProviderEvent] = []
    with (
        pytest.raises(ProviderError, match=r"failed after 4 attempts: 503 .*down for maintenance"),
        hang_guard(),
    ):
        async for event in make_provider(api, fake_model_server).stream(request()):
            events.append(event)
    assert [e.attempt for e in events if isinstance(e, ApiRetry)] == [2, 3, 4]
    assert len(fake_model_server.requests) == 4


async def test_bad_request_is_not_retried(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    fake_model_server.add({"status": 400, "message": "messages: roles must alternate"})
    with pytest.raises(ProviderError, match=f"^{api} API error: 400 .*roles must alternate"):
        await collect(make_provider(api, fake_model_server))
    assert len(fake_model_server.requests) == 1


async def test_unknown_model_hint(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    fake_model_server.add({"status": 404, "message": "model: test-model"})
    with pytest.raises(ProviderError, match="check the model name 'test-model'"):
        await collect(make_provider(api, fake_model_server))


async def test_connection_refused_is_retried_then_reported(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}" + ("/v1" if api == "openai" else "")
    events: list[ProviderEvent] = []
    with (
        pytest.raises(ProviderError, match="failed after 4 attempts: connection error") as info,
        hang_guard(),
    ):
        async for event in make_provider(api, fake_model_server, base_url=url).stream(request()):
            events.append(event)
    assert len([e for e in events if isinstance(e, ApiRetry)]) == 3
    # Says which endpoint and which settings to check.
    variable = "ANTHROPIC_BASE_URL" if api == "anthropic" else "OPENAI_BASE_URL"
    assert f"could not connect to {url}: is the server running?" in str(info.value)
    assert f"providers.{api}.base_url or ${variable}" in str(info.value)


async def test_stream_cut_before_any_content_is_retried(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    fake_model_server.add({"disconnect": True}, {"text": "second try"})
    events = await collect(make_provider(api, fake_model_server))
    [retry] = [e for e in events if isinstance(e, ApiRetry)]
    assert retry.status is None and "connection error" in retry.error
    assert done(events).message.text == "second try"


async def test_in_stream_error_before_content_is_retried(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    fake_model_server.add({"stream_error": "overloaded_error"}, {"text": "recovered"})
    events = await collect(make_provider(api, fake_model_server))
    assert any(isinstance(e, ApiRetry) for e in events)
    assert done(events).message.text == "recovered"


async def test_stream_cut_after_text_is_an_error_not_a_retry(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    fake_model_server.add({"disconnect": True, "text": "The answer is"})
    shown: list[str] = []
    with pytest.raises(ProviderError, match="broke off after part of it was shown"), hang_guard():
        async for event in make_provider(api, fake_model_server).stream(request()):
            if isinstance(event, TextDelta):
                shown.append(event.text)
    assert "".join(shown) == "The answer is"
    assert len(fake_model_server.requests) == 1


async def test_cancelling_a_hung_request_returns_promptly(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    fake_model_server.add({"hang": True, "text": "thinking"}, {"text": "next"})
    provider = make_provider(api, fake_model_server)
    seen = asyncio.Event()

    async def consume() -> None:
        async for event in provider.stream(request()):
            if isinstance(event, TextDelta):
                seen.set()

    task = asyncio.create_task(consume())
    with hang_guard():
        await seen.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert done(await collect(provider)).message.text == "next"


async def test_unexpected_extra_request_fails_loudly(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider
) -> None:
    with pytest.raises(ProviderError, match=UNEXPECTED):
        await collect(make_provider(api, fake_model_server))
    assert len(fake_model_server.unexpected) == 4
    fake_model_server.unexpected.clear()


# ---------------------------------------------------------------------------- the agent loop


class EchoInput(BaseModel):
    text: str


class Echo(BuiltinTool[EchoInput]):
    name = "Echo"
    description = "Echo the text back."
    input_model = EchoInput
    read_only = True

    async def run(self, args: EchoInput, ctx: CallContext) -> ToolOutput:
        return ToolOutput.text(f"echo: {args.text}")


def tool_result_texts(api: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(call id, text) of each tool result in a captured request body."""
    if api == "openai":
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]
    return [
        (block["tool_use_id"], " ".join(c["text"] for c in block.get("content", [])))
        for message in body["messages"]
        for block in message["content"]
        if block["type"] == "tool_result"
    ]


async def test_agent_loop_text_tool_text(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider, tmp_path: Path
) -> None:
    fake_model_server.add(
        {
            "text": "Let me echo.",
            "tool_calls": [{"name": "Echo", "id": "e1", "arguments": {"text": "ping"}}],
        },
        {"text": "It said ping."},
    )
    events: list[AgentEvent] = []
    agent = Agent(
        provider=make_provider(api, fake_model_server),
        model="test-model",
        system_prompt="You are a test.",
        toolset=ToolList([Echo()]),
        env=ToolEnv(cwd=tmp_path, project_root=tmp_path),
        emit=events.append,
    )
    with hang_guard():
        result = await agent.run("echo ping")
    assert result.subtype == "success" and result.text == "It said ping." and result.num_turns == 2
    second = fake_model_server.requests[1].body
    assert tool_result_texts(api, second) == [("e1", "echo: ping")]
    assert result.usage.output_tokens == 10  # both requests counted
    assert [m.role for m in agent.conversation.messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


async def test_invalid_json_arguments_become_an_error_the_model_reads(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider, tmp_path: Path
) -> None:
    fake_model_server.add(
        {"tool_calls": [{"name": "Echo", "id": "bad", "arguments": '{"text": "unterminated'}]},
        {"text": "I will fix my JSON."},
    )
    agent = Agent(
        provider=make_provider(api, fake_model_server),
        model="test-model",
        system_prompt="You are a test.",
        toolset=ToolList([Echo()]),
        env=ToolEnv(cwd=tmp_path, project_root=tmp_path),
    )
    with hang_guard():
        await agent.run("go")
    call = agent.conversation.messages[1].tool_calls[0]
    assert call.arguments == {INVALID_ARGUMENTS_KEY: '{"text": "unterminated'}
    [result] = [p for p in agent.conversation.messages[2].parts if isinstance(p, ToolResult)]
    assert (
        result.is_error
        and "not a valid JSON object" in result.text
        and "unterminated" in result.text
    )
    [(_, text)] = tool_result_texts(api, fake_model_server.requests[1].body)
    assert "not a valid JSON object" in text


async def test_agent_surfaces_retries_as_events(
    api: str, fake_model_server: FakeModelServer, make_provider: MakeProvider, tmp_path: Path
) -> None:
    fake_model_server.add({"status": 429, "retry_after": 0}, {"text": "fine"})
    events: list[AgentEvent] = []
    agent = Agent(
        provider=make_provider(api, fake_model_server),
        model="test-model",
        system_prompt="s",
        toolset=ToolList([]),
        env=ToolEnv(cwd=tmp_path, project_root=tmp_path),
        emit=events.append,
    )
    with hang_guard():
        assert (await agent.run("hi")).text == "fine"
    [retry] = [e for e in events if isinstance(e, ApiRetryEvent)]
    assert retry.status == 429 and retry.attempt == 2


# ---------------------------------------------------------------------------- script mode


@pytest.mark.slow
def test_script_mode_serves_the_script_and_exits_on_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "steps.json"
    script.write_text(json.dumps({"steps": [{"text": "from a script", "repeat": 2}]}))
    log = tmp_path / "requests.jsonl"
    server_py = Path(__file__).with_name("fake_model_server.py")
    process = subprocess.Popen(
        [
            sys.executable,
            str(server_py),
            "--port",
            "0",
            "--script",
            str(script),
            "--requests-log",
            str(log),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        for _ in range(2):
            events = asyncio.run(_collect_plain(url))
            assert done(events).message.text == "from a script"
        assert [json.loads(line)["path"] for line in log.read_text().splitlines()] == [
            "/v1/chat/completions"
        ] * 2
    finally:
        process.terminate()
        assert process.wait(timeout=HANG_S) == 0


async def _collect_plain(url: str) -> list[ProviderEvent]:
    provider = OpenAIProvider(api_key="k", base_url=url + "/v1", retry=FAST)
    try:
        return [event async for event in provider.stream(request())]
    finally:
        await provider.aclose()
