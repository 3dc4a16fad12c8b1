"""Each history message and tool definition is translated and encoded once per session.

A request carries the whole history; translating and JSON-encoding all of it every turn made
a long session's turns cost more the longer it got (and the SDK deep-copied the whole body
on top). The caches must send exactly what a fresh translation sends, in every case the
history can take: appended turns, merged same-role runs, blank messages, a compacted or
rewound history, another model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from caliban.messages import Message, TextPart, ThinkingPart, ToolCall, ToolResult, ToolSpec
from caliban.providers import anthropic, openai
from caliban.providers.base import ProviderRequest
from caliban.providers.history import EncodedHistory, EncodedTools, normalize


def call(n: int) -> ToolCall:
    return ToolCall(id=f"t{n}", name="Read", arguments={"path": f"f{n}"})


def result(n: int) -> ToolResult:
    return ToolResult(tool_call_id=f"t{n}", content=(TextPart(text=f"content {n}"),))


def turns(count: int) -> list[Message]:
    history = [Message.user("go")]
    for n in range(count):
        history.append(Message(role="assistant", parts=(TextPart(text=f"step {n}"), call(n))))
        history.append(Message(role="user", parts=(result(n),)))
    return history


class Counting:
    """A converter that counts the messages it was asked to translate."""

    def __init__(self) -> None:
        self.seen = 0

    def __call__(self, run: Sequence[Message]) -> list[dict[str, Any]]:
        self.seen += len(run)
        return [{"role": m.role, "text": m.text} for m in normalize(run)]


def fresh(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [{"role": m.role, "text": m.text} for m in normalize(messages)]


def test_a_turn_converts_only_its_own_messages() -> None:
    history, convert, encoded = turns(200), Counting(), EncodedHistory()
    encoded.encode(history, convert)
    assert convert.seen == len(history)
    convert.seen = 0
    history += turns(1)[1:]  # one more assistant message and its results
    wire = encoded.encode(history, convert).wire
    # The new messages, and the previous newest run again (it may have grown).
    assert convert.seen == 3
    assert [m.data for m in wire] == fresh(history)
    assert all(m.text == json.dumps(m.data, separators=(",", ":")) for m in wire)


@pytest.mark.parametrize(
    "tail",
    [
        # a cancelled turn: interrupted results, then the next prompt (merged)
        [Message(role="user", parts=(result(9),)), Message.user("next")],
        # a blank assistant message between two user messages (dropped, users merged)
        [Message(role="assistant", parts=(TextPart(text=" "),)), Message.user("again")],
        [Message(role="assistant", parts=(TextPart(text="ok"),))],
    ],
)
def test_what_is_sent_matches_a_fresh_translation(tail: list[Message]) -> None:
    encoded = EncodedHistory()
    history = turns(3)
    encoded.encode(history, fresh)
    for message in tail:  # one message per request, as the loop appends them
        history.append(message)
        wire = encoded.encode(history, fresh).wire
        assert [m.data for m in wire] == fresh(history)


def test_another_history_or_model_is_translated_afresh() -> None:
    encoded, convert = EncodedHistory(), Counting()
    history = turns(5)
    encoded.encode(history, convert, key="model-a")
    compacted = [Message.user("summary of the work so far"), *turns(1)[1:]]
    convert.seen = 0
    assert [m.data for m in encoded.encode(compacted, convert, key="model-a").wire] == fresh(
        compacted
    )
    assert convert.seen == len(compacted)
    convert.seen = 0
    encoded.encode(compacted, convert, key="model-b")  # thinking blocks depend on the model
    assert convert.seen == len(compacted)


def test_tool_definitions_are_encoded_once() -> None:
    converted: list[str] = []

    def convert(spec: ToolSpec) -> dict[str, Any]:
        converted.append(spec.name)
        return {"name": spec.name}

    tools = EncodedTools(convert)
    a, b, c = (ToolSpec(name=n, description=n) for n in "abc")
    assert tools.encode((a, b)).data == b'{"name":"a"},{"name":"b"}'
    assert tools.encode((a, b, c)).data == b'{"name":"a"},{"name":"b"},{"name":"c"}'
    assert converted == ["a", "b", "c"]


def request(history: Sequence[Message], *, model: str = "claude-test") -> ProviderRequest:
    tools = (ToolSpec(name="Read", description="Read a file.", input_schema={"type": "object"}),)
    return ProviderRequest(
        model=model, system="Be brief.", messages=tuple(history), tools=tools, max_tokens=100
    )


def test_anthropic_bodies_match_a_fresh_encoder_turn_after_turn() -> None:
    """Cache breakpoints move with the newest and the previous user message; thinking blocks
    go only to the model that wrote them."""
    encoder = anthropic.RequestEncoder()
    history = turns(2)
    history.insert(
        2, Message(role="assistant", parts=(ThinkingPart(text="hm", signature="s", model="m"),))
    )
    for n in range(4):
        history += [
            Message(role="assistant", parts=(call(10 + n),)),
            Message(role="user", parts=(result(10 + n),)),
        ]
        for model in ("m", "claude-test"):
            sent = encoder.body(request(history, model=model), effort="low")
            assert bytes(sent) == bytes(
                anthropic.RequestEncoder().body(request(history, model=model), effort="low")
            )
    body = sent.decoded()
    marked = [i for i, m in enumerate(body["messages"]) if "cache_control" in m["content"][-1]]
    assert marked == [len(body["messages"]) - 3, len(body["messages"]) - 1]


def test_openai_bodies_match_a_fresh_encoder_turn_after_turn() -> None:
    encoder = openai.RequestEncoder()
    history = turns(2)
    for n in range(3):
        history += [
            Message(role="assistant", parts=(call(10 + n),)),
            Message(role="user", parts=(result(10 + n), TextPart(text="and this"))),
        ]
        sent = encoder.encode(request(history), effort="low")
        alone = openai.RequestEncoder().encode(request(history), effort="low")
        assert (bytes(sent.body), sent.sent_chars) == (bytes(alone.body), alone.sent_chars)
    body = sent.body.decoded()
    assert [m["role"] for m in body["messages"][-3:]] == ["assistant", "tool", "user"]
    assert body["reasoning_effort"] == "low" and body["stream"] is True


def test_a_sub_agent_sharing_the_provider_keeps_the_parent_cached() -> None:
    encoded, convert = EncodedHistory(), Counting()
    parent, child = turns(50), [Message.user("the task"), *turns(3)[1:]]
    encoded.encode(parent, convert)
    encoded.encode(child, convert)
    convert.seen = 0
    parent += turns(1)[1:]
    assert [m.data for m in encoded.encode(parent, convert).wire] == fresh(parent)
    assert convert.seen == 3


# ---------------------------------------------------------------------------- the body's chunks


def long_turns(count: int) -> list[Message]:
    """A history whose tool results are long enough to fill kept chunks."""
    history = [Message.user("go")]
    for n in range(count):
        output = ToolResult(tool_call_id=f"t{n}", content=(TextPart(text=f"line {n} é\n" * 80),))
        history.append(Message(role="assistant", parts=(call(n),)))
        history.append(Message(role="user", parts=(output,)))
    return history


def test_a_long_history_goes_in_few_chunks_kept_from_request_to_request() -> None:
    """The settled history is kept in encoded chunks: a turn encodes and copies only its
    unkept end, and a long history goes in a logarithmic number of chunks; the bytes are
    those of a fresh encoder's body."""
    encoders = {"anthropic": anthropic.RequestEncoder(), "openai": openai.RequestEncoder()}
    history = long_turns(400)
    sent: dict[str, list[bytes]] = {}
    copied = dict.fromkeys(encoders, 0)
    total = dict.fromkeys(encoders, 0)
    for end in range(101, len(history) + 1, 2):  # one assistant message and results a turn
        for name, encoder in encoders.items():
            body = (
                encoder.body(request(history[:end]))
                if isinstance(encoder, anthropic.RequestEncoder)
                else encoder.encode(request(history[:end])).body
            )
            previous = sent.get(name, [])
            if previous:
                shared = [c for c in body.chunks if any(c is p for p in previous)]
                copied[name] += body.size - sum(map(len, shared))
                total[name] += body.size
            assert len(body.chunks) <= 10
            sent[name] = list(body.chunks)
    # Over 150 turns, the bytes not already sent in the previous request's chunks (new
    # ones, the unkept end, merged chunks) are a small share of all the bytes sent.
    assert all(copied[name] < total[name] * 0.25 for name in encoders), (copied, total)
    whole = request(history)
    assert b"".join(sent["anthropic"]) == bytes(anthropic.RequestEncoder().body(whole))
    assert b"".join(sent["openai"]) == bytes(openai.RequestEncoder().encode(whole).body)


def test_kept_chunks_never_hold_a_message_sent_otherwise() -> None:
    """A cache breakpoint moves onto a message only after it is kept (a rewind to an
    earlier point, or a history cut and grown again): the body still matches a fresh
    encoder's."""
    encoder = anthropic.RequestEncoder()
    history = long_turns(200)
    for end in (len(history), 101, 161, 41, len(history)):
        sent = encoder.body(request(history[:end]))
        assert bytes(sent) == bytes(anthropic.RequestEncoder().body(request(history[:end])))


def test_the_body_is_json_with_the_length_of_its_chunks() -> None:
    from caliban.providers.body import Encoded, RequestBody, json_object

    kept = Encoded.of('{"a":"é"},')
    body = RequestBody.of(json_object([("x", ["[", kept, '{"b":1}]']), ("y", "true")]))
    assert body.chunks == (b'{"x":[', kept.data, b'{"b":1}],"y":true}')
    assert body.size == len(bytes(body)) and body.decoded() == {
        "x": [{"a": "é"}, {"b": 1}],
        "y": True,
    }
