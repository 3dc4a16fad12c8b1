"""Pure stream accumulation for Chat Completions (OpenAI-compatible) responses.

:class:`ChatStreamAccumulator` is fed decoded ``chat.completion.chunk`` objects (plain JSON
dicts, as they come off the wire) and returns the display events each produced; at the end
:meth:`~ChatStreamAccumulator.finish` gives the complete message. It tolerates what
OpenAI-compatible servers actually send:

- tool calls assembled by ``index`` across chunks, several calls in one chunk, calls
  interleaved; a missing ``index`` continues the call with the same ``id`` (or the last one);
- missing call ids (one is generated), a name repeated in every chunk;
- arguments as ``""`` then ``"{}"``, as ``null``, as an already decoded object, or one JSON
  object streamed and then sent again whole;
- text and tool calls in one turn (text first in the message), missing ``usage``,
  ``usage`` on every chunk (the last one wins), ``finish_reason: "stop"`` with tool calls;
- reasoning as ``reasoning_content`` (llama.cpp, vLLM, DeepSeek) or ``reasoning`` (Ollama,
  OpenRouter): shown as thinking, kept as a :class:`ThinkingPart`, never sent back.

A stream without any ``finish_reason`` was cut short (:class:`IncompleteStream`), and parts
over the limits of :class:`~caliban.providers.guard.StreamLimits` are refused.

Arguments that are not a JSON object become ``{INVALID_ARGUMENTS_KEY: raw}``: the loop
answers such a call with an error result the model can read (see :class:`ToolCall`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from caliban.messages import (
    INVALID_ARGUMENTS_KEY,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCall,
    Usage,
)
from caliban.providers.base import StopReason, TextDelta, ThinkingDelta, ToolCallStarted
from caliban.providers.guard import DEFAULT_LIMITS, StreamLimits, check_part, check_parts
from caliban.providers.retry import IncompleteStream
from caliban.util.text import encodable

FINISH_REASONS: Mapping[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_arguments(raw: str) -> dict[str, Any]:
    """Tool arguments from their streamed JSON text; never raises.

    Empty text or ``null`` is ``{}``. Several JSON objects back to back (a server that
    streams the arguments and then repeats them whole, or sends ``{}`` first) give the last
    non-empty one. Anything else that is not a JSON object is kept as
    ``{INVALID_ARGUMENTS_KEY: raw}``.
    """
    text = raw.strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except RecursionError:  # nested deeper than Python's stack: not arguments we can use
        return {INVALID_ARGUMENTS_KEY: raw}
    except json.JSONDecodeError:
        objects = _concatenated_objects(text)
        if objects is None:
            return {INVALID_ARGUMENTS_KEY: raw}
        non_empty = [obj for obj in objects if obj]
        return _without_surrogates(non_empty[-1], text) if non_empty else {}
    if value is None:
        return {}
    if isinstance(value, dict):
        return _without_surrogates(value, text)
    return {INVALID_ARGUMENTS_KEY: raw}


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _without_surrogates(value: dict[str, Any], text: str) -> dict[str, Any]:
    """``value`` with lone surrogates (``"\\ud83d"``, half an emoji) replaced by U+FFFD:
    no file name, command or file content can hold one, and writing one raises."""
    if not _SURROGATE_ESCAPE.search(text) and encodable(text) == text:
        return value
    cleaned: dict[str, Any] = json.loads(encodable(json.dumps(value, ensure_ascii=False)))
    return cleaned


def _concatenated_objects(text: str) -> list[dict[str, Any]] | None:
    decoder = json.JSONDecoder()
    objects: list[dict[str, Any]] = []
    position = 0
    while position < len(text):
        try:
            value, position = decoder.raw_decode(text, position)
        except (json.JSONDecodeError, RecursionError):
            return None
        if not isinstance(value, dict):
            return None
        objects.append(value)
        while position < len(text) and text[position].isspace():
            position += 1
    return objects


def usage_from_openai(data: Mapping[str, Any] | None) -> Usage | None:
    """Chat Completions ``usage`` to :class:`Usage`; cached prompt tokens become cache reads."""
    if not data:
        return None
    prompt = _int(data.get("prompt_tokens"))
    details = data.get("prompt_tokens_details") or {}
    cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
    written = _int(details.get("cache_write_tokens")) if isinstance(details, Mapping) else 0
    return Usage(
        input_tokens=max(0, prompt - cached - written),
        output_tokens=_int(data.get("completion_tokens")),
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(kw_only=True)
class _PendingCall:
    id: str
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    size: int = 0
    decoded: dict[str, Any] | None = None
    announced: bool = False


Shown = TextDelta | ThinkingDelta | ToolCallStarted


@dataclass(kw_only=True)
class ChatStreamAccumulator:
    """Builds one assistant message from Chat Completions stream chunks."""

    limits: StreamLimits = DEFAULT_LIMITS
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: dict[int, _PendingCall] = field(default_factory=dict)
    usage: Usage | None = None
    finish_reason: str | None = None
    chunks: int = 0
    _text_size: int = 0
    _thinking_size: int = 0

    def feed(self, chunk: Mapping[str, Any]) -> list[Shown]:
        """Take one chunk; return what to show now (text, reasoning, new tool calls)."""
        self.chunks += 1
        if (usage := usage_from_openai(chunk.get("usage"))) is not None:
            self.usage = usage
        events: list[Shown] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            if reason := choice.get("finish_reason"):
                self.finish_reason = str(reason)
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self._thinking_size += len(reasoning)
                check_part(self._thinking_size, "the reasoning text", self.limits)
                self.thinking.append(reasoning)
                events.append(ThinkingDelta(text=reasoning))
            for key in ("content", "refusal"):
                if isinstance(piece := delta.get(key), str) and piece:
                    self._text_size += len(piece)
                    check_part(self._text_size, "the text", self.limits)
                    self.text.append(piece)
                    events.append(TextDelta(text=piece))
            for call_delta in delta.get("tool_calls") or ():
                if isinstance(call_delta, Mapping) and (started := self._feed_call(call_delta)):
                    events.append(started)
        return events

    def _feed_call(self, delta: Mapping[str, Any]) -> ToolCallStarted | None:
        call_id = delta.get("id") or None
        index = delta.get("index")
        if not isinstance(index, int):
            index = self._index_without_index(call_id)
        call = self.calls.get(index)
        if call is None:
            check_parts(len(self.calls) + 1, self.limits)
            call = self.calls[index] = _PendingCall(id=str(call_id) if call_id else new_call_id())
        function = delta.get("function") or {}
        name = function.get("name")
        if isinstance(name, str) and name and name != call.name:
            call.name += name
            check_part(len(call.name), "a tool name", self.limits)
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call.size += len(arguments)
            check_part(call.size, f"the arguments of tool call {call.name!r}", self.limits)
            call.arguments.append(arguments)
        elif isinstance(arguments, dict):
            call.decoded = arguments
        if call.name and not call.announced:
            call.announced = True
            return ToolCallStarted(id=call.id, name=call.name)
        return None

    def _index_without_index(self, call_id: Any) -> int:
        for index, call in self.calls.items():
            if call_id and call.id == call_id:
                return index
        if call_id or not self.calls:
            return max(self.calls, default=-1) + 1
        return max(self.calls)

    def finish(self) -> tuple[Message, Usage | None, StopReason]:
        """The complete message, the usage if the server sent any, and why it stopped.

        Raises :class:`IncompleteStream` when no chunk carried a ``finish_reason``: the
        server stopped sending mid-answer, and a cut answer must not pass for a whole one.
        """
        if self.finish_reason is None:
            raise IncompleteStream("the stream ended without a finish_reason")
        parts: list[Part] = []
        if thinking := "".join(self.thinking):
            parts.append(ThinkingPart(text=thinking))
        if text := "".join(self.text):
            parts.append(TextPart(text=text))
        for index in sorted(self.calls):
            call = self.calls[index]
            if not call.name:  # nothing to dispatch; a server quirk, not a model request
                continue
            arguments = call.decoded if call.decoded is not None else {}
            if call.arguments:
                arguments = parse_arguments("".join(call.arguments))
            parts.append(ToolCall(id=call.id, name=call.name, arguments=arguments))
        message = Message(role="assistant", parts=tuple(parts))
        if message.tool_calls:
            stop: StopReason = "tool_use"
        else:
            stop = FINISH_REASONS.get(self.finish_reason, "other")
        return message, self.usage, stop
