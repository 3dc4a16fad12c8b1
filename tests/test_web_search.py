"""WebSearch: Anthropic's server-side ``web_search`` tool, offered only by the Anthropic
provider, its blocks carried through history unchanged; through the real ``anthropic`` SDK
against the fake server (and the real executable)."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fake_model_server import FakeModelServer
from hang import hang_guard
from rich.console import Console
from test_headless_e2e import lines, run

from caliban.agent import Agent
from caliban.config.settings import Settings
from caliban.events import AgentEvent, AssistantMessage
from caliban.messages import Message, ServerToolPart, TextPart, Usage
from caliban.permissions.policy import PermissionPolicy
from caliban.permissions.rules import PermissionRules
from caliban.providers.anthropic import AnthropicProvider
from caliban.providers.base import ProviderRequest, ResponseDone
from caliban.providers.retry import RetryPolicy
from caliban.providers.scripted import ScriptedProvider
from caliban.repl.render import Renderer
from caliban.session.context import message_tokens
from caliban.session.serialize import message_from_json, message_to_json
from caliban.session.session import Session
from caliban.subagents import AgentDefinition
from caliban.tools.base import ToolEnv
from caliban.toolsets.tool_list import ToolList

pytestmark = pytest.mark.anyio

SEARCH = {
    "query": "caliban release date",
    "results": [
        {"title": "Caliban 1.0", "url": "https://example.com/release"},
        {"title": "News", "url": "https://example.org/news"},
    ],
}
WEB_SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}


@pytest.fixture
async def provider(fake_model_server: FakeModelServer) -> AsyncIterator[AnthropicProvider]:
    made = AnthropicProvider(
        api_key="sk-test", base_url=fake_model_server.url, retry=RetryPolicy(base_delay=0)
    )
    yield made
    await made.aclose()


async def ask(provider: AnthropicProvider, *messages: Message, search: bool) -> ResponseDone:
    request = ProviderRequest(
        model="claude-test", system="s", messages=messages, tools=(), web_search=search
    )
    with hang_guard():
        events = [event async for event in provider.stream(request)]
    assert isinstance(events[-1], ResponseDone)
    return events[-1]


async def test_the_server_tool_is_offered_and_its_blocks_come_back_whole(
    provider: AnthropicProvider, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add(
        {"web_search": SEARCH, "text": "It came out in 2026."}, {"text": "You are welcome."}
    )
    question = Message.user("When was caliban released?")
    done = await ask(provider, question, search=True)
    assert fake_model_server.requests[0].body["tools"] == [WEB_SEARCH_TOOL]
    use, found, answer = done.message.parts
    assert isinstance(use, ServerToolPart) and isinstance(found, ServerToolPart)
    assert use.kind == "server_tool_use" and use.block["input"] == {"query": SEARCH["query"]}
    assert found.kind == "web_search_tool_result"
    assert found.block["content"][0]["encrypted_content"] == "fake-encrypted-0"
    assert answer == TextPart(text="It came out in 2026.")
    assert done.stop_reason == "end_turn"

    await ask(provider, question, done.message, Message.user("Thanks!"), search=True)
    sent = fake_model_server.requests[1].body["messages"][1]["content"]
    assert [block["type"] for block in sent] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    assert sent[0] == {
        "type": "server_tool_use",
        "id": use.block["id"],
        "name": "web_search",
        "input": {"query": SEARCH["query"]},
    }
    assert sent[1]["content"] == found.block["content"]  # encrypted content unchanged


async def test_no_server_tool_unless_asked(
    provider: AnthropicProvider, fake_model_server: FakeModelServer
) -> None:
    fake_model_server.add({"text": "plain"})
    await ask(provider, Message.user("hi"), search=False)
    assert "tools" not in fake_model_server.requests[0].body


async def test_a_paused_turn_is_resumed_with_the_history_as_it_is(
    provider: AnthropicProvider, fake_model_server: FakeModelServer, tmp_path: Path
) -> None:
    fake_model_server.add(
        {"web_search": SEARCH, "text": "", "stop_reason": "pause_turn"},
        {"text": "Found it: 2026."},
    )
    agent = Agent(
        provider=provider,
        model="claude-test",
        system_prompt="s",
        toolset=ToolList([]),
        env=ToolEnv(cwd=tmp_path, project_root=tmp_path),
        web_search=True,
    )
    result = await agent.run("search it")
    assert result.text == "Found it: 2026." and result.num_turns == 2
    resumed = fake_model_server.requests[1].body["messages"]
    assert resumed[-1]["role"] == "assistant"  # sent back unchanged, nothing appended
    assert [b["type"] for b in resumed[-1]["content"]] == [
        "server_tool_use",
        "web_search_tool_result",
    ]


def test_server_tool_parts_survive_the_transcript_and_count_in_context() -> None:
    part = ServerToolPart(block={"type": "web_search_tool_result", "tool_use_id": "s1"})
    message = Message(role="assistant", parts=(part, TextPart(text="ok")))
    assert message_from_json(message_to_json(message)) == message
    assert message_tokens(message) > 1


def session(provider_name: str, tmp_path: Path, deny: list[str] = ()) -> Session:  # type: ignore[assignment]
    provider = ScriptedProvider([])
    provider.name = provider_name  # type: ignore[misc]
    return Session(
        settings=Settings(),
        provider=provider,
        model="m",
        system_prompt="s",
        env=ToolEnv(cwd=tmp_path, project_root=tmp_path),
        builtins=[],
        permissions=PermissionPolicy(project_root=tmp_path, rules=PermissionRules.parse(deny=deny)),
    )


def test_offered_only_by_anthropic_and_not_when_denied(tmp_path: Path) -> None:
    assert session("anthropic", tmp_path).agent().web_search
    assert not session("openai", tmp_path).agent().web_search
    assert not session("anthropic", tmp_path, deny=["WebSearch"]).agent().web_search
    narrow = AgentDefinition(name="x", description="x", system_prompt="x", tools=("Read",))
    wide = AgentDefinition(name="y", description="y", system_prompt="y")
    assert not session("anthropic", tmp_path).offers_web_search(narrow)
    assert session("anthropic", tmp_path).offers_web_search(wide)


def test_the_repl_shows_the_search_and_its_result_count() -> None:
    out = io.StringIO()
    renderer = Renderer(Console(file=out, width=100, force_terminal=False, color_system=None))
    use = ServerToolPart(
        block={"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "q"}}
    )
    found = ServerToolPart(
        block={"type": "web_search_tool_result", "tool_use_id": "s1", "content": [{}, {}, {}]}
    )
    message = Message(role="assistant", parts=(use, found, TextPart(text="Answer.")))
    event: AgentEvent = AssistantMessage(message=message, usage=Usage(), model="m")
    renderer(event)
    shown = [line.rstrip() for line in out.getvalue().splitlines() if line.strip()]
    assert shown == ["● Web Search(q)", "  ⎿  3 results"]


@pytest.mark.slow
def test_websearch_end_to_end(fake_model_server: FakeModelServer, project: Path) -> None:
    fake_model_server.add({"web_search": SEARCH, "text": "Released in 2026."})
    done = run(
        fake_model_server,
        "anthropic",
        project,
        "--output-format",
        "stream-json",
        "--verbose",
        "when?",
    )
    assert done.returncode == 0, done.stderr
    objs = lines(done.stdout)
    assert "WebSearch" in objs[0]["tools"] and objs[-1]["result"] == "Released in 2026."
    [request] = fake_model_server.requests
    assert WEB_SEARCH_TOOL in request.body["tools"]
    blocks = [b["type"] for o in objs if o["type"] == "assistant" for b in o["message"]["content"]]
    assert blocks == ["server_tool_use", "web_search_tool_result", "text"]
    assert json.dumps(request.body).count("web_search_20250305") == 1

    fake_model_server.add({"text": "no search here"})
    assert run(fake_model_server, "openai", project, "x").returncode == 0
    assert "web_search" not in json.dumps(fake_model_server.requests[1].body["tools"])
