"""``assistant`` frames: one per content block of a response, all sharing ``message.id``; and
with ``--include-partial-messages`` the Anthropic stream events around them, rebuilt from
what the provider streamed (text deltas as they arrive, each tool call's input in one
``input_json_delta`` when the response is complete)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from caliban.events import AssistantMessage
from caliban.headless.frames.common import (
    Frame,
    FrameContext,
    message_usage,
    new_response_id,
    new_uuid,
)
from caliban.messages import Part, TextPart, ToolCall, Usage
from caliban.session.serialize import part_to_json
from caliban.tools.origin import McpOrigin, ToolOrigin


def assistant_frame(
    event: AssistantMessage,
    part: Part,
    *,
    response_id: str,
    uuid: str,
    session_id: str,
    tool_origin: Callable[[str], ToolOrigin | None],
) -> Frame:
    """The frame of one content block (``stop_reason`` is ``null``: it describes the block)."""
    frame: Frame = {
        "type": "assistant",
        "message": {
            "id": response_id,
            "type": "message",
            "role": "assistant",
            "model": event.model,
            "content": [part_to_json(part)],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": message_usage(event.usage),
            "context_management": None,
        },
        "parent_tool_use_id": event.parent_tool_use_id,
        "session_id": session_id,
        "uuid": uuid,
        "request_id": None,  # caliban does not keep the API's request id
    }
    if isinstance(part, ToolCall) and isinstance(origin := tool_origin(part.name), McpOrigin):
        frame["tool_use_meta"] = [
            {
                "id": part.id,
                "display_name": origin.tool.replace("_", " ").replace("-", " ").title(),
                "server_display_name": origin.server,
            }
        ]
    return frame


def block_uuid(event: AssistantMessage, index: int) -> str:
    """The frame of a response's first block carries the message's id; the others their own."""
    return event.message.id if index == 0 else new_uuid()


def synthetic_frame(text: str, *, error: str | None, session_id: str) -> Frame:
    """An assistant frame that no model wrote (an API error, an unknown command)."""
    frame: Frame = {
        "type": "assistant",
        "message": {
            "id": new_uuid(),
            "container": None,
            "model": "<synthetic>",
            "role": "assistant",
            "stop_details": None,
            "stop_reason": "stop_sequence",
            "stop_sequence": "",
            "type": "message",
            "usage": {
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
                "service_tier": None,
                "cache_creation": {
                    "ephemeral_1h_input_tokens": 0,
                    "ephemeral_5m_input_tokens": 0,
                },
                "inference_geo": None,
                "iterations": None,
                "speed": None,
            },
            "content": [{"type": "text", "text": text}],
            "context_management": None,
        },
        "parent_tool_use_id": None,
        "session_id": session_id,
        "uuid": new_uuid(),
        "error": error,
        "request_id": None,
    }
    if error is None:
        del frame["error"]
    return frame


@dataclass(kw_only=True)
class _Stream:
    """The response being streamed (``--include-partial-messages``)."""

    message_id: str
    text_open: bool = False


class MainResponses:
    """The main agent's responses as frames, with the stream events around them when
    ``--include-partial-messages`` asks for them."""

    def __init__(self, ctx: FrameContext) -> None:
        self.ctx = ctx
        self.stream: _Stream | None = None

    def delta(self, text: str, ttft_ms: int | None) -> None:
        """A piece of the answer's text as it streams."""
        if not self.ctx.partial:
            return
        stream = self._stream_start(ttft_ms)
        if not stream.text_open:
            stream.text_open = True
            self._event(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                }
            )
        self._event(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            }
        )

    def response(self, event: AssistantMessage, ttft_ms: int | None) -> None:
        """The complete response: a frame per block (and, streaming, each block's events)."""
        ctx = self.ctx
        stream = self._stream_start(ttft_ms, event.usage, event.model) if ctx.partial else None
        response_id = stream.message_id if stream else new_response_id()
        index = 1 if stream and stream.text_open else 0
        for position, part in enumerate(event.message.parts):
            frame = assistant_frame(
                event,
                part,
                response_id=response_id,
                uuid=block_uuid(event, position),
                session_id=ctx.session_id,
                tool_origin=ctx.tool_origin,
            )
            if stream is None:
                ctx.emit(frame)
                continue
            if isinstance(part, TextPart) and stream.text_open:
                ctx.emit(frame)
                self._event({"type": "content_block_stop", "index": 0})
                continue
            self._partial_block(part, index, frame)
            index += 1
        if stream is not None:
            self._event(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": event.stop_reason, "stop_sequence": None},
                    "usage": {
                        "input_tokens": event.usage.input_tokens,
                        "cache_creation_input_tokens": event.usage.cache_write_tokens,
                        "cache_read_input_tokens": event.usage.cache_read_tokens,
                        "output_tokens": event.usage.output_tokens,
                    },
                }
            )
            self._event({"type": "message_stop"})
            self.stream = None

    def _stream_start(
        self, ttft_ms: int | None, usage: Usage | None = None, model: str | None = None
    ) -> _Stream:
        if self.stream is None:
            self.stream = _Stream(message_id=new_response_id())
            start = {
                "type": "message_start",
                "message": {
                    "id": self.stream.message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model or self.ctx.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": message_usage(usage or Usage()),
                },
            }
            self._event(start, ttft_ms=ttft_ms or 0)
        return self.stream

    def _partial_block(self, part: Part, index: int, frame: Frame) -> None:
        block = part_to_json(part)
        if isinstance(part, ToolCall):
            start = {**block, "input": {}}
            self._event({"type": "content_block_start", "index": index, "content_block": start})
            for piece in ("", json.dumps(dict(part.arguments), ensure_ascii=False)):
                self._event(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    }
                )
        else:
            self._event({"type": "content_block_start", "index": index, "content_block": block})
        self.ctx.emit(frame)
        self._event({"type": "content_block_stop", "index": index})

    def _event(self, event: dict[str, Any], **extra: Any) -> None:
        self.ctx.emit(
            {
                "type": "stream_event",
                "event": event,
                "session_id": self.ctx.session_id,
                "parent_tool_use_id": None,
                "uuid": new_uuid(),
                **extra,
            }
        )
