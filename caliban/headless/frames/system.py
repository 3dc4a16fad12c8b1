"""``system`` frames about the run rather than the conversation: ``init`` (once per turn),
``api_retry``, ``model_fallback``, ``compact_boundary`` (with the summary that follows it)
and caliban's own ``mcp_activation`` (lazy MCP: the tools a ToolSearch or a direct call
loaded, those evicted, and the whole active set)."""

from __future__ import annotations

from typing import Any

from caliban.events import ActivationChanged, ApiRetryEvent, ConversationCompacted, ModelFallback
from caliban.headless.frames.common import (
    Frame,
    api_error_kind,
    blocks,
    new_uuid,
    now_iso,
    system_frame,
)

INIT_ORDER = (
    "type",
    "subtype",
    "cwd",
    "session_id",
    "tools",
    "mcp_servers",
    "model",
    "permissionMode",
    "slash_commands",
    "apiKeySource",
    "claude_code_version",
    "output_style",
    "agents",
    "skills",
    "plugins",
    "analytics_disabled",
    "product_feedback_disabled",
    "uuid",
    "memory_paths",
    "fast_mode_state",
)
"""Claude Code's keys of ``system/init``, in its order; caliban's own keys follow."""


def init_frame(info: dict[str, Any], session_id: str) -> Frame:
    """The ``system/init`` frame of a turn; ``info`` has its values (see headless.run)."""
    frame: Frame = {"type": "system", "subtype": "init", **info}
    frame["session_id"] = session_id
    frame["uuid"] = new_uuid()
    return {**{k: frame[k] for k in INIT_ORDER if k in frame}, **frame}


def api_retry_frame(event: ApiRetryEvent, session_id: str) -> Frame:
    return {
        "type": "system",
        "subtype": "api_retry",
        # Claude Code numbers retries (1 = the first retry) and counts them in max_retries.
        "attempt": event.attempt - 1,
        "max_retries": event.max_attempts - 1,
        "retry_delay_ms": int(event.delay_s * 1000),
        "error_status": event.status,
        "error": api_error_kind(event.status),
        "session_id": session_id,
        "uuid": new_uuid(),
        "error_message": event.error,
    }


def fallback_frame(event: ModelFallback, session_id: str) -> Frame:
    return system_frame(
        "model_fallback",
        session_id,
        trigger="overloaded",
        original_model=event.original_model,
        fallback_model=event.fallback_model,
        content=f"Switched to {event.fallback_model} due to high demand for {event.original_model}",
    )


def compacted_frames(event: ConversationCompacted, session_id: str) -> list[Frame]:
    """Claude Code's boundary frame, then the summary as the user message it now is."""
    frames = [
        system_frame(
            "compact_boundary",
            session_id,
            compact_metadata={
                "trigger": event.trigger,
                "pre_tokens": event.pre_tokens,
                "post_tokens": event.post_tokens,
            },
        )
    ]
    if event.messages:
        summary = event.messages[0]
        frames.append(
            {
                "type": "user",
                "message": {"role": "user", "content": blocks(summary.parts)},
                "parent_tool_use_id": None,
                "session_id": session_id,
                "uuid": summary.id,
                "timestamp": now_iso(),
                "isSynthetic": True,
            }
        )
    return frames


def activation_frame(event: ActivationChanged, session_id: str) -> Frame:
    return system_frame(
        "mcp_activation",
        session_id,
        activated=list(event.activated),
        evicted=list(event.evicted),
        active=list(event.active),
        preactivated=event.preactivated,
        parent_tool_use_id=event.parent_tool_use_id,
    )
