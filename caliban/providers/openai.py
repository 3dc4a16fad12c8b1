"""The OpenAI Chat Completions provider (streaming), over HTTP without the ``openai`` SDK.

It speaks to OpenAI or to any OpenAI-compatible server given by base URL (llama.cpp's
``llama-server``, vLLM, Ollama, LM Studio, OpenRouter). Stream quirks of those servers are
absorbed by :class:`~caliban.providers.accumulate.ChatStreamAccumulator`.

Translation notes:

- Tool results become ``role: "tool"`` messages right after the assistant message; an error
  result's text is prefixed with ``Error:`` (the format has no ``is_error``). Tool messages
  carry text only, so images from a tool result follow in a ``user`` message, with a note in
  the tool message saying so.
- Requests to OpenAI itself send ``max_completion_tokens``; requests to another base URL send
  the older ``max_tokens``, which every compatible server understands. A server that rejects
  ``max_tokens`` in favour of ``max_completion_tokens`` (a proxy in front of OpenAI) is asked
  again with the other name, which is then kept for the rest of the session.
- When a server sends no ``usage``, it is estimated from the characters sent and received.
- ``reasoning_effort`` is sent only with an effort level (``--effort``); a server that
  rejects it with a 400 naming it is asked again without it, for the rest of the session.
  Reasoning a server streams back (``reasoning_content`` / ``reasoning``) is shown as
  thinking and kept in the history, but never sent back, and neither is any other
  :class:`ThinkingPart`.
- A stream must end with a ``finish_reason`` and ``data: [DONE]``; one that stops before
  either was cut short and is retried, or reported when part of it was already shown.
- The context window of a model on a custom base URL is asked of the server once per model
  (:meth:`OpenAIProvider.refresh_context_window`, :mod:`caliban.providers.windows`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from caliban.messages import (
    ImagePart,
    Message,
    ServerToolPart,
    TextPart,
    ThinkingPart,
    ToolResult,
    ToolSpec,
    Usage,
)
from caliban.providers._lazy import LazyClientProvider
from caliban.providers.accumulate import ChatStreamAccumulator
from caliban.providers.base import Effort, ProviderEvent, ProviderRequest, ResponseDone
from caliban.providers.body import Piece, RequestBody, chars, dumps, json_object
from caliban.providers.history import EncodedHistory, EncodedTools, normalize
from caliban.providers.retry import (
    Failure,
    IncompleteStream,
    classify_status,
    one_line,
    with_retries,
)
from caliban.util.background import start_in_daemon_thread
from caliban.util.tokens import CHARS_PER_TOKEN_TEXT, estimate_json_tokens, estimate_tokens

if TYPE_CHECKING:
    from caliban.providers.openai_http import ChatClient

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
PROBE_TIMEOUT: Final = 3.0
"""Seconds for one context-window question to the server, and for all of them together."""
MAX_PROBE_BYTES: Final = 8 * 1024 * 1024

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------- request


@dataclass(frozen=True, kw_only=True, slots=True)
class EncodedRequest:
    """A Chat Completions request body, and what a usage estimate reads."""

    body: RequestBody
    sent_chars: int
    """Characters of the messages and tools sent (for :func:`estimate_usage`)."""


class RequestEncoder:
    """Chat Completions request bodies for one provider's requests (streaming, with usage).

    Each history message and each tool definition is translated and encoded once
    (:class:`~caliban.providers.history.EncodedHistory`), and the body is sent in chunks
    of these bytes (:mod:`caliban.providers.body`), so a turn's cost does not grow with the
    history beyond the bytes sent.
    """

    def __init__(self) -> None:
        self.history = EncodedHistory()
        self.tools = EncodedTools(wire_tool)

    def encode(
        self,
        request: ProviderRequest,
        *,
        token_limit_key: str = "max_completion_tokens",
        effort: Effort | None = None,
    ) -> EncodedRequest:
        system = [dumps({"role": "system", "content": request.system})] if request.system else []
        history = self.history.encode(request.messages, _convert_run)
        messages = history.json_array(first=system)
        fields: list[tuple[str, Piece | list[Piece]]] = [
            ("model", dumps(request.model)),
            ("messages", messages),
            ("stream", "true"),
            ("stream_options", '{"include_usage":true}'),
            (token_limit_key, dumps(request.max_tokens)),
        ]
        tools: list[Piece] = []
        if request.tools:
            tools = ["[", self.tools.encode(request.tools), "]"]
            fields.append(("tools", tools))
        if effort is not None:
            fields.append(("reasoning_effort", dumps(effort)))
        return EncodedRequest(
            body=RequestBody.of(json_object(fields)), sent_chars=chars(messages) + chars(tools)
        )


def build_params(
    request: ProviderRequest,
    *,
    token_limit_key: str = "max_completion_tokens",
    effort: Effort | None = None,
) -> dict[str, Any]:
    """The request body :class:`RequestEncoder` sends for ``request``, decoded."""
    encoded = RequestEncoder().encode(request, token_limit_key=token_limit_key, effort=effort)
    params: dict[str, Any] = encoded.body.decoded()
    return params


def is_openai_endpoint(base_url: str | None) -> bool:
    """True for OpenAI's own API (no base URL, or one on api.openai.com)."""
    if base_url is None:
        return True
    host = urllib.parse.urlsplit(base_url).hostname or ""
    return host == "api.openai.com"


def wire_tool(tool: ToolSpec) -> dict[str, Any]:
    schema = dict(tool.input_schema) or {"type": "object", "properties": {}}
    schema.setdefault("type", "object")
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": schema},
    }


def _convert_run(run: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages of one role in wire form (a user message with tool results becomes ``tool``
    messages, then a user message for the rest)."""
    wire: list[dict[str, Any]] = []
    for message in normalize(_without_thinking(run)):
        if message.role == "assistant":
            wire.append(_assistant(message))
        else:
            wire.extend(_user(message))
    return wire


def _without_thinking(messages: Sequence[Message]) -> list[Message]:
    """The history without reasoning and another provider's server-tool blocks: Chat
    Completions has no field for sending them back."""
    dropped = (ThinkingPart, ServerToolPart)
    return [
        Message(role=m.role, parts=tuple(p for p in m.parts if not isinstance(p, dropped)))
        if any(isinstance(p, dropped) for p in m.parts)
        else m
        for m in messages
    ]


def _assistant(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if calls := message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
            }
            for call in calls
        ]
    return wire


def _user(message: Message) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    content: list[TextPart | ImagePart] = []
    for part in message.parts:
        if isinstance(part, ToolResult):
            images = [p for p in part.content if isinstance(p, ImagePart)]
            wire.append(
                {"role": "tool", "tool_call_id": part.tool_call_id, "content": _result_text(part)}
            )
            content.extend(images)
        elif isinstance(part, (TextPart, ImagePart)):
            content.append(part)
    if content:
        wire.append({"role": "user", "content": _user_content(content)})
    return wire


def _result_text(result: ToolResult) -> str:
    text = result.text or "(no output)"
    if result.is_error and not text.lower().startswith("error"):
        text = f"Error: {text}"
    if images := sum(isinstance(p, ImagePart) for p in result.content):
        text += f"\n[{images} image(s) from this result follow in the next user message]"
    return text


def _user_content(parts: Sequence[TextPart | ImagePart]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in parts):
        return "\n\n".join(p.text for p in parts if isinstance(p, TextPart))
    return [
        {"type": "text", "text": p.text}
        if isinstance(p, TextPart)
        else {"type": "image_url", "image_url": {"url": f"data:{p.media_type};base64,{p.data}"}}
        for p in parts
    ]


def estimate_usage(sent_chars: int, message: Message) -> Usage:
    """Token counts for a server that reported none, estimated from characters."""
    sent = math.ceil(sent_chars / CHARS_PER_TOKEN_TEXT)
    received = estimate_tokens(message.text) + sum(
        estimate_json_tokens([call.name, dict(call.arguments)]) for call in message.tool_calls
    )
    return Usage(input_tokens=sent, output_tokens=received)


# ---------------------------------------------------------------------------- provider


class OpenAIProvider(LazyClientProvider["ChatClient"]):
    """Streams responses from OpenAI or an OpenAI-compatible Chat Completions endpoint."""

    name = "openai"
    default_key_env = DEFAULT_KEY_ENV

    @functools.cached_property
    def token_limit_key(self) -> str:
        """``max_completion_tokens`` for OpenAI's own API, ``max_tokens`` elsewhere; switched
        when a server rejects the parameter itself."""
        return "max_completion_tokens" if is_openai_endpoint(self.base_url) else "max_tokens"

    @functools.cached_property
    def send_effort(self) -> bool:
        """False once the server rejected ``reasoning_effort``."""
        return self.effort is not None

    def _create_client(self) -> ChatClient:
        import os

        from caliban.providers.openai_http import ChatClient, account_headers

        return ChatClient(
            base_url=self.base_url,
            api_key=self.api_key,
            timeout=self.timeout,
            limits=self.limits,
            extra_headers=account_headers(os.environ),
        )

    @functools.cached_property
    def _encoder(self) -> RequestEncoder:
        return RequestEncoder()

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        events = with_retries(
            lambda: self._attempt(request),
            provider=self.name,
            key_env=self.key_env,
            model=request.model,
            classify=classify,
            policy=self.retry,
            endpoint=self.base_url,
        )
        return self._learn_window(request.model, events)

    async def _attempt(self, request: ProviderRequest) -> AsyncGenerator[ProviderEvent, None]:
        from caliban.providers.http import ApiStatusError

        accumulator = ChatStreamAccumulator(limits=self.limits)
        client = self.client()
        try:
            sent, chunks = self._post(client, request)
            first = await anext(chunks, None)
        except ApiStatusError as exc:
            if exc.status != 400:
                raise
            if self.send_effort and _rejects(exc, "reasoning_effort"):
                self.send_effort = False
            elif self.token_limit_key == "max_tokens" and _rejects(exc, "max_tokens"):
                self.token_limit_key = "max_completion_tokens"
            else:
                raise
            sent, chunks = self._post(client, request)
            first = await anext(chunks, None)
        async with aclosing(chunks):
            if first is not None:
                for shown in accumulator.feed(first):
                    yield shown
            async for chunk in chunks:
                for shown in accumulator.feed(chunk):
                    yield shown
        if accumulator.chunks == 0:
            raise IncompleteStream("the server sent no data")
        message, usage, stop = accumulator.finish()
        yield ResponseDone(
            message=message, usage=usage or estimate_usage(sent, message), stop_reason=stop
        )

    def _post(
        self, client: ChatClient, request: ProviderRequest
    ) -> tuple[int, AsyncGenerator[Mapping[str, Any], None]]:
        """The request's chunks (sent on the first read), and how many characters of
        messages and tools it sends."""
        encoded = self._encoder.encode(
            request,
            token_limit_key=self.token_limit_key,
            effort=self.effort if self.send_effort else None,
        )
        return encoded.sent_chars, client.chunks(encoded.body)

    async def _probe_window(self, model: str) -> int | None:
        from caliban.providers.windows import known_context_window, probe_openai_compatible

        if self.base_url is None or is_openai_endpoint(self.base_url):
            return None  # the built-in table knows OpenAI's models
        if known_context_window(self.name, model) is not None:
            return None  # Claude or GPT behind a gateway: the table knows, skip the traffic

        # The client (its import under way in warm_up) is not the server's time: wait for it
        # first, in a daemon thread so the loop never blocks and exit never waits.
        client = self._client
        if client is None:
            client = await start_in_daemon_thread(self.client, name="caliban-http")
        ready = client

        async def fetch(method: str, url: str, body: Mapping[str, Any] | None) -> Any:
            return await ready.fetch_json(method, url, body, limit=MAX_PROBE_BYTES)

        try:
            async with asyncio.timeout(PROBE_TIMEOUT):
                return await probe_openai_compatible(fetch, self.base_url, model)
        except TimeoutError:
            log.info("context window of %s: no answer from %s in time", model, self.base_url)
            return None


def _rejects(exc: Exception, parameter: str) -> bool:
    """Whether a 400 says ``parameter`` is not accepted at all (not that its value is off:
    vLLM's "'max_tokens' ... is too large" must not switch to max_completion_tokens)."""
    text = str(exc).lower()
    return parameter in text and any(
        word in text for word in ("unsupported", "not supported", "unrecognized", "unknown")
    )


def classify(exc: Exception) -> Failure | None:
    """A Chat Completions, transport or in-stream exception as a :class:`Failure`; None if
    none of those."""
    from caliban.providers.http import classify as classify_http
    from caliban.providers.openai_http import ChatStreamError

    if isinstance(exc, ChatStreamError):
        return _stream_error(exc.error, exc.message)
    return classify_http(exc)


def _stream_error(body: object, message: str) -> Failure:
    code = body.get("code") if isinstance(body, Mapping) else None
    kind = body.get("type") if isinstance(body, Mapping) else None
    try:
        status = int(code) if code is not None else None
    except (TypeError, ValueError):
        status = None
    if status is not None and 400 <= status < 600:
        return classify_status(
            status, error_type=str(kind) if kind else None, message=message, code=str(code)
        )
    transient = any(
        word in f"{code} {kind}".lower() for word in ("server", "overload", "rate", "timeout")
    )
    return Failure(kind="transient" if transient else "fatal", summary=one_line(message))
