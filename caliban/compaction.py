"""Compaction: when the conversation outgrows the context window, summarise its older part.

The agent loop asks :meth:`CompactionPolicy.due` before each request (the provider's reported
input tokens of the latest request against the model's window), and compacts once when a
provider says the prompt is too long. :func:`compact` then

1. trims oversized parts of the history (a 2 MB tool result, a huge paste) to a bounded head
   and tail with a note;
2. asks the model, through the same provider, for a summary of the conversation: the request
   is the one the loop was about to send (same system prompt and tools, so the provider's
   prompt cache still applies) plus a final instruction to answer in text only; when even
   that does not fit, the oldest turns are left out of the summary request;
3. keeps the most recent messages that fit a budget verbatim, cut only where no tool call is
   separated from its result, and puts one user message with the summary before them.

``/compact`` (``keep_recent=False``) keeps nothing verbatim: the summary replaces the whole
history, as Claude Code's does, and both sizes it reports are estimated the same way. A
summary that would not be smaller than the history it replaces is refused.

The lazy-MCP activation set is not touched, so the active MCP tools stay on the wire; the
summary message names them, and the user's latest request is carried over verbatim.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, assert_never

from caliban.messages import (
    ImagePart,
    Message,
    Part,
    ServerToolPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
    Usage,
)
from caliban.providers.base import (
    ApiRetry,
    Provider,
    ProviderRequest,
    ResponseDone,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
)
from caliban.util.tokens import estimate_json_tokens, estimate_tokens, message_tokens

__all__ = [
    "Compacted",
    "CompactionFailed",
    "CompactionPolicy",
    "Trigger",
    "compact",
    "summary_message",
]

Trigger = Literal["auto", "manual"]

KEEP_SHARE = 0.2
"""At most this share of the window is kept verbatim after the summary."""
SUMMARY_INPUT_SHARE = 0.8
"""The summary request may fill this share of the window."""
MAX_PART_CHARS = 40_000
"""A history part longer than this is trimmed to its head and tail (about 10k tokens)."""
SUMMARY_MAX_TOKENS = 8_192

SUMMARY_INSTRUCTIONS = """\
Answer with text only: do not call any tool. The conversation above is about to be replaced \
by a summary, because it no longer fits the context window. Write that summary so that the \
work can continue without the rest of the conversation. Use these sections:

1. The user's requests: every request and instruction the user gave, quoted verbatim, the \
latest last (constraints and things not to do included).
2. Decisions: what was decided and why.
3. Files: every file read, created or changed, with what matters in it and what was changed.
4. Errors: what failed and how it was fixed (or not yet).
5. Current work: precisely what was being done just before this summary.
6. Open questions and next step: what is left, in line with the user's latest request.

Be specific: names, paths, commands, numbers. Put the summary between <summary> and \
</summary>."""

SUMMARY_HEADER = (
    "This conversation was compacted: the earlier part of it, which no longer fits the context "
    "window, is replaced by the summary below; the messages after this one are the most recent "
    "part, verbatim."
)


class CompactionFailed(Exception):
    """Nothing could be compacted (one exchange too large), or the summary request failed."""


@dataclass(frozen=True, kw_only=True)
class CompactionPolicy:
    """When to compact, against which window."""

    auto_at: float
    """Share of the window at which to compact automatically; 0 never does."""
    window: Callable[[], int]
    """The current model's context window in tokens."""

    def due(self, usage: Usage | None) -> bool:
        """Whether the latest request read enough of the window to compact before the next."""
        if usage is None or self.auto_at <= 0:
            return False
        return usage.context_tokens >= self.auto_at * self.window()


@dataclass(frozen=True, kw_only=True)
class Compacted:
    """A compacted history and what it took."""

    messages: tuple[Message, ...]
    summary: str
    pre_tokens: int
    post_tokens: int
    usage: Usage
    """What the summary request cost."""


async def compact(
    provider: Provider,
    request: ProviderRequest,
    *,
    window: int,
    instructions: str | None = None,
    active_tools: Sequence[str] = (),
    measured_tokens: int | None = None,
    keep_recent: bool = True,
) -> Compacted:
    """Summarise the older part of ``request.messages``; see the module docstring.

    ``request`` is what the loop would send next (system prompt, tools, history).
    ``measured_tokens``, when the provider reported them, is the size before compacting
    (``keep_recent=False``, a user's ``/compact``, estimates it like the size after).
    Raises :class:`CompactionFailed` when nothing can be compacted.
    """
    history = [_trim_message(m) for m in request.messages]
    fixed = estimate_tokens(request.system) + sum(
        estimate_json_tokens(t.as_dict()) for t in request.tools
    )
    estimated = fixed + sum(message_tokens(m) for m in request.messages)
    pre = (measured_tokens or estimated) if keep_recent else estimated
    if history and all(_is_summary(m) for m in history):
        raise CompactionFailed("nothing new to compact since the last compaction")
    if not any(m.role == "assistant" for m in history):
        raise CompactionFailed("there is no conversation to compact yet: no answer so far")
    cut = _keep_from(history, budget=int(window * KEEP_SHARE)) if keep_recent else len(history)
    older, kept = history[:cut], history[cut:]
    if all(_is_summary(m) for m in older):
        raise CompactionFailed("nothing new to compact since the last compaction")
    asked = _instruction(instructions)
    summary_input = _fit(
        older, budget=int(window * SUMMARY_INPUT_SHARE) - fixed - SUMMARY_MAX_TOKENS
    )
    # The request the loop was about to send, with the instruction appended: same prefix,
    # so a provider's prompt cache still applies.
    summary_request = dataclasses.replace(
        request,
        messages=(*summary_input, asked),
        max_tokens=min(SUMMARY_MAX_TOKENS, request.max_tokens),
    )
    text, usage = await _answer(provider, summary_request)
    summary = _summary_text(text)
    if not summary:
        raise CompactionFailed("the model returned no summary")
    first = summary_message(summary, active_tools=active_tools, latest=_latest_request(older, kept))
    messages = (first, *kept)
    post = fixed + sum(message_tokens(m) for m in messages)
    if not keep_recent and post >= estimated:
        raise CompactionFailed(
            f"the conversation ({estimated - fixed:,} tokens of messages) is already no larger "
            "than its summary: nothing to free"
        )
    return Compacted(
        messages=messages, summary=summary, pre_tokens=pre, post_tokens=post, usage=usage
    )


def summary_message(
    summary: str, *, active_tools: Sequence[str] = (), latest: str | None = None
) -> Message:
    """The user message that stands for the compacted part of the conversation."""
    lines = [SUMMARY_HEADER, "", "<summary>", summary.strip(), "</summary>"]
    if active_tools:
        lines += [
            "",
            "MCP tools loaded before compaction, still available: " + ", ".join(active_tools),
        ]
    if latest:
        lines += ["", "The user's latest request, verbatim:", latest]
    return Message.user("\n".join(lines))


# ---------------------------------------------------------------------------- history


def _trim_message(message: Message) -> Message:
    parts = tuple(_trim_part(part) for part in message.parts)
    return message if parts == message.parts else dataclasses.replace(message, parts=parts)


def _trim_part(part: Part) -> Part:
    match part:
        case TextPart(text=text) if len(text) > MAX_PART_CHARS:
            return TextPart(text=_trim_text(text))
        case ToolResult(content=content) if _result_chars(content) > MAX_PART_CHARS:
            trimmed = tuple(
                TextPart(text=_trim_text(item.text)) if isinstance(item, TextPart) else item
                for item in content
            )
            return ToolResult(
                tool_call_id=part.tool_call_id, content=trimmed, is_error=part.is_error
            )
        case (
            TextPart() | ToolResult() | ToolCall() | ImagePart() | ThinkingPart() | ServerToolPart()
        ):
            return part
        case _:
            assert_never(part)


def _result_chars(content: Sequence[TextPart | ImagePart]) -> int:
    return sum(len(item.text) for item in content if isinstance(item, TextPart))


def _trim_text(text: str) -> str:
    if len(text) <= MAX_PART_CHARS:
        return text
    half = MAX_PART_CHARS // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[… {cut:,} characters trimmed by compaction …]\n{text[-half:]}"


def _safe_cut(messages: Sequence[Message], index: int) -> bool:
    """Whether the history may start at ``index``: never with a tool result whose call would
    be cut away (both APIs reject that)."""
    message = messages[index]
    return not (message.role == "user" and any(isinstance(p, ToolResult) for p in message.parts))


def _keep_from(messages: Sequence[Message], *, budget: int) -> int:
    """Where the recent messages kept verbatim begin: as many as fit ``budget``, from a safe
    cut — a user prompt when one fits, so whole exchanges are kept — always leaving the first
    message to the summary (``len``: none are kept)."""
    used = 0
    safe = prompt = len(messages)
    for index in range(len(messages) - 1, 0, -1):
        used += message_tokens(messages[index])
        if used > budget:
            break
        if _safe_cut(messages, index):
            safe = index
            if _is_prompt(messages[index]):
                prompt = index
    return prompt if prompt < len(messages) else safe


def _fit(messages: Sequence[Message], *, budget: int) -> list[Message]:
    """The most recent of ``messages`` that fit ``budget``, starting at a safe cut."""
    used = 0
    start = len(messages)
    for index in range(len(messages) - 1, -1, -1):
        used += message_tokens(messages[index])
        if used > budget:
            break
        if _safe_cut(messages, index):
            start = index
    return list(messages[start:]) if start < len(messages) else list(messages[-1:])


def _latest_request(older: Sequence[Message], kept: Sequence[Message]) -> str | None:
    """The user's latest prompt when compaction cut it away (it is kept verbatim then)."""
    if any(_is_prompt(m) for m in kept):
        return None
    return next((m.text for m in reversed(older) if _is_prompt(m)), None)


def _is_summary(message: Message) -> bool:
    return message.role == "user" and message.text.startswith(SUMMARY_HEADER)


def _is_prompt(message: Message) -> bool:
    return message.role == "user" and not any(isinstance(p, ToolResult) for p in message.parts)


def _instruction(extra: str | None) -> Message:
    text = SUMMARY_INSTRUCTIONS
    if extra and extra.strip():
        text += f"\n\nThe user asked this summary to: {extra.strip()}"
    return Message.user(text)


_SUMMARY = re.compile(r"<summary>(.*?)(?:</summary>|\Z)", re.DOTALL)


def _summary_text(text: str) -> str:
    match = _SUMMARY.search(text)
    return (match.group(1) if match else text).strip()


async def _answer(provider: Provider, request: ProviderRequest) -> tuple[str, Usage]:
    """The text of one response (tool calls the model made anyway are ignored)."""
    async for event in provider.stream(request):
        match event:
            case ResponseDone(message=message, usage=usage):
                return message.text, usage
            case TextDelta() | ThinkingDelta() | ToolCallStarted() | ApiRetry():
                pass
    raise CompactionFailed(f"provider {provider.name} ended the stream without a response")
