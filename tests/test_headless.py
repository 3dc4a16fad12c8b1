"""Headless pieces that need no model: flag checks, prompts, stream-json input lines, list
options, and frames built from hand-written events."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest

from caliban.cli.argv import expand_variadic
from caliban.cli.options import CliOptions
from caliban.events import AssistantDelta, AssistantMessage, ToolFinished, UserPrompt
from caliban.headless.frames import FrameBuilder, TurnOutcome
from caliban.headless.run import InputError, parse_input_line, read_prompt, validate
from caliban.messages import Message, TextPart, ToolCall, ToolResult, Usage


def options(**fields: Any) -> CliOptions:
    base: dict[str, Any] = dict(
        prompt="hi",
        print_mode=True,
        output_format="stream-json",
        model=None,
        provider=None,
        max_turns=None,
        permission_mode=None,
        allowed_tools=(),
        disallowed_tools=(),
        continue_session=False,
        resume=None,
        cwd=Path("."),
        verbose=True,
    )
    return CliOptions(**{**base, **fields})


def test_flag_checks_use_claude_codes_messages() -> None:
    assert validate(options()) is None
    assert validate(options(verbose=False)) == (
        "Error: When using --print, --output-format=stream-json requires --verbose"
    )
    assert validate(options(output_format="json", include_partial_messages=True)) == (
        "Error: --include-partial-messages requires --print and --output-format=stream-json."
    )
    assert validate(options(output_format="text", input_format="stream-json")) == (
        "Error: --input-format=stream-json requires output-format=stream-json."
    )
    assert validate(options(session_id="not-a-uuid")) == (
        "Error: Invalid session ID. Must be a valid UUID."
    )
    assert validate(options(session_id="12345678-1234-4234-8234-123456789abc")) is None


class Piped(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_prompt_is_the_argument_then_stdin() -> None:
    assert read_prompt(options(prompt="the arg"), Piped("the stdin\n")) == "the arg\nthe stdin"
    assert read_prompt(options(prompt=None), Piped("only stdin\n")) == "only stdin"
    assert read_prompt(options(prompt=None), Piped("")) is None


def test_stream_json_input_lines() -> None:
    kind, message = parse_input_line('{"type":"user","message":{"role":"user","content":"hi"}}')
    assert kind == "user" and message.parts == (TextPart(text="hi"),) and message.content == "hi"
    blocks = '[{"type":"text","text":"a"},{"type":"text","text":"b"}]'
    kind, message = parse_input_line(
        f'{{"type":"user","message":{{"role":"user","content":{blocks}}},"session_id":""}}'
    )
    assert [p.text for p in message.parts] == ["a", "b"] and isinstance(message.content, list)
    assert parse_input_line('{"type":"bogus"}') == ("ignored", None)
    assert parse_input_line('{"type":"control_request","request_id":"r"}')[0] == "control"
    with pytest.raises(InputError, match=r"^Error parsing streaming input line: nope: "):
        parse_input_line("nope")
    with pytest.raises(InputError, match=r"^Error: Expected message role 'user', got 'undefined'$"):
        parse_input_line('{"type":"user","message":{"content":"x"}}')


def test_list_options_take_several_values_but_not_the_prompt(tmp_path: Path) -> None:
    assert expand_variadic(["-p", "x", "--allowedTools", "Bash", "Edit", "--verbose"]) == [
        "-p", "x", "--allowedTools", "Bash", "--allowedTools", "Edit", "--verbose",
    ]  # fmt: skip
    # A word that is no rule is the prompt (Claude Code would take it as a rule).
    assert expand_variadic(["-p", "--allowed-tools", "Read", "fix the bug"]) == [
        "-p", "--allowed-tools", "Read", "fix the bug",
    ]  # fmt: skip
    assert expand_variadic(["--add-dir", str(tmp_path), str(tmp_path), "go"]) == [
        "--add-dir", str(tmp_path), "--add-dir", str(tmp_path), "go",
    ]  # fmt: skip
    assert expand_variadic(["--tools", "", "-p", "x"]) == ["--tools", "", "-p", "x"]


def test_partial_messages_rebuild_the_anthropic_stream() -> None:
    """Text deltas as they come; then, for each block, its start, its input, the assistant
    frame, its stop; then message_delta and message_stop (the order Claude Code prints)."""
    frames: list[dict[str, Any]] = []
    builder = FrameBuilder(sink=frames.append, partial=True, session_id="s", model="m")
    builder.begin_turn()
    call = ToolCall(id="t1", name="Bash", arguments={"command": "echo hi"})
    message = Message(role="assistant", parts=(TextPart(text="Running."), call))
    builder(UserPrompt(message=Message.user("go")))
    builder(AssistantDelta(text="Run"))
    builder(AssistantDelta(text="ning."))
    builder(
        AssistantMessage(
            message=message, usage=Usage(input_tokens=3), model="m", stop_reason="tool_use"
        )
    )
    kinds = [
        f["event"]["type"] if f["type"] == "stream_event" else f"{f['type']}:{f.get('subtype', '')}"
        for f in frames
    ]
    assert kinds == [
        "system:status",
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "assistant:",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "assistant:",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert (
        frames[5]["message"]["id"]
        == frames[10]["message"]["id"]
        == frames[1]["event"]["message"]["id"]
    )
    assert frames[9]["event"]["delta"] == {
        "type": "input_json_delta",
        "partial_json": '{"command": "echo hi"}',
    }
    assert frames[12]["event"]["delta"]["stop_reason"] == "tool_use"


def test_result_counts_turns_and_denials_as_claude_code() -> None:
    frames: list[dict[str, Any]] = []
    builder = FrameBuilder(sink=frames.append, session_id="s")
    builder.begin_turn()
    calls = [ToolCall(id=f"t{i}", name="Write", arguments={"file_path": "x"}) for i in (1, 2)]
    builder(
        AssistantMessage(
            message=Message(role="assistant", parts=tuple(calls)),
            usage=Usage(),
            model="claude-opus-4-8",
            stop_reason="tool_use",
        )
    )
    for call in calls:
        result = ToolResult(tool_call_id=call.id, content=(TextPart(text="no"),), is_error=True)
        builder(ToolFinished(call=call, result=result, denied=call.id == "t1"))
    builder(
        AssistantMessage(
            message=Message(role="assistant", parts=(TextPart(text="ok"),)),
            usage=Usage(),
            model="claude-opus-4-8",
            stop_reason="end_turn",
        )
    )
    result = builder.result(TurnOutcome(kind="success"))
    assert (result["num_turns"], result["result"], result["stop_reason"]) == (3, "ok", "end_turn")
    assert result["permission_denials"] == [
        {"tool_name": "Write", "tool_use_id": "t1", "tool_input": {"file_path": "x"}}
    ]
    errored = builder.result(TurnOutcome(kind="api_error", error="boom", status=500))
    assert (errored["subtype"], errored["is_error"], errored["api_error_status"]) == (
        "success",
        True,
        500,
    )
    assert errored["result"] == "boom" and errored["stop_reason"] == "stop_sequence"


@pytest.mark.parametrize("stream_json", [False, True])
def test_compaction_is_said_on_stderr_unless_the_frames_show_it(stream_json: bool) -> None:
    from caliban.events import ConversationCompacted
    from caliban.headless.run import StderrNotes

    err = io.StringIO()
    notes = StderrNotes(err=err, stream_json=stream_json)
    summary = Message(role="user", parts=(TextPart(text="summary"),))
    compacted = ConversationCompacted(
        trigger="auto",
        messages=(summary,),
        summary="summary",
        pre_tokens=171_000,
        post_tokens=43_000,
    )
    notes(compacted)
    notes(dataclasses.replace(compacted, parent_tool_use_id="toolu_1"))  # a sub-agent's
    if stream_json:  # the compact_boundary frame says it
        assert err.getvalue() == ""
    else:
        assert err.getvalue() == (
            "caliban: conversation compacted (auto): about 171,000 → 43,000 tokens\n"
        )


@pytest.mark.anyio
async def test_stdin_lines_are_bounded_and_always_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A line over the limit, or stdin that cannot be read, is an error and then the end:
    a reader that died left caliban waiting for input forever."""
    from caliban.headless import run as headless

    monkeypatch.setattr(headless, "MAX_INPUT_LINE_CHARS", 10)
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n" + "x" * 50 + "\nnever read\n"))
    lines = headless._stdin_lines()
    assert await lines.get() == "short"
    error = await lines.get()
    assert isinstance(error, headless.InputError) and "over 10 characters" in str(error)
    assert await lines.get() is None

    undecodable = io.TextIOWrapper(io.BytesIO(b"caf\xe9\n"), encoding="utf-8", errors="strict")
    monkeypatch.setattr("sys.stdin", undecodable)
    lines = headless._stdin_lines()
    error = await lines.get()
    assert isinstance(error, headless.InputError) and "cannot read the input" in str(error)
    assert await lines.get() is None
