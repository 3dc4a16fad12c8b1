"""Compaction: the summary request, the shorter history, what survives it, and resuming."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import FakeModelServer
from hang import hang_guard
from lazy_fakes import lazy_settings, make_session
from test_headless_e2e import lines, run

from caliban.compaction import (
    MAX_PART_CHARS,
    SUMMARY_HEADER,
    SUMMARY_INSTRUCTIONS,
    CompactionFailed,
    compact,
)
from caliban.config.settings import Settings
from caliban.events import AgentEvent, ConversationCompacted
from caliban.messages import Message, TextPart, ToolResult, Usage
from caliban.providers.base import PromptTooLong, ProviderRequest
from caliban.providers.scripted import Reported, ScriptedProvider, reply, tool_call
from caliban.session.resume import attach_transcript, close_transcript
from caliban.session.store import load_session, transcript_path

pytestmark = pytest.mark.anyio

GL_PIPES = "mcp__gitlab__list_pipelines"
FULL = Usage(input_tokens=120_000, output_tokens=10)  # over 85% of the scripted 128k window


def exchange(n: int, result: str = "ok") -> list[Message]:
    """One prompt, a tool call and its result, and an answer."""
    call = tool_call("Echo", {"text": f"{n}"}, id=f"c{n}")
    return [
        Message.user(f"request {n}"),
        reply(f"working on {n}", call),
        Message(
            role="user", parts=(ToolResult(tool_call_id=call.id, content=(TextPart(text=result),)),)
        ),
        reply(f"done {n}"),
    ]


def request(messages: list[Message]) -> ProviderRequest:
    return ProviderRequest(
        model="m", system="You are a test.", messages=tuple(messages), tools=(), max_tokens=4096
    )


async def test_summary_request_and_the_shorter_history() -> None:
    history = [*exchange(1, "x" * 200_000), *exchange(2), *exchange(3)]
    provider = ScriptedProvider(["<analysis>thinking</analysis><summary>Did 1 and 2.</summary>"])
    result = await compact(
        provider,
        request(history),
        window=2_000,  # keeps about 400 tokens verbatim
        instructions="keep the file names",
        active_tools=[GL_PIPES],
    )
    [asked] = provider.requests
    assert asked.system == "You are a test." and asked.tools == ()
    instruction = asked.messages[-1].text
    assert instruction.startswith(SUMMARY_INSTRUCTIONS)
    assert instruction.endswith("The user asked this summary to: keep the file names")
    assert all(len(part.text) <= MAX_PART_CHARS + 100 for m in asked.messages for part in _texts(m))
    first, *kept = result.messages
    assert first.text.startswith(SUMMARY_HEADER)
    assert "<summary>\nDid 1 and 2.\n</summary>" in first.text
    assert f"still available: {GL_PIPES}" in first.text
    assert kept == history[4:]  # whole exchanges after the oversized one, verbatim
    assert result.summary == "Did 1 and 2." and result.post_tokens < result.pre_tokens


async def test_a_cut_never_leaves_a_tool_result_without_its_call() -> None:
    history = [*exchange(1), *exchange(2)]
    for window in range(50, 1_000, 25):
        provider = ScriptedProvider(["summary"])
        result = await compact(provider, request(history), window=window)
        _summary, *kept = result.messages
        if kept:
            assert not any(isinstance(p, ToolResult) for p in kept[0].parts), window


async def test_the_latest_request_is_carried_over_verbatim_when_it_is_summarised() -> None:
    history = [Message.user("rename parse() to parse_line() everywhere"), *exchange(1)[1:]]
    provider = ScriptedProvider(["summary"])
    result = await compact(provider, request(history), window=10)  # keeps nothing verbatim
    assert result.messages[0].text.endswith(
        "The user's latest request, verbatim:\nrename parse() to parse_line() everywhere"
    )


async def test_nothing_to_compact_and_an_empty_summary_fail_clearly() -> None:
    with pytest.raises(CompactionFailed, match="no conversation"):
        await compact(ScriptedProvider([]), request([]), window=1_000)
    with pytest.raises(CompactionFailed, match="no answer so far"):
        await compact(ScriptedProvider([]), request([Message.user("x" * 900_000)]), window=1_000)
    with pytest.raises(CompactionFailed, match="no summary"):
        await compact(ScriptedProvider(["  "]), request(exchange(1)), window=10)


async def test_auto_compaction_keeps_the_active_mcp_tools_on_the_wire(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            Reported(reply(tool_call("ToolSearch", {"query": f"select:{GL_PIPES}"})), FULL),
            "<summary>The user wants pipelines.</summary>",
            reply(tool_call(GL_PIPES, {"q": "main"})),
            "Here they are.",
        ]
    )
    events: list[AgentEvent] = []
    session = make_session(provider, tmp_path, events=events)
    with hang_guard():
        result = await session.run("list the pipelines")
    assert result.subtype == "success" and result.text == "Here they are."
    summary_request = provider.requests[1]
    assert summary_request.messages[-1].text.startswith(SUMMARY_INSTRUCTIONS)
    assert GL_PIPES in provider.offered[1]  # the same tools: the prompt cache still applies
    after = provider.requests[2]
    assert after.messages[0].text.startswith(SUMMARY_HEADER)
    assert f"still available: {GL_PIPES}" in after.messages[0].text
    assert GL_PIPES in provider.offered[2]  # still active after compaction
    assert "list the pipelines" in after.messages[0].text  # the request, verbatim
    [compacted] = [e for e in events if isinstance(e, ConversationCompacted)]
    assert compacted.trigger == "auto" and compacted.pre_tokens == FULL.context_tokens
    assert session.conversation.messages[: len(compacted.messages)] == list(compacted.messages)


async def test_prompt_too_long_compacts_once_and_retries(tmp_path: Path) -> None:
    def too_long(request: ProviderRequest) -> str:
        raise PromptTooLong("prompt is too long: 210000 tokens > 200000 maximum")

    provider = ScriptedProvider(["first answer", too_long, "<summary>S</summary>", "second"])
    session = make_session(provider, tmp_path, settings=Settings())
    with hang_guard():
        await session.run("one")
        result = await session.run("two")
    assert result.text == "second"
    assert provider.requests[3].messages[0].text.startswith(SUMMARY_HEADER)


async def test_a_second_prompt_too_long_is_an_error_not_a_loop(tmp_path: Path) -> None:
    def too_long(request: ProviderRequest) -> str:
        raise PromptTooLong("prompt is too long")

    provider = ScriptedProvider(["first", too_long, "<summary>S</summary>", too_long])
    session = make_session(provider, tmp_path, settings=Settings())
    with hang_guard():
        await session.run("one")
        with pytest.raises(PromptTooLong):
            await session.run("two")
    assert len(provider.requests) == 4


async def test_auto_compaction_can_be_turned_off(tmp_path: Path) -> None:
    settings = Settings.model_validate({"context": {"auto_compact_at": 0}})
    provider = ScriptedProvider([Reported(reply(tool_call("Echo", {"text": "a"})), FULL), "done"])
    session = make_session(provider, tmp_path, settings=settings)
    with hang_guard():
        await session.run("go")
    assert len(provider.requests) == 2  # no summary request


async def test_manual_compaction_and_resuming_after_the_boundary(tmp_path: Path) -> None:
    long = "A long answer about the build, its stages and their logs. " * 30
    provider = ScriptedProvider([long, long, "<summary>Two answers.</summary>"])
    session = make_session(provider, tmp_path, settings=lazy_settings())
    transcript = attach_transcript(session)
    with hang_guard():
        await session.run("one")
        await session.run("two")
        await session.compact("focus on answers")
    close_transcript(session)
    assert provider.requests[2].messages[-1].text.endswith("focus on answers")
    record = load_session(transcript_path(tmp_path, session.id))
    assert list(record.messages) == session.conversation.messages
    [summary] = record.messages  # the summary replaces the whole history
    assert summary.text.startswith(SUMMARY_HEADER)
    assert record.last_usage is None
    assert transcript.path == transcript_path(tmp_path, session.id)


def _texts(message: Message) -> list[TextPart]:
    out: list[TextPart] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            out.append(part)
        elif isinstance(part, ToolResult):
            out.extend(p for p in part.content if isinstance(p, TextPart))
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("provider", "tokens"),
    [("anthropic", 190_000), ("openai", 395_000)],  # over 85% of the default models' windows
)
def test_headless_compacts_past_the_threshold_and_continue_resumes_after_it(
    fake_model_server: FakeModelServer, provider: str, tokens: int, project: Path
) -> None:
    (project / "notes.txt").write_text("alpha\n")
    fake_model_server.add(
        {
            "tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}],
            "usage": {"input_tokens": tokens},
        },
        {"text": "<summary>The user asked to read notes.txt; it says alpha.</summary>"},
        {"text": "It says alpha."},
    )
    first = run(
        fake_model_server,
        provider,
        project,
        "read notes.txt",
        "--output-format",
        "stream-json",
        "--verbose",
    )
    assert first.returncode == 0, first.stderr
    frames = lines(first.stdout)
    [boundary] = [f for f in frames if f.get("subtype") == "compact_boundary"]
    assert boundary["compact_metadata"]["trigger"] == "auto"
    assert boundary["compact_metadata"]["pre_tokens"] == tokens
    assert frames[-1]["result"] == "It says alpha."
    summary_request, after = fake_model_server.requests[1], fake_model_server.requests[2]
    assert SUMMARY_INSTRUCTIONS[:40] in json.dumps(summary_request.body["messages"][-1])
    assert _first_user_text(after.body).startswith(SUMMARY_HEADER)

    fake_model_server.add({"text": "Still alpha."})
    second = run(fake_model_server, provider, project, "--continue", "and now?")
    assert second.returncode == 0, second.stderr
    resumed = fake_model_server.requests[3].body
    assert _first_user_text(resumed).startswith(SUMMARY_HEADER)
    users = [m for m in resumed["messages"] if m["role"] == "user"]
    assert "read notes.txt" not in json.dumps(users[1:])  # only in the summary now


def _first_user_text(body: dict[str, Any]) -> str:
    message = next(m for m in body["messages"] if m["role"] == "user")
    content = message["content"]
    if isinstance(content, str):
        return content
    return next(block["text"] for block in content if block.get("type") == "text")
