"""Messages to and from JSON-ready dicts, in the Anthropic content-block shape.

Headless ``stream-json`` output and session transcripts both use this shape, which is also
what Claude Code's headless mode prints, so existing scripts can read it. Thinking blocks
(``thinking``, ``redacted_thinking``) carry one key of ours, ``model``: the model that wrote
them, the only one they are sent back to.
"""

from __future__ import annotations

from typing import Any, assert_never

from caliban.messages import (
    ImagePart,
    Message,
    Part,
    ResultPart,
    ServerToolPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
    Usage,
    new_message_id,
)


def part_to_json(part: Part) -> dict[str, Any]:
    match part:
        case TextPart(text=text):
            return {"type": "text", "text": text}
        case ImagePart(media_type=media_type, data=data):
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": data},
            }
        case ToolCall(id=id, name=name, arguments=arguments):
            return {"type": "tool_use", "id": id, "name": name, "input": dict(arguments)}
        case ToolResult(tool_call_id=call_id, content=content, is_error=is_error):
            return {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": [part_to_json(p) for p in content],
                "is_error": is_error,
            }
        case ThinkingPart():
            return _thinking_to_json(part)
        case ServerToolPart(block=block):
            return dict(block)
        case _:
            assert_never(part)


def _thinking_to_json(part: ThinkingPart) -> dict[str, Any]:
    block: dict[str, Any]
    if part.redacted_data is not None:
        block = {"type": "redacted_thinking", "data": part.redacted_data}
    else:
        block = {"type": "thinking", "thinking": part.text}
        if part.signature is not None:
            block["signature"] = part.signature
    if part.model is not None:
        block["model"] = part.model  # ours: which model may be sent this block again
    return block


def message_to_json(message: Message) -> dict[str, Any]:
    return {"role": message.role, "content": [part_to_json(p) for p in message.parts]}


def part_from_json(data: dict[str, Any]) -> Part:
    kind = data.get("type")
    if kind == "text":
        return TextPart(text=str(data["text"]))
    if kind == "image":
        source = data["source"]
        return ImagePart(media_type=str(source["media_type"]), data=str(source["data"]))
    if kind == "tool_use":
        return ToolCall(
            id=str(data["id"]), name=str(data["name"]), arguments=dict(data.get("input") or {})
        )
    if kind == "server_tool_use" or (isinstance(kind, str) and kind.endswith("_tool_result")):
        return ServerToolPart(block=dict(data))
    if kind in ("thinking", "redacted_thinking"):
        model = data.get("model")
        signature = data.get("signature")
        return ThinkingPart(
            text=str(data.get("thinking") or ""),
            signature=str(signature) if signature is not None else None,
            redacted_data=str(data["data"]) if kind == "redacted_thinking" else None,
            model=str(model) if model is not None else None,
        )
    if kind == "tool_result":
        raw = data.get("content") or []
        if isinstance(raw, str):
            raw = [{"type": "text", "text": raw}]
        content: list[ResultPart] = []
        for item in raw:
            part = part_from_json(item)
            if not isinstance(part, TextPart | ImagePart):
                raise ValueError(f"unexpected {item.get('type')!r} inside a tool_result")
            content.append(part)
        return ToolResult(
            tool_call_id=str(data["tool_use_id"]),
            content=tuple(content),
            is_error=bool(data.get("is_error", False)),
        )
    raise ValueError(f"unknown content block type {kind!r}")


def message_from_json(data: dict[str, Any], *, id: str | None = None) -> Message:
    """The message ``data`` holds; ``id`` is its id (the transcript line's ``uuid``), a new
    one when ``None``."""
    role = data["role"]
    if role not in ("user", "assistant"):
        raise ValueError(f"unknown role {role!r}")
    parts = tuple(part_from_json(p) for p in data["content"])
    return Message(role=role, parts=parts, id=id or new_message_id())


def usage_from_json(data: dict[str, Any]) -> Usage:
    return Usage(
        input_tokens=int(data.get("input_tokens", 0)),
        output_tokens=int(data.get("output_tokens", 0)),
        cache_read_tokens=int(data.get("cache_read_input_tokens", 0)),
        cache_write_tokens=int(data.get("cache_creation_input_tokens", 0)),
    )


def usage_to_api_json(usage: Usage) -> dict[str, Any]:
    """``usage`` in the Messages API's full shape, as Claude Code prints it (result frames,
    Agent results)."""
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens,
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
        "cache_creation": {
            "ephemeral_1h_input_tokens": 0,
            "ephemeral_5m_input_tokens": usage.cache_write_tokens,
        },
        "inference_geo": "",
        "iterations": [],
        "speed": "standard",
    }
