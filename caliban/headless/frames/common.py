"""What every kind of frame shares: the frame type, new ids and times, a ``system`` frame, the
per-message ``usage`` shape, and what a piece needs from the builder."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from caliban.messages import Part, Usage
from caliban.session.serialize import part_to_json
from caliban.tools.origin import ToolOrigin

Frame = dict[str, Any]
ERROR_KINDS = {401: "authentication_failed", 403: "authentication_failed", 429: "rate_limit"}


class FrameContext(Protocol):
    """The builder, as the pieces that emit frames themselves see it."""

    @property
    def session_id(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def partial(self) -> bool: ...

    @property
    def tool_origin(self) -> Callable[[str], ToolOrigin | None]: ...

    def emit(self, frame: Frame) -> None: ...


def new_uuid() -> str:
    return str(uuid.uuid4())


def new_response_id() -> str:
    """An API-style message id (``msg_…``) for the frames of one response."""
    return f"msg_{uuid.uuid4().hex[:24]}"


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def system_frame(subtype: str, session_id: str, **fields: Any) -> Frame:
    return {
        "type": "system",
        "subtype": subtype,
        **fields,
        "uuid": new_uuid(),
        "session_id": session_id,
    }


def api_error_kind(status: int | None) -> str:
    """Claude Code's short name for an API error (``api_retry.error``, assistant ``error``)."""
    if status in ERROR_KINDS:
        return ERROR_KINDS[status]
    if status == 529:
        return "overloaded"
    if status is not None and status >= 500:
        return "server_error"
    if status == 400:
        return "invalid_request"
    return "unknown"


def message_usage(usage: Usage) -> dict[str, Any]:
    """The ``usage`` of an ``assistant`` frame's message (the API's per-message shape)."""
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_write_tokens,
            "ephemeral_1h_input_tokens": 0,
        },
        "output_tokens": usage.output_tokens,
        "service_tier": "standard",
    }


def blocks(parts: tuple[Part, ...]) -> list[dict[str, Any]]:
    return [part_to_json(p) for p in parts]
