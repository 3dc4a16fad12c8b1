"""Offline token estimates.

Exact counts need the provider's tokenizer, which is not available offline (tiktoken
downloads its vocabularies at run time). Measured on real prompts, English prose and JSON
average about 4 characters a token and source code about 2.5, so caliban estimates
``ceil(chars / 4)`` for prose and JSON and ``ceil(chars / 2.5)`` for code.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any, Protocol, assert_never

from caliban.messages import (
    ImagePart,
    Message,
    ServerToolPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
    ToolSpec,
)

CHARS_PER_TOKEN_TEXT = 4.0
CHARS_PER_TOKEN_CODE = 2.5


def estimate_tokens(text: str, *, code: bool = False) -> int:
    """Estimated tokens in ``text`` (prose/JSON by default, source code with ``code=True``)."""
    per_token = CHARS_PER_TOKEN_CODE if code else CHARS_PER_TOKEN_TEXT
    return math.ceil(len(text) / per_token)


def json_size(value: Any) -> int:
    """Characters in the compact JSON encoding of ``value`` (what goes on the wire)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def estimate_json_tokens(value: Any) -> int:
    return estimate_tokens(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def format_tokens(n: int) -> str:
    """``1234`` → ``1.2k``; ``1000`` → ``1k``; ``1234567`` → ``1.2M``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}".removesuffix(".0") + "k"
    return f"{n / 1_000_000:.1f}".removesuffix(".0") + "M"


IMAGE_TOKENS = 1_600
"""Rough tokens for one image (Anthropic bills ~1.15 megapixels at about this much)."""


class _HasSpec(Protocol):
    @property
    def spec(self) -> ToolSpec: ...


def tool_tokens(tools: Iterable[_HasSpec]) -> int:
    """Estimated tokens of these tools' definitions (compact JSON, as sent)."""
    return sum(estimate_json_tokens(tool.spec.as_dict()) for tool in tools)


def message_tokens(message: Message) -> int:
    """An offline estimate of one message's tokens."""
    total = 0
    for part in message.parts:
        match part:
            case TextPart(text=text):
                total += estimate_tokens(text)
            case ToolCall(name=name, arguments=arguments):
                total += estimate_tokens(name) + estimate_json_tokens(dict(arguments))
            case ToolResult(content=content):
                for item in content:
                    if isinstance(item, TextPart):
                        total += estimate_tokens(item.text)
                    else:
                        total += IMAGE_TOKENS
            case ImagePart():
                total += IMAGE_TOKENS
            case ServerToolPart(block=block):
                total += estimate_json_tokens(dict(block))
            case ThinkingPart(text=text, signature=signature, redacted_data=redacted):
                # Sent back (with its signature) only to the model that wrote it; counted as
                # if it were, the upper bound.
                total += estimate_tokens(text + (signature or "") + (redacted or ""))
            case _:
                assert_never(part)
    return total
