"""Retries with backoff and the error messages users see, shared by the providers.

Each provider turns its transport's exceptions into a :class:`Failure` (``classify``);
:func:`with_retries` decides what happens next:

- ``auth`` (HTTP 401/403): :class:`ProviderError` naming the environment variable to set.
- ``transient`` (408, 409, 429, 5xx, 529 "overloaded", connection errors, a stream cut
  short): wait and try again, at most ``max_attempts`` tries in total, yielding an
  :class:`ApiRetry` before each wait. The wait grows exponentially with jitter and is
  capped; a ``retry-after-ms`` / ``retry-after`` header wins when the server sends one.
  :attr:`ApiRetry.attempt` is the number of the try about to start (2 .. max).
- ``fatal`` (any other 4xx, a stream that is not UTF-8 or breaks a size limit, ...):
  :class:`ProviderError` with a one-line message.
- ``too_long`` (a 400 saying the prompt exceeds the context window, in any of the forms
  Anthropic, OpenAI, vLLM and llama.cpp use): :class:`PromptTooLong`, so a caller can
  shorten the history and try again.

A retry is only possible before any content was yielded: once text or a tool call reached
the caller it cannot be taken back, so a stream that dies mid-way raises
:class:`ProviderError` instead.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Literal, assert_never

from caliban.providers.base import (
    BASE_URL_ENVS,
    ApiRetry,
    PromptTooLong,
    ProviderError,
    ProviderEvent,
    ResponseDone,
)

FailureKind = Literal["auth", "transient", "fatal", "too_long"]

TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""Statuses worth another try; any other 5xx is treated the same way."""

TRANSIENT_ERROR_TYPES = frozenset(
    {"overloaded_error", "rate_limit_error", "api_error", "timeout_error"}
)
"""Anthropic error ``type`` values (also sent mid-stream as an SSE ``error`` event)."""

STATUS_OF_ERROR_TYPE: Mapping[str, int] = {
    "overloaded_error": 529,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "authentication_error": 401,
    "permission_error": 403,
}


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryPolicy:
    """How often and how long to wait. Tests pass ``base_delay=0`` to avoid sleeping."""

    max_attempts: int = 4
    base_delay: float = 1.0
    factor: float = 2.0
    max_delay: float = 30.0
    max_retry_after: float = 60.0
    """A server's ``retry-after`` is honoured up to this many seconds."""
    jitter: float = 0.25
    """Each computed wait is scaled by a random factor in ``[1 - jitter, 1 + jitter]``."""

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed try number ``attempt`` (1-based)."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.max_retry_after))
        backoff = min(self.max_delay, self.base_delay * self.factor ** (attempt - 1))
        return backoff * random.uniform(1 - self.jitter, 1 + self.jitter)


DEFAULT_RETRY = RetryPolicy()


@dataclass(frozen=True, kw_only=True, slots=True)
class Failure:
    """A classified API error. ``summary`` is one line: ``429 rate_limit_error: slow down``."""

    kind: FailureKind
    summary: str
    status: int | None = None
    retry_after: float | None = None
    tokens: int | None = None
    """``too_long``: the prompt's size in tokens, when the server said."""
    limit: int | None = None
    """``too_long``: the context window in tokens, when the server said."""
    unreachable: bool = False
    """No connection could be made (refused, no route, name not resolved, connect timeout):
    the endpoint is wrong or its server is down, which the final message says."""


class IncompleteStream(Exception):
    """The response stream ended before the response was complete."""


class StreamRejected(Exception):
    """The response stream broke a rule that trying again will not fix: bytes that are not
    UTF-8, or a part over its size limit (see :mod:`caliban.providers.guard`)."""


_TOO_LONG_TYPES = frozenset({"exceed_context_size_error"})  # llama.cpp
_TOO_LONG_CODES = frozenset({"context_length_exceeded"})  # OpenAI
_TOO_LONG_MESSAGES = (
    # Anthropic
    re.compile(r"prompt is too long: (?P<tokens>\d+) tokens > (?P<limit>\d+)"),
    re.compile(
        r"input length and `?max_tokens`? exceed context limit: "
        r"(?P<tokens>\d+) \+ \d+ > (?P<limit>\d+)"
    ),
    # llama.cpp
    re.compile(
        r"request \((?P<tokens>\d+) tokens\) exceeds the available context size "
        r"\((?P<limit>\d+) tokens\)"
    ),
    re.compile(
        r"input \((?P<tokens>\d+) tokens\) is larger than the max context size "
        r"\((?P<limit>\d+) tokens\)"
    ),
    # OpenAI, vLLM, OpenRouter; not vLLM's "'max_tokens' ... is too large", which no
    # shorter history fixes
    re.compile(
        r"maximum context length is (?P<limit>\d+) tokens\. However, (?:your messages resulted in|"
        r"you requested(?: about)?) (?P<tokens>\d+) tokens"
    ),
)


def prompt_too_long(
    message: str | None, *, error_type: str | None = None, code: str | None = None
) -> tuple[int | None, int | None] | None:
    """``(tokens, limit)`` when an error says the prompt exceeds the context window (either
    may be ``None`` when the message does not give it); ``None`` for any other error."""
    text = message or ""
    for pattern in _TOO_LONG_MESSAGES:
        if found := pattern.search(text):
            return int(found["tokens"]), int(found["limit"])
    if error_type in _TOO_LONG_TYPES or code in _TOO_LONG_CODES:
        return None, None
    return None


def retry_after_seconds(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """The wait a server asked for: ``retry-after-ms``, else ``retry-after`` (seconds or a date)."""
    if not headers:
        return None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def classify_status(
    status: int,
    *,
    error_type: str | None,
    message: str | None,
    headers: Mapping[str, str] | None = None,
    code: str | None = None,
    request_id: str | None = None,
) -> Failure:
    """Classify an HTTP error response (or an in-stream error event with ``status`` 200).

    A server's ``x-should-retry: true`` / ``false`` decides between a retry and a fatal
    error, as the SDKs obey it. ``request_id`` (the ``request-id`` header) ends the summary:
    it is what the API's support asks for.
    """
    if status == 200 and error_type:  # an SSE error event: the HTTP status says nothing
        status = STATUS_OF_ERROR_TYPE.get(error_type, 200)
    detail = " ".join(part for part in (str(status) if status != 200 else "", error_type) if part)
    summary = f"{detail}: {one_line(message)}" if message else detail or "unknown error"
    if request_id:
        summary += f" (request id {one_line(request_id, 100)})"
    too_long = prompt_too_long(message, error_type=error_type, code=code)
    if too_long is not None and status in (200, 400, 413):
        tokens, limit = too_long
        return Failure(kind="too_long", summary=summary, status=status, tokens=tokens, limit=limit)
    should_retry = (headers or {}).get("x-should-retry")
    if status in (401, 403) and should_retry != "true":
        kind: FailureKind = "auth"
    elif should_retry == "true":
        kind = "transient"
    elif should_retry == "false":
        kind = "fatal"
    elif status in TRANSIENT_STATUS or status >= 500 or error_type in TRANSIENT_ERROR_TYPES:
        kind = "transient"
    else:
        kind = "fatal"
    return Failure(
        kind=kind,
        summary=summary,
        status=status if status != 200 else None,
        retry_after=retry_after_seconds(headers),
    )


def connection_failure(exc: BaseException) -> Failure:
    """A transport-level failure: refused, reset, timed out, or cut off mid-stream."""
    if isinstance(exc, IncompleteStream):
        return Failure(kind="transient", summary=f"incomplete response: {exc}")
    name = type(exc).__name__
    text = one_line(str(exc))
    cause = exc.__cause__ or exc.__context__
    if cause is not None and (not text or text in ("Connection error.", "Request timed out.")):
        text = f"{text} ({type(cause).__name__}: {one_line(str(cause))})" if text else str(cause)
    # httpx2's names, matched by name so this module imports no httpx2.
    unreachable = any(
        type(error).__name__ in ("ConnectError", "ConnectTimeout") for error in (exc, cause)
    )
    return Failure(
        kind="transient", summary=f"connection error: {text or name}", unreachable=unreachable
    )


def malformed_failure(exc: ValueError) -> Failure:
    """A response that is not what the API promises (broken JSON in the stream)."""
    return Failure(
        kind="transient", summary=f"malformed response from the server: {one_line(str(exc))}"
    )


def one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _unreachable_hint(provider: str, endpoint: str | None) -> str:
    """What to check when no connection to ``endpoint`` (``None``: the provider's public API) could
    be made."""
    if endpoint is None:
        return "; check your network connection"
    variable = BASE_URL_ENVS.get(provider)  # type: ignore[call-overload]
    where = f"providers.{provider}.base_url" + (f" or ${variable}" if variable else "")
    return f"; could not connect to {endpoint}: is the server running? (set by {where})"


def _fatal_message(provider: str, failure: Failure, model: str) -> str:
    message = f"{provider} API error: {failure.summary}"
    if failure.status == 404:
        message += f" (check the model name '{model}' and the base URL)"
    elif failure.status == 413:
        message += " (the request is too large: start a new conversation with /clear)"
    return message


async def with_retries(
    attempt: Callable[[], AsyncGenerator[ProviderEvent, None]],
    *,
    provider: str,
    key_env: str,
    model: str,
    classify: Callable[[Exception], Failure | None],
    policy: RetryPolicy = DEFAULT_RETRY,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    endpoint: str | None = None,
) -> AsyncIterator[ProviderEvent]:
    """Run ``attempt`` (one streamed request) until it completes, retrying transient failures.

    ``classify`` maps an exception to a :class:`Failure`, or ``None`` for one that is not an
    API error (a bug), which propagates unchanged. ``endpoint`` is the configured base URL
    (``None``: the provider's public API), named when it cannot be reached.
    """
    for number in range(1, policy.max_attempts + 1):
        started_output = False
        try:
            async with aclosing(attempt()) as events:
                async for event in events:
                    if not isinstance(event, (ApiRetry, ResponseDone)):
                        started_output = True
                    yield event
            return
        except ProviderError:
            raise
        except StreamRejected as exc:
            raise ProviderError(f"{provider} API error: {exc}") from None
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
        match failure.kind:
            case "auth":
                raise ProviderError(
                    f"invalid API key for {provider}: set {key_env} or "
                    f"providers.{provider}.api_key_env (HTTP {failure.summary})",
                    status=failure.status,
                )
            case "fatal":
                raise ProviderError(_fatal_message(provider, failure, model), status=failure.status)
            case "too_long":
                raise PromptTooLong(
                    f"{provider} API error: {failure.summary} (the conversation no longer "
                    "fits the model's context window)",
                    tokens=failure.tokens,
                    limit=failure.limit,
                )
            case "transient":
                if started_output:
                    raise ProviderError(
                        f"{provider} response broke off after part of it was shown "
                        f"({failure.summary}); the partial response was discarded, try again",
                        status=failure.status,
                    )
                if number == policy.max_attempts:
                    hint = _unreachable_hint(provider, endpoint) if failure.unreachable else ""
                    raise ProviderError(
                        f"{provider} API request failed after {number} attempts: "
                        f"{failure.summary}{hint}",
                        status=failure.status,
                    )
                delay = policy.delay(number, failure.retry_after)
                yield ApiRetry(
                    attempt=number + 1,
                    max_attempts=policy.max_attempts,
                    delay_s=round(delay, 3),
                    error=failure.summary,
                    status=failure.status,
                )
                await sleep(delay)
            case _:
                assert_never(failure.kind)
