"""The provider protocol: one streaming call per model request.

A provider receives a :class:`ProviderRequest` and yields :class:`ProviderEvent` values:
any number of :class:`TextDelta`, :class:`ThinkingDelta`, :class:`ToolCallStarted` and
:class:`ApiRetry`, then exactly one :class:`ResponseDone` carrying the final message and its
usage. Errors the user must act on (a bad key, a bad request) are raised as
:class:`ProviderError` — :class:`PromptTooLong` when the conversation no longer fits the
model's context window; transient ones (429, 5xx, overloaded, connection reset) are retried
inside the provider.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from caliban.messages import Message, ToolSpec, Usage

StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal", "pause_turn", "other"]
"""``pause_turn``: the provider paused a long turn of its own tools (web search); sending
the history back as it is lets it go on."""
Effort = Literal["low", "medium", "high"]
"""How hard the model should think: Anthropic extended/adaptive thinking, OpenAI
``reasoning_effort``. ``None`` (the default) sends neither."""


DEFAULT_MAX_TOKENS = 16_384
"""Output tokens a response may take unless the request says otherwise."""

ProviderName = Literal["anthropic", "openai"]
"""The providers caliban speaks to; what each reads from the environment is below."""
PROVIDERS: Final[tuple[ProviderName, ...]] = ("anthropic", "openai")

DEFAULT_MODELS: Final[Mapping[ProviderName, str]] = {
    "anthropic": "claude-sonnet-5-5",
    "openai": "gpt-5.5",
}
"""The model used when neither ``--model`` nor the ``model`` setting names one."""

KEY_ENVS: Final[Mapping[ProviderName, str]] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
}
BASE_URL_ENVS: Final[Mapping[ProviderName, str]] = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class ProviderRequest:
    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    max_tokens: int = DEFAULT_MAX_TOKENS
    web_search: bool = False
    """Offer the provider's own web search (Anthropic's ``web_search`` server tool, run by
    the API within the response); a provider without one never gets it set."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingDelta:
    """A piece of the model's reasoning (not of its answer)."""

    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallStarted:
    """The model began a tool call (arguments still streaming). For live display only."""

    id: str
    name: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ApiRetry:
    """A transient API error; the provider waits ``delay_s`` and tries again."""

    attempt: int
    max_attempts: int
    delay_s: float
    error: str
    status: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ResponseDone:
    message: Message
    usage: Usage
    stop_reason: StopReason


ProviderEvent = TextDelta | ThinkingDelta | ToolCallStarted | ApiRetry | ResponseDone


class ProviderError(Exception):
    """A model API failure that retrying will not fix. The message is shown to the user;
    ``status`` is the HTTP status of the last failed request, when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class PromptTooLong(ProviderError):
    """The request does not fit the model's context window; a shorter history would.

    ``tokens`` and ``limit`` are the figures the server gave, when it gave them.
    """

    def __init__(self, message: str, *, tokens: int | None = None, limit: int | None = None):
        super().__init__(message, status=400)
        self.tokens = tokens
        self.limit = limit


class Provider(Protocol):
    """Streams one model response. Only provider modules know a wire format."""

    name: str

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]: ...
