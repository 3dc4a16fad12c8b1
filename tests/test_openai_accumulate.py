"""The Chat Completions stream accumulator, fed hand-written chunk sequences."""

from __future__ import annotations

from typing import Any

import pytest

from caliban.messages import INVALID_ARGUMENTS_KEY, ThinkingPart, ToolCall, Usage
from caliban.providers.accumulate import ChatStreamAccumulator, parse_arguments, usage_from_openai
from caliban.providers.base import TextDelta, ThinkingDelta, ToolCallStarted
from caliban.providers.guard import StreamLimits
from caliban.providers.retry import IncompleteStream, StreamRejected


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}], **extra}


def calls(*tool_calls: dict[str, Any]) -> dict[str, Any]:
    return chunk({"tool_calls": list(tool_calls)})


def feed_all(
    *chunks: dict[str, Any], limits: StreamLimits | None = None
) -> tuple[ChatStreamAccumulator, list[TextDelta | ThinkingDelta | ToolCallStarted]]:
    acc = ChatStreamAccumulator(limits=limits) if limits else ChatStreamAccumulator()
    shown = [event for c in chunks for event in acc.feed(c)]
    return acc, shown


def test_text_only() -> None:
    acc, shown = feed_all(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk({}, "stop"),
    )
    assert shown == [TextDelta(text="Hel"), TextDelta(text="lo")]
    message, usage, stop = acc.finish()
    assert message.text == "Hello" and usage is None and stop == "end_turn"


def test_arguments_empty_string_then_object() -> None:
    acc, shown = feed_all(
        calls(
            {"index": 0, "id": "a", "type": "function", "function": {"name": "Ls", "arguments": ""}}
        ),
        calls({"index": 0, "function": {"arguments": "{}"}}),
        chunk({}, "tool_calls"),
    )
    assert shown == [ToolCallStarted(id="a", name="Ls")]
    message, _, stop = acc.finish()
    assert message.tool_calls == (ToolCall(id="a", name="Ls", arguments={}),) and stop == "tool_use"


def test_null_arguments_and_missing_ids() -> None:
    acc, shown = feed_all(
        calls({"index": 0, "function": {"name": "Ls", "arguments": None}}),
        calls({"index": 1, "id": None, "function": {"name": "Pwd"}}),
        chunk({}, "tool_calls"),
    )
    first, second = acc.finish()[0].tool_calls
    assert first.arguments == {} and second.arguments == {}
    assert first.id.startswith("call_") and second.id.startswith("call_") and first.id != second.id
    assert [e.id for e in shown if isinstance(e, ToolCallStarted)] == [first.id, second.id]


def test_several_calls_in_one_chunk_interleaved_by_index() -> None:
    acc, _ = feed_all(
        calls(
            {"index": 0, "id": "a", "function": {"name": "Read", "arguments": '{"pa'}},
            {"index": 1, "id": "b", "function": {"name": "Read", "arguments": '{"path"'}},
        ),
        calls(
            {"index": 1, "function": {"arguments": ': "b.txt"}'}},
            {"index": 0, "function": {"arguments": 'th": "a.txt"}'}},
        ),
        chunk({}, "tool_calls"),
    )
    a, b = acc.finish()[0].tool_calls
    assert (a.id, a.arguments) == ("a", {"path": "a.txt"})
    assert (b.id, b.arguments) == ("b", {"path": "b.txt"})


def test_text_and_tool_calls_in_one_turn_text_first() -> None:
    acc, _ = feed_all(
        chunk({"content": "Checking."}),
        calls({"index": 0, "id": "a", "function": {"name": "Ls", "arguments": "{}"}}),
        chunk({"content": " More text after the call."}),
        chunk({}, "stop"),  # some servers say "stop" even with tool calls
    )
    message, _, stop = acc.finish()
    assert message.text == "Checking. More text after the call."
    assert [type(p).__name__ for p in message.parts] == ["TextPart", "ToolCall"]
    assert stop == "tool_use"


def test_missing_index_continues_by_id_or_the_last_call() -> None:
    acc, _ = feed_all(
        calls({"id": "a", "function": {"name": "Read", "arguments": '{"path":'}}),
        calls({"function": {"arguments": ' "x"}'}}),
        calls({"id": "b", "function": {"name": "Ls", "arguments": "{}"}}),
        chunk({}, "tool_calls"),
    )
    a, b = acc.finish()[0].tool_calls
    assert a.arguments == {"path": "x"} and (b.id, b.name) == ("b", "Ls")


def test_name_repeated_in_every_chunk_or_split_in_pieces() -> None:
    acc, shown = feed_all(
        calls({"index": 0, "id": "a", "function": {"name": "Read", "arguments": "{"}}),
        calls({"index": 0, "function": {"name": "Read", "arguments": "}"}}),
        calls({"index": 1, "id": "b", "function": {"name": "Gl"}}),
        calls({"index": 1, "function": {"name": "ob", "arguments": "{}"}}),
        chunk({}, "tool_calls"),
    )
    a, b = acc.finish()[0].tool_calls
    assert a.name == "Read" and b.name == "Glob"
    assert len([e for e in shown if isinstance(e, ToolCallStarted)]) == 2


def test_arguments_as_an_object_and_repeated_whole() -> None:
    acc, _ = feed_all(
        calls({"index": 0, "id": "a", "function": {"name": "Read", "arguments": {"path": "obj"}}}),
        calls({"index": 1, "id": "b", "function": {"name": "Read", "arguments": '{"path": "x"}'}}),
        calls({"index": 1, "function": {"arguments": '{"path": "x"}'}}),
        chunk({}, "tool_calls"),
    )
    a, b = acc.finish()[0].tool_calls
    assert a.arguments == {"path": "obj"} and b.arguments == {"path": "x"}


def test_invalid_json_is_kept_for_an_error_result() -> None:
    acc, _ = feed_all(
        calls({"index": 0, "id": "a", "function": {"name": "Read", "arguments": '{"path": '}}),
        chunk({}, "tool_calls"),
    )
    [call] = acc.finish()[0].tool_calls
    assert call.arguments == {INVALID_ARGUMENTS_KEY: '{"path": '}
    assert call.invalid_arguments == '{"path": '


def test_a_call_without_a_name_is_dropped() -> None:
    acc, shown = feed_all(
        calls({"index": 0, "id": "a", "function": {"arguments": "{}"}}), chunk({}, "stop")
    )
    message, _, stop = acc.finish()
    assert message.parts == () and shown == [] and stop == "end_turn"


def test_usage_last_one_wins_and_other_choices_are_ignored() -> None:
    acc, shown = feed_all(
        chunk({"content": "a"}, usage={"prompt_tokens": 5, "completion_tokens": 1}),
        {"choices": [{"index": 1, "delta": {"content": "other choice"}}]},
        chunk({"content": "b"}, "length", usage={"prompt_tokens": 5, "completion_tokens": 2}),
        {"choices": [], "usage": None},
    )
    message, usage, stop = acc.finish()
    assert shown == [TextDelta(text="a"), TextDelta(text="b")]
    assert message.text == "ab" and stop == "max_tokens"
    assert usage == Usage(input_tokens=5, output_tokens=2)


def test_refusal_text_is_shown() -> None:
    acc, _ = feed_all(chunk({"refusal": "I can't help with that."}), chunk({}, "content_filter"))
    message, _, stop = acc.finish()
    assert message.text == "I can't help with that." and stop == "refusal"


def test_no_finish_reason_is_an_incomplete_stream_not_an_answer() -> None:
    acc, _ = feed_all(chunk({"content": "The answer is"}))
    with pytest.raises(IncompleteStream, match="finish_reason"):
        acc.finish()


def test_unknown_finish_reason_is_other() -> None:
    acc, _ = feed_all(chunk({"content": "hi"}), chunk({}, "eos"))
    assert acc.finish()[2] == "other"


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_reasoning_is_thinking_not_answer(key: str) -> None:
    acc, shown = feed_all(
        chunk({key: "Two "}),
        chunk({key: "options."}),
        chunk({"content": "Use B."}),
        chunk({}, "stop"),
    )
    assert shown == [
        ThinkingDelta(text="Two "),
        ThinkingDelta(text="options."),
        TextDelta(text="Use B."),
    ]
    message, _, _ = acc.finish()
    assert message.text == "Use B." and message.thinking == "Two options."
    [thinking, _] = message.parts
    assert thinking == ThinkingPart(text="Two options.")  # no signature: never sent back


def test_oversized_text_arguments_or_call_count_are_refused() -> None:
    small = StreamLimits(max_part_chars=10, max_parts=2)
    with pytest.raises(StreamRejected, match="the text grew past 10 characters"):
        feed_all(chunk({"content": "123456"}), chunk({"content": "789012"}), limits=small)
    with pytest.raises(StreamRejected, match="arguments of tool call 'Write' grew past"):
        feed_all(
            calls({"index": 0, "id": "a", "function": {"name": "Write", "arguments": '{"c": "'}}),
            calls({"index": 0, "function": {"arguments": 'xxxxxxxxx"}'}}),
            limits=small,
        )
    with pytest.raises(StreamRejected, match="more than 2 content blocks"):
        feed_all(
            *(calls({"index": i, "id": f"c{i}", "function": {"name": "Ls"}}) for i in range(3)),
            limits=small,
        )
    with pytest.raises(StreamRejected, match="reasoning text grew past"):
        feed_all(chunk({"reasoning_content": "x" * 11}), limits=small)


def test_cached_prompt_tokens_are_cache_reads() -> None:
    usage = usage_from_openai(
        {
            "prompt_tokens": 1200,
            "completion_tokens": 30,
            "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 150},
        }
    )
    assert usage == Usage(
        input_tokens=50, output_tokens=30, cache_read_tokens=1000, cache_write_tokens=150
    )
    assert usage_from_openai(
        {"prompt_tokens": 7, "completion_tokens": 1, "prompt_tokens_details": None}
    ) == Usage(input_tokens=7, output_tokens=1)
    assert usage_from_openai(None) is None


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("", {}),
        ("   ", {}),
        ("null", {}),
        ("{}", {}),
        ('{"a": 1}', {"a": 1}),
        ('{}{"a": 1}', {"a": 1}),
        ('{"a": 1}{"a": 1}', {"a": 1}),
        ("[1, 2]", {INVALID_ARGUMENTS_KEY: "[1, 2]"}),
        ('"text"', {INVALID_ARGUMENTS_KEY: '"text"'}),
        ("{'a': 1}", {INVALID_ARGUMENTS_KEY: "{'a': 1}"}),
    ],
)
def test_parse_arguments(raw: str, parsed: dict[str, Any]) -> None:
    assert parse_arguments(raw) == parsed


def test_arguments_are_always_text_that_can_be_written() -> None:
    from caliban.messages import TextPart

    # Half an emoji: no file name, command or file content can hold it.
    assert parse_arguments('{"content": "x\\ud83d", "n": ["\\udcff"]}') == {
        "content": "x\ufffd",
        "n": ["\ufffd"],
    }
    assert parse_arguments('{"content": "\\ud83d\\ude00"}') == {"content": "\U0001f600"}
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert parse_arguments(deep) == {INVALID_ARGUMENTS_KEY: deep}
    assert TextPart(text="caf\udce9").text == "caf\ufffd"
