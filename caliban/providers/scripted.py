"""A provider that replays a script: the test double for loop tests.

Each step answers one request: a string (a text reply), a :class:`Message` (usually with
tool calls, see :func:`tool_call`), a :class:`CutOff` (text stopped at max_tokens), a
callable that builds the reply from the request (it may raise, e.g. ``PromptTooLong``), a
:class:`Reported` step (another step with its own usage figures), or :data:`HANG` (never
answers, for cancellation tests). A :class:`ThinkingPart` in a reply
streams as :class:`ThinkingDelta` before what follows it. Every request is recorded, and a
request beyond the script fails the test loudly.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from caliban.messages import Message, Part, TextPart, ThinkingPart, ToolCall, Usage
from caliban.providers.base import (
    ProviderEvent,
    ProviderRequest,
    ResponseDone,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
)


class _Hang:
    def __repr__(self) -> str:
        return "HANG"


HANG: Final = _Hang()


@dataclass(frozen=True)
class CutOff:
    """A text answer that stops at the output token limit (``stop_reason="max_tokens"``)."""

    text: str


@dataclass(frozen=True)
class Reported:
    """``answer`` reported with ``usage`` instead of the provider's default usage."""

    answer: str | Message | CutOff
    usage: Usage


Step = str | Message | CutOff | Reported | Callable[[ProviderRequest], Message | str] | _Hang

_ids = itertools.count(1)


def tool_call(
    name: str, arguments: Mapping[str, Any] | None = None, *, id: str | None = None
) -> ToolCall:
    return ToolCall(id=id or f"call_{next(_ids)}", name=name, arguments=dict(arguments or {}))


def reply(*parts: str | Part) -> Message:
    """An assistant message from text and parts, e.g. ``reply("Reading it.", tool_call(...))``."""
    return Message(
        role="assistant",
        parts=tuple(TextPart(text=p) if isinstance(p, str) else p for p in parts),
    )


class ScriptExhausted(AssertionError):
    pass


class ScriptedProvider:
    name = "scripted"

    def __init__(self, steps: Iterable[Step], *, usage: Usage | None = None) -> None:
        self.steps = list(steps)
        self.requests: list[ProviderRequest] = []
        self.usage = usage or Usage(input_tokens=10, output_tokens=5)

    @property
    def offered(self) -> list[list[str]]:
        """The tool names offered on each request so far."""
        return [[tool.name for tool in request.tools] for request in self.requests]

    @property
    def remaining(self) -> int:
        return len(self.steps) - len(self.requests)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self.steps):
            raise ScriptExhausted(
                f"unexpected request #{index + 1}: the script has {len(self.steps)} steps; "
                f"last message: {request.messages[-1] if request.messages else None}"
            )
        step = self.steps[index]
        if isinstance(step, _Hang):
            await asyncio.Event().wait()
            raise AssertionError("unreachable")
        usage = step.usage if isinstance(step, Reported) else self.usage
        answer = (
            step.answer if isinstance(step, Reported) else step(request) if callable(step) else step
        )
        cut = isinstance(answer, CutOff)
        if isinstance(answer, CutOff):
            answer = answer.text
        message = reply(answer) if isinstance(answer, str) else answer
        for part in message.parts:
            if isinstance(part, TextPart):
                for chunk in _chunks(part.text):
                    yield TextDelta(text=chunk)
                    await asyncio.sleep(0)
            elif isinstance(part, ThinkingPart):
                for chunk in _chunks(part.text):
                    yield ThinkingDelta(text=chunk)
            elif isinstance(part, ToolCall):
                yield ToolCallStarted(id=part.id, name=part.name)
        stop: StopReason = "max_tokens" if cut else "tool_use" if message.tool_calls else "end_turn"
        yield ResponseDone(message=message, usage=usage, stop_reason=stop)


def _chunks(text: str, size: int = 8) -> Iterable[str]:
    return (text[i : i + size] for i in range(0, len(text), size)) if text else ()
