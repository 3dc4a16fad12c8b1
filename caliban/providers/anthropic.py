"""The Anthropic Messages API provider (official ``anthropic`` SDK, streaming).

The SDK takes about a second to import, so it is imported, and the client created, on the
first request or when :meth:`AnthropicProvider.warm_up` runs (in a worker thread, while the
rest of caliban starts).

Prompt caching: the system prompt and the last content block of the newest message carry
``cache_control: {"type": "ephemeral"}``, and so does the last block of the previous user
message (where the previous request put its breakpoint), so each request reads the whole
earlier conversation from the cache and only the new turn is billed at the full rate.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, assert_never

from caliban.messages import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from caliban.providers._sdk import SdkProvider
from caliban.providers.accumulate import parse_arguments
from caliban.providers.base import (
    ProviderEvent,
    ProviderRequest,
    ResponseDone,
    StopReason,
    TextDelta,
    ToolCallStarted,
)
from caliban.providers.history import normalize
from caliban.providers.retry import (
    Failure,
    IncompleteStream,
    classify_status,
    connection_failure,
    malformed_failure,
    with_retries,
)

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
CACHE_CONTROL: Mapping[str, str] = {"type": "ephemeral"}
STOP_REASONS: Mapping[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
}


# ---------------------------------------------------------------------------- request


def build_params(request: ProviderRequest) -> dict[str, Any]:
    """The Messages API request body for ``request`` (without ``stream``)."""
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": wire_messages(request.messages),
    }
    if request.system:
        system = {"type": "text", "text": request.system, "cache_control": CACHE_CONTROL}
        params["system"] = [system]
    if request.tools:
        params["tools"] = [wire_tool(tool) for tool in request.tools]
    return params


def wire_tool(tool: ToolSpec) -> dict[str, Any]:
    schema = dict(tool.input_schema) or {"type": "object", "properties": {}}
    schema.setdefault("type", "object")
    return {"name": tool.name, "description": tool.description, "input_schema": schema}


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in wire form, merged so roles alternate, with the cache breakpoints set."""
    wire = [
        {"role": m.role, "content": [_block(part) for part in m.parts]} for m in normalize(messages)
    ]
    if wire:
        _mark_cached(wire[-1])
        previous_user = next((m for m in reversed(wire[:-1]) if m["role"] == "user"), None)
        if previous_user is not None:
            _mark_cached(previous_user)
    return wire


def _mark_cached(message: dict[str, Any]) -> None:
    last = message["content"][-1]
    message["content"][-1] = {**last, "cache_control": CACHE_CONTROL}


def _block(part: Part) -> dict[str, Any]:
    match part:
        case TextPart(text=text):
            return {"type": "text", "text": text}
        case ImagePart():
            return _image(part)
        case ToolCall(id=id, name=name, arguments=arguments):
            return {"type": "tool_use", "id": id, "name": name, "input": dict(arguments)}
        case ToolResult():
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.tool_call_id}
            content = [
                _image(p) if isinstance(p, ImagePart) else {"type": "text", "text": p.text}
                for p in part.content
                if isinstance(p, ImagePart) or p.text
            ]
            if content:
                block["content"] = content
            if part.is_error:
                block["is_error"] = True
            return block
        case _:
            assert_never(part)


def _image(part: ImagePart) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.media_type, "data": part.data},
    }


# ---------------------------------------------------------------------------- response


@dataclass(kw_only=True)
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    id: str = ""
    name: str = ""


@dataclass(kw_only=True)
class MessagesStreamAccumulator:
    """Builds one assistant message from Messages API stream events (decoded JSON dicts)."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None
    stopped: bool = False

    def feed(self, event: Mapping[str, Any]) -> list[TextDelta | ToolCallStarted]:
        """Take one event; return what to show now."""
        match event.get("type"):
            case "message_start":
                self._usage((event.get("message") or {}).get("usage"))
            case "content_block_start":
                index = int(event.get("index", len(self.blocks)))
                return self._start(index, event.get("content_block") or {})
            case "content_block_delta":
                return self._delta(int(event.get("index", 0)), event.get("delta") or {})
            case "message_delta":
                self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
                self._usage(event.get("usage"))
            case "message_stop":
                self.stopped = True
        return []

    def _usage(self, usage: Any) -> None:
        if isinstance(usage, Mapping):
            self.usage.update({k: v for k, v in usage.items() if isinstance(v, int)})

    def _start(self, index: int, block: Mapping[str, Any]) -> list[TextDelta | ToolCallStarted]:
        kind = str(block.get("type"))
        if kind == "tool_use":
            self.blocks[index] = _Block(kind=kind, id=str(block["id"]), name=str(block["name"]))
            return [ToolCallStarted(id=str(block["id"]), name=str(block["name"]))]
        self.blocks[index] = _Block(kind=kind)
        if kind == "text" and (text := block.get("text")):
            self.blocks[index].text.append(text)
            return [TextDelta(text=text)]
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[TextDelta | ToolCallStarted]:
        block = self.blocks.get(index)
        if block is None:
            return []
        match delta.get("type"):
            case "text_delta" if block.kind == "text":
                text = str(delta.get("text") or "")
                block.text.append(text)
                return [TextDelta(text=text)] if text else []
            case "input_json_delta" if block.kind == "tool_use":
                block.text.append(str(delta.get("partial_json") or ""))
        return []

    def finish(self) -> tuple[Message, Usage, StopReason]:
        """The complete message; raises :class:`IncompleteStream` if the stream was cut short."""
        if not self.stopped and self.stop_reason is None:
            raise IncompleteStream("the stream ended before message_stop")
        parts: list[Part] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.kind == "text" and (text := "".join(block.text)):
                parts.append(TextPart(text=text))
            elif block.kind == "tool_use":
                arguments = parse_arguments("".join(block.text))
                parts.append(ToolCall(id=block.id, name=block.name, arguments=arguments))
        usage = Usage(
            input_tokens=self.usage.get("input_tokens", 0),
            output_tokens=self.usage.get("output_tokens", 0),
            cache_read_tokens=self.usage.get("cache_read_input_tokens", 0),
            cache_write_tokens=self.usage.get("cache_creation_input_tokens", 0),
        )
        stop = STOP_REASONS.get(self.stop_reason or "", "other")
        return Message(role="assistant", parts=tuple(parts)), usage, stop


# ---------------------------------------------------------------------------- provider


class AnthropicProvider(SdkProvider["AsyncAnthropic"]):
    """Streams responses from the Anthropic Messages API (or a compatible endpoint)."""

    name = "anthropic"
    default_key_env = DEFAULT_KEY_ENV

    def _create_client(self) -> AsyncAnthropic:
        import anthropic

        client = anthropic.AsyncAnthropic(
            api_key=self.api_key,
            base_url=self.base_url,
            max_retries=0,  # we retry ourselves, with events the user sees
            timeout=self.timeout,
        )
        client.messages  # noqa: B018  (imports the resource module now, off the hot path)
        return client

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        params = build_params(request)
        return with_retries(
            lambda: self._attempt(params),
            provider=self.name,
            key_env=self.key_env,
            model=request.model,
            classify=classify,
            policy=self.retry,
        )

    async def _attempt(self, params: dict[str, Any]) -> AsyncGenerator[ProviderEvent, None]:
        client = self.client()
        accumulator = MessagesStreamAccumulator()
        stream = await client.messages.create(**params, stream=True)
        async with stream:
            async for event in stream:
                for shown in accumulator.feed(event.to_dict()):
                    yield shown
        message, usage, stop = accumulator.finish()
        yield ResponseDone(message=message, usage=usage, stop_reason=stop)


def classify(exc: Exception) -> Failure | None:
    """An ``anthropic`` SDK (or transport) exception as a :class:`Failure`; None if neither."""
    import anthropic
    import httpx2

    match exc:
        case anthropic.APIStatusError():
            return classify_status(
                exc.status_code,
                error_type=exc.type,
                message=exc.api_message or exc.message,
                headers=exc.response.headers,
            )
        case anthropic.APIConnectionError() | httpx2.RequestError() | IncompleteStream():
            return connection_failure(exc)
        case json.JSONDecodeError():
            return malformed_failure(exc)
        case anthropic.APIError():
            return Failure(kind="fatal", summary=exc.message)
    return None
