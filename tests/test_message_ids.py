"""Message ids: every message has one from the start, transcripts keep it across
``--continue``, the Agent SDK's user-message ``uuid`` becomes it, and replayed user messages
carry it. Provider wire formats never see it."""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_model_server import FakeModelServer
from test_headless_e2e import lines, run
from test_sessions import make_session, recorded_session

from caliban.events import ConversationCompacted
from caliban.headless.run import parse_input_line
from caliban.messages import Message, TextPart, ToolCall, ToolResult
from caliban.providers import anthropic, openai
from caliban.providers.base import ProviderRequest
from caliban.providers.scripted import ScriptedProvider, reply, tool_call
from caliban.session.resume import close_transcript, open_transcript
from caliban.session.store import load_session, transcript_path

pytestmark = pytest.mark.anyio


def test_a_message_has_a_uuid_from_the_start_and_keeps_it_when_rebuilt() -> None:
    first, second = Message.user("hi"), Message.user("hi")
    assert uuid.UUID(first.id).version == 4
    assert first.id != second.id
    assert first == second  # the id is a name, not content
    longer = dataclasses.replace(first, parts=(*first.parts, TextPart(text="more")))
    assert longer.id == first.id
    assert Message.user("x", id="given").id == "given"


def test_provider_wire_formats_never_see_the_id() -> None:
    call = ToolCall(id="t1", name="Echo", arguments={"text": "a"})
    history = [
        Message.user("hi"),
        Message(role="assistant", parts=(TextPart(text="ok"), call)),
        Message(role="user", parts=(ToolResult(tool_call_id="t1", content=(TextPart(text="a"),)),)),
    ]
    request = ProviderRequest(
        model="m", system="system", messages=tuple(history), tools=(), max_tokens=100
    )
    wire = json.dumps([anthropic.build_params(request), openai.build_params(request)])
    assert not any(message.id in wire for message in history)
    assert '"uuid"' not in wire


async def test_ids_survive_continue_and_a_compaction_line(project: Path) -> None:
    first = await recorded_session(
        project, reply("Echoing.", tool_call("Echo", {"text": "a"})), "Done.", prompts=("one",)
    )
    ids = [m.id for m in first.conversation.messages]
    assert len(set(ids)) == 4
    # A compaction's new history keeps the ids of the messages it kept.
    summary = Message.user("summary")
    kept = first.conversation.messages[-1]
    first.emit(
        ConversationCompacted(
            trigger="manual", messages=(summary, kept), summary="s", pre_tokens=9, post_tokens=2
        )
    )
    close_transcript(first)

    session = make_session(project, ScriptedProvider(["two"]))
    options = SimpleNamespace(continue_session=True, resume=None, model=None, fork_session=False)
    await open_transcript(session, options, interactive=False)
    assert [m.id for m in session.conversation.messages] == [summary.id, kept.id]
    await session.run("again")
    close_transcript(session)
    again = load_session(transcript_path(project, first.id))
    assert [m.id for m in again.messages] == [m.id for m in session.conversation.messages]


async def test_a_transcript_written_before_ids_gives_the_same_ids_at_every_load(
    project: Path,
) -> None:
    session = await recorded_session(project, "Done.", prompts=("one",))
    close_transcript(session)
    path = transcript_path(project, session.id)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        record.pop("uuid", None)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    once, twice = load_session(path), load_session(path)
    assert [m.id for m in once.messages] == [m.id for m in twice.messages]
    assert len({m.id for m in once.messages}) == 2


def test_a_stream_json_line_names_its_message_by_its_uuid() -> None:
    given = str(uuid.uuid4())
    line = {"type": "user", "message": {"role": "user", "content": "hi"}, "uuid": given}
    assert parse_input_line(json.dumps(line))[1].id == given
    for not_an_id in ("", "x" * 40, 7):
        _kind, payload = parse_input_line(json.dumps({**line, "uuid": not_an_id}))
        assert payload.id is None  # a new id is made for it


@pytest.mark.slow
def test_replayed_user_messages_carry_the_id_the_transcript_keeps(
    fake_model_server: FakeModelServer, project: Path
) -> None:
    """The Agent SDK's flow: user lines (one with the SDK's uuid, one without), echoed with
    ``--replay-user-messages``; the echoed uuid is the message's id in the transcript, and a
    later ``-c`` run still has it."""
    fake_model_server.add({"text": "One."}, {"text": "Two."}, {"text": "Three."})
    given = str(uuid.uuid4())
    stdin = "".join(
        json.dumps(line) + "\n"
        for line in (
            {"type": "user", "message": {"role": "user", "content": "first"}, "uuid": given},
            {"type": "user", "message": {"role": "user", "content": "second"}},
        )
    )
    stream = ["--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
    done = run(
        fake_model_server, "anthropic", project, *stream, "--replay-user-messages", stdin=stdin
    )
    assert done.returncode == 0, done.stderr
    frames = lines(done.stdout)
    echoed = [f["uuid"] for f in frames if f["type"] == "user" and f.get("isReplay")]
    assert echoed[0] == given and uuid.UUID(echoed[1])
    path = transcript_path(project, frames[0]["session_id"])
    prompts = [
        r for r in map(json.loads, path.read_text().splitlines()) if r["type"] == "user_prompt"
    ]
    assert [r["uuid"] for r in prompts] == echoed

    again = run(fake_model_server, "anthropic", project, "-c", "--output-format", "json", "third")
    assert again.returncode == 0, again.stderr
    record = load_session(path)
    assert [m.id for m in record.messages if m.role == "user"][:2] == echoed
