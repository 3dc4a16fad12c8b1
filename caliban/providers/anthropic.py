"""The Anthropic Messages API provider (streaming), over HTTP without the ``anthropic`` SDK.

This module knows the wire format: it encodes request bodies (:class:`RequestEncoder`) and
builds the answer from the stream's events (:class:`MessagesStreamAccumulator`);
:mod:`caliban.providers.anthropic_http` carries them over HTTP. Its client (and ``httpx2``)
is made on the first request, or earlier by :meth:`AnthropicProvider.warm_up` in a worker
thread.

Prompt caching: the system prompt and the last content block of the newest message carry
``cache_control: {"type": "ephemeral"}``, and so does the last block of the previous user
message (where the previous request put its breakpoint), so each request reads the whole
earlier conversation from the cache and only the new turn is billed at the full rate.

Thinking: with an effort level (``--effort`` / ``model_effort``) Claude models from 4.6 on
get adaptive thinking with ``output_config.effort``; older Claude models (and other models
behind an Anthropic-compatible API) get extended thinking with a ``budget_tokens`` per level
(see :func:`thinking_params`). A model that rejects the chosen form with a 400 naming it is
asked once with the other, which is then kept for that model. ``thinking`` and
``redacted_thinking`` blocks are kept in the history with their signatures and sent back
byte for byte to the model that wrote them (the API requires them with tool use); they are
never marked for caching. Without an effort level nothing about thinking is sent.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, assert_never

from caliban.messages import (
    ImagePart,
    Message,
    Part,
    ServerToolPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from caliban.providers._lazy import LazyClientProvider
from caliban.providers.accumulate import parse_arguments
from caliban.providers.base import (
    Effort,
    ProviderEvent,
    ProviderRequest,
    ResponseDone,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
)
from caliban.providers.body import Piece, RequestBody, dumps, json_object
from caliban.providers.guard import DEFAULT_LIMITS, StreamLimits, check_part, check_parts
from caliban.providers.history import EncodedHistory, EncodedTools, WireMessage, normalize
from caliban.providers.retry import (
    IncompleteStream,
    with_retries,
)

if TYPE_CHECKING:
    from caliban.providers.anthropic_http import MessagesClient

DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
CACHE_CONTROL: Mapping[str, str] = {"type": "ephemeral"}
STOP_REASONS: Mapping[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
}
WEB_SEARCH_TOOL: Final[Mapping[str, Any]] = {
    "type": "web_search_20250305",
    "name": "web_search",
    "max_uses": 5,
}
"""The server tool offered when a request asks for web search (the API runs the searches)."""


ThinkingStyle = Literal["adaptive", "budget"]

THINKING_BUDGETS: Final[Mapping[Effort, int]] = {"low": 4_000, "medium": 12_000, "high": 24_000}
"""``budget_tokens`` per effort level (extended thinking; the API's minimum is 1,024)."""
MIN_MAX_TOKENS: Final[Mapping[Effort, int]] = {"low": 16_000, "medium": 24_000, "high": 32_000}
"""``max_tokens`` is raised to at least this with thinking on: thinking counts toward it, and
it must exceed the budget. 32,000 is the smallest output limit of a thinking Claude model."""
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


# ---------------------------------------------------------------------------- request


class RequestEncoder:
    """Messages API request bodies for one provider's requests.

    Each history message and each tool definition is translated and encoded once
    (:class:`~caliban.providers.history.EncodedHistory`); a turn encodes only what is new,
    plus the two messages that carry a cache breakpoint. The body is sent in chunks of
    these bytes (:mod:`caliban.providers.body`): no per-request copy and re-encoding of the
    whole history.
    """

    def __init__(self) -> None:
        self.history = EncodedHistory()
        self.tools = EncodedTools(wire_tool)

    def body(
        self,
        request: ProviderRequest,
        *,
        effort: Effort | None = None,
        style: ThinkingStyle | None = None,
    ) -> RequestBody:
        """The request body for ``request`` (streaming); with ``effort``, thinking in
        ``style`` (by default the one :func:`thinking_style` picks for the model)."""
        model = request.model
        convert = functools.partial(_convert_run, model=model)
        history = self.history.encode(request.messages, convert, key=model)
        wire = history.wire
        marked = {i: dumps(_mark_cached(wire[i].data)) for i in _breakpoints(wire)}
        thinking: dict[str, Any] = {}
        if effort is not None:
            thinking = thinking_params(effort, style or thinking_style(model), request.max_tokens)
        fields: list[tuple[str, Piece | list[Piece]]] = [
            ("model", dumps(model)),
            ("max_tokens", dumps(thinking.pop("max_tokens", request.max_tokens))),
            ("messages", history.json_array(replaced=marked)),
        ]
        if request.system:
            system = {"type": "text", "text": request.system, "cache_control": CACHE_CONTROL}
            fields.append(("system", dumps([system])))
        if request.tools or request.web_search:
            # The server tool first, then the toolset's (built-ins before MCP tools): an MCP
            # activation appends, so the earlier entries keep their bytes and the prompt cache.
            tools: list[Piece] = ["["]
            if request.web_search:
                tools.append(dumps(WEB_SEARCH_TOOL) + ("," if request.tools else ""))
            if request.tools:
                tools.append(self.tools.encode(request.tools))
            fields.append(("tools", [*tools, "]"]))
        fields += [(key, dumps(value)) for key, value in thinking.items()]
        fields.append(("stream", "true"))
        return RequestBody.of(json_object(fields))


def build_params(
    request: ProviderRequest, *, effort: Effort | None = None, style: ThinkingStyle | None = None
) -> dict[str, Any]:
    """The request body :class:`RequestEncoder` sends for ``request``, decoded (without
    ``stream``)."""
    body = RequestEncoder().body(request, effort=effort, style=style)
    params: dict[str, Any] = body.decoded()
    del params["stream"]
    return params


def thinking_style(model: str) -> ThinkingStyle:
    """Adaptive thinking for Claude 4.6 and later (and Claude names without a version, such
    as previews); a thinking budget for older Claude models and for other models behind an
    Anthropic-compatible API, which know only that form."""
    name = model.rsplit("/", 1)[-1].lower()
    if "claude" not in name:
        return "budget"
    # Version numbers are the 1-2 digit runs ("claude-opus-4-1-20250805": 4, 1), not dates.
    numbers = [int(n) for n in re.findall(r"(?<!\d)\d{1,2}(?!\d)", name)]
    if not numbers:
        return "adaptive"
    version = (numbers[0], numbers[1] if len(numbers) > 1 else 0)
    return "adaptive" if version >= (4, 6) else "budget"


def thinking_params(effort: Effort, style: ThinkingStyle, max_tokens: int) -> dict[str, Any]:
    """The request keys that turn thinking on at ``effort``."""
    params: dict[str, Any] = {"max_tokens": max(max_tokens, MIN_MAX_TOKENS[effort])}
    match style:
        case "adaptive":
            params["thinking"] = {"type": "adaptive"}
            params["output_config"] = {"effort": effort}
        case "budget":
            params["thinking"] = {"type": "enabled", "budget_tokens": THINKING_BUDGETS[effort]}
        case _:
            assert_never(style)
    return params


def _other_style(sent: ThinkingStyle | None, message: str) -> ThinkingStyle | None:
    """The thinking form to try when a 400 ``message`` rejects the one ``sent``."""
    text = message.lower()
    if sent == "adaptive" and any(word in text for word in ("adaptive", "output_config", "effort")):
        return "budget"
    if sent == "budget" and "thinking" in text and ("budget" in text or "enabled" in text):
        return "adaptive"
    return None


def wire_tool(tool: ToolSpec) -> dict[str, Any]:
    schema = dict(tool.input_schema) or {"type": "object", "properties": {}}
    schema.setdefault("type", "object")
    return {"name": tool.name, "description": tool.description, "input_schema": schema}


def _convert_run(run: Sequence[Message], *, model: str | None) -> list[dict[str, Any]]:
    """Messages of one role in wire form, merged. Thinking blocks go only to ``model``, the
    model that wrote them (see :class:`ThinkingPart`)."""
    sendable = (_for_model(m, model) for m in run)
    return [
        {"role": m.role, "content": [_block(part) for part in m.parts]} for m in normalize(sendable)
    ]


def _breakpoints(messages: Sequence[WireMessage]) -> list[int]:
    """The messages that carry a cache breakpoint: the newest one, and the previous user
    message (where the previous request put its own)."""
    if not messages:
        return []
    last = len(messages) - 1
    previous_user = next(
        (i for i in range(last - 1, -1, -1) if messages[i].data["role"] == "user"), None
    )
    return [last] if previous_user is None else [previous_user, last]


def _for_model(message: Message, model: str | None) -> Message:
    if not any(isinstance(p, ThinkingPart) for p in message.parts):
        return message
    parts = tuple(
        p
        for p in message.parts
        if not isinstance(p, ThinkingPart)
        or (p.model == model and (p.signature is not None or p.redacted_data is not None))
    )
    return Message(role=message.role, parts=parts)


def _mark_cached(message: Mapping[str, Any]) -> dict[str, Any]:
    """``message`` with the breakpoint on its last block that may carry one (thinking
    blocks may not)."""
    content = list(message["content"])
    for index in range(len(content) - 1, -1, -1):
        if content[index]["type"] not in THINKING_BLOCKS:
            content[index] = {**content[index], "cache_control": CACHE_CONTROL}
            break
    return {**message, "content": content}


def _block(part: Part) -> dict[str, Any]:
    match part:
        case TextPart(text=text):
            return {"type": "text", "text": text}
        case ImagePart():
            return _image(part)
        case ToolCall(id=id, name=name, arguments=arguments):
            return {"type": "tool_use", "id": id, "name": name, "input": dict(arguments)}
        case ToolResult():
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.tool_call_id}
            content = [
                _image(p) if isinstance(p, ImagePart) else {"type": "text", "text": p.text}
                for p in part.content
                if isinstance(p, ImagePart) or p.text
            ]
            if content:
                block["content"] = content
            if part.is_error:
                block["is_error"] = True
            return block
        case ThinkingPart(redacted_data=str(data)):
            return {"type": "redacted_thinking", "data": data}
        case ThinkingPart(text=text, signature=signature):
            return {"type": "thinking", "thinking": text, "signature": signature}
        case ServerToolPart(block=server_block):
            return dict(server_block)
        case _:
            assert_never(part)


def _image(part: ImagePart) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.media_type, "data": part.data},
    }


# ---------------------------------------------------------------------------- response


@dataclass(kw_only=True)
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    size: int = 0
    id: str = ""
    name: str = ""
    signature: list[str] = field(default_factory=list)
    data: str | None = None
    raw: Mapping[str, Any] | None = None
    """A server tool's result block, kept whole."""

    def add(self, piece: str, limits: StreamLimits) -> None:
        self.size += len(piece)
        what = {"tool_use": f"the arguments of tool call {self.name!r}"}.get(
            self.kind, f"a {self.kind} block"
        )
        check_part(self.size, what, limits)
        self.text.append(piece)


Shown = TextDelta | ThinkingDelta | ToolCallStarted


@dataclass(kw_only=True)
class MessagesStreamAccumulator:
    """Builds one assistant message from Messages API stream events (decoded JSON dicts).

    ``model`` is recorded on thinking blocks: the model they may be sent back to.
    """

    model: str | None = None
    limits: StreamLimits = DEFAULT_LIMITS
    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None
    stopped: bool = False

    def feed(self, event: Mapping[str, Any]) -> list[Shown]:
        """Take one event; return what to show now."""
        match event.get("type"):
            case "message_start":
                self._usage((event.get("message") or {}).get("usage"))
            case "content_block_start":
                index = int(event.get("index", len(self.blocks)))
                return self._start(index, event.get("content_block") or {})
            case "content_block_delta":
                return self._delta(int(event.get("index", 0)), event.get("delta") or {})
            case "message_delta":
                self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
                self._usage(event.get("usage"))
            case "message_stop":
                self.stopped = True
        return []

    def _usage(self, usage: Any) -> None:
        if isinstance(usage, Mapping):
            self.usage.update({k: v for k, v in usage.items() if isinstance(v, int)})

    def _start(self, index: int, block: Mapping[str, Any]) -> list[Shown]:
        kind = str(block.get("type"))
        check_parts(len(self.blocks) + 1, self.limits)
        if kind == "tool_use":
            self.blocks[index] = _Block(kind=kind, id=str(block["id"]), name=str(block["name"]))
            return [ToolCallStarted(id=str(block["id"]), name=str(block["name"]))]
        if kind == "server_tool_use":
            self.blocks[index] = _Block(kind=kind, id=str(block["id"]), name=str(block["name"]))
            return []
        if kind.endswith("_tool_result"):  # web_search_tool_result: complete at its start
            check_part(len(json.dumps(block)), f"a {kind} block", self.limits)
            self.blocks[index] = _Block(kind=kind, raw=dict(block))
            return []
        new = self.blocks[index] = _Block(kind=kind)
        match kind:
            case "text" if text := block.get("text"):
                new.add(str(text), self.limits)
                return [TextDelta(text=str(text))]
            case "thinking":
                new.signature.append(str(block.get("signature") or ""))
                if text := block.get("thinking"):
                    new.add(str(text), self.limits)
                    return [ThinkingDelta(text=str(text))]
            case "redacted_thinking":
                new.data = str(block.get("data") or "")
                check_part(len(new.data), "a redacted_thinking block", self.limits)
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[Shown]:
        block = self.blocks.get(index)
        if block is None:
            return []
        match delta.get("type"):
            case "text_delta" if block.kind == "text":
                text = str(delta.get("text") or "")
                block.add(text, self.limits)
                return [TextDelta(text=text)] if text else []
            case "thinking_delta" if block.kind == "thinking":
                text = str(delta.get("thinking") or "")
                block.add(text, self.limits)
                return [ThinkingDelta(text=text)] if text else []
            case "signature_delta" if block.kind == "thinking":
                block.signature.append(str(delta.get("signature") or ""))
                check_part(sum(map(len, block.signature)), "a thinking signature", self.limits)
            case "input_json_delta" if block.kind in ("tool_use", "server_tool_use"):
                block.add(str(delta.get("partial_json") or ""), self.limits)
        return []

    def finish(self) -> tuple[Message, Usage, StopReason]:
        """The complete message; raises :class:`IncompleteStream` if the stream was cut short."""
        if not self.stopped and self.stop_reason is None:
            raise IncompleteStream("the stream ended before message_stop")
        parts: list[Part] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.kind == "text" and (text := "".join(block.text)):
                parts.append(TextPart(text=text))
            elif block.kind == "tool_use":
                arguments = parse_arguments("".join(block.text))
                parts.append(ToolCall(id=block.id, name=block.name, arguments=arguments))
            elif block.kind == "thinking":
                signature = "".join(block.signature)
                parts.append(
                    ThinkingPart(
                        text="".join(block.text), signature=signature or None, model=self.model
                    )
                )
            elif block.kind == "redacted_thinking" and block.data is not None:
                parts.append(ThinkingPart(redacted_data=block.data, model=self.model))
            elif block.kind == "server_tool_use":
                arguments = dict(parse_arguments("".join(block.text)))
                server_call = {"type": block.kind, "id": block.id, "name": block.name}
                parts.append(ServerToolPart(block={**server_call, "input": arguments}))
            elif block.raw is not None:
                parts.append(ServerToolPart(block=block.raw))
        usage = Usage(
            input_tokens=self.usage.get("input_tokens", 0),
            output_tokens=self.usage.get("output_tokens", 0),
            cache_read_tokens=self.usage.get("cache_read_input_tokens", 0),
            cache_write_tokens=self.usage.get("cache_creation_input_tokens", 0),
        )
        stop = STOP_REASONS.get(self.stop_reason or "", "other")
        return Message(role="assistant", parts=tuple(parts)), usage, stop


# ---------------------------------------------------------------------------- provider


class AnthropicProvider(LazyClientProvider["MessagesClient"]):
    """Streams responses from the Anthropic Messages API (or a compatible endpoint), over
    :class:`~caliban.providers.anthropic_http.MessagesClient`.

    ``auth_token`` (``ANTHROPIC_AUTH_TOKEN``) is sent as a bearer token instead of the key.
    """

    name = "anthropic"
    default_key_env = DEFAULT_KEY_ENV

    def __init__(self, *, auth_token: str | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.auth_token = auth_token

    @functools.cached_property
    def _styles(self) -> dict[str, ThinkingStyle]:
        """The thinking form each model accepted after a 400 for the other one."""
        return {}

    def _create_client(self) -> MessagesClient:
        import os

        from caliban.providers.anthropic_http import (
            CUSTOM_HEADERS_ENV,
            Credential,
            MessagesClient,
            custom_headers,
        )

        if self.auth_token is not None:
            credential = Credential(secret=self.auth_token, bearer=True)
        else:
            credential = Credential(secret=self.api_key)
        return MessagesClient(
            base_url=self.base_url,
            credential=credential,
            timeout=self.timeout,
            limits=self.limits,
            extra_headers=custom_headers(os.environ.get(CUSTOM_HEADERS_ENV)),
        )

    @functools.cached_property
    def _encoder(self) -> RequestEncoder:
        return RequestEncoder()

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        from caliban.providers.http import classify

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

        model = request.model
        style = None
        if self.effort is not None:
            style = self._styles.get(model) or thinking_style(model)
        accumulator = MessagesStreamAccumulator(model=model, limits=self.limits)
        client = self.client()
        try:
            events = client.events(self._body(request, style))
            first = await anext(events, None)
        except ApiStatusError as exc:
            other = _other_style(style, exc.message or "") if exc.status == 400 else None
            if other is None:
                raise
            # Once per model: the other thinking form, kept if the model takes it.
            events = client.events(self._body(request, other))
            first = await anext(events, None)
            self._styles[model] = other
        async with aclosing(events):
            if first is not None:
                for shown in accumulator.feed(first):
                    yield shown
            async for event in events:
                for shown in accumulator.feed(event):
                    yield shown
        message, usage, stop = accumulator.finish()
        yield ResponseDone(message=message, usage=usage, stop_reason=stop)

    def _body(self, request: ProviderRequest, style: ThinkingStyle | None) -> RequestBody:
        return self._encoder.body(request, effort=self.effort, style=style)
