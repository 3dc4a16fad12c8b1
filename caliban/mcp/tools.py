"""MCP tools as caliban :class:`~caliban.tools.base.Tool` values: naming and result conversion.

A server's tool ``search_issues`` on server ``github`` goes on the wire as
``mcp__github__search_issues``. Its input schema is passed through unchanged; calls are
dispatched to the server under the original name. This module does not import the MCP SDK at
run time (results are read duck-typed), so the wire filter and the session can use it without
paying for the SDK import.

What a server writes reaches the model marked as that server's data, and the system prompt
tells the model not to follow instructions found there. A tool definition is marked once for
all: its description is a field of its own, under an ``mcp__server__`` name, and the system
prompt says whose words such descriptions are (no per-tool tags, which made eager definitions
6–11% larger than Claude Code's). Wherever a server's text is embedded in other text — its
results, a description quoted in a ToolSearch answer or an error — it sits inside
``<mcp-data server="…">`` tags (:func:`mark_data`, :func:`marked_spec`).

Results are bounded: text over ``MAX_MCP_OUTPUT_TOKENS`` (default 25,000, as in Claude Code) is
cut with a note, and images over the size Read accepts, or whose data is not base64, are
replaced by a line saying so.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, assert_never

from caliban.calls.effects import Effects, McpServer
from caliban.mcp.results import (
    CALL_FAILURES,
    CallFailed,
    CallFailure,
    CallOutcome,
    CallTimedOut,
    ConnectionLost,
    ServerDisabled,
    ServerError,
    ServerUnavailable,
    UnknownServer,
)
from caliban.messages import ImagePart, ResultPart, TextPart, ToolSpec
from caliban.tools.base import (
    CallContext,
    McpOrigin,
    Preview,
    ToolEnv,
    ToolOutput,
    json_preview,
)
from caliban.util.text import clipped
from caliban.util.tokens import CHARS_PER_TOKEN_TEXT

if TYPE_CHECKING:
    import mcp_types

    from caliban.tools.base import Tool

PREFIX = "mcp__"
ALWAYS_LOAD_META = "anthropic/alwaysLoad"
"""The ``_meta`` key with which a server asks that a tool never be deferred."""
MAX_NAME = 64
MAX_WIRE_DESCRIPTION = 16_000
"""Characters of a tool's description the model is sent with every request. A bound keeps
a server from adding a megabyte to each one; Claude Code's 2,048 cuts off the function
lists that code-execution tools keep there (claude-code #41593), so caliban's is larger."""
_HASH_CHARS = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def sanitize(part: str) -> str:
    """``part`` with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``."""
    return _UNSAFE.sub("_", part) or "_"


@functools.lru_cache(maxsize=256)
def wire_prefix(server: str) -> str:
    """``mcp__<server>__``: how every wire name of ``server``'s tools begins (asked once
    per tool of a catalog, 10,000 times for a large one)."""
    return f"{PREFIX}{sanitize(server)}__"


def wire_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, at most 64 characters.

    Longer names are truncated and end with ``_`` and 8 hex digits of the SHA-1 of the full
    original name, so they stay readable, distinct and the same from run to run.
    """
    name = f"{wire_prefix(server)}{sanitize(tool)}"
    if len(name) <= MAX_NAME:
        return name
    return _hashed(name[: MAX_NAME - _HASH_CHARS - 1], f"{PREFIX}{server}__{tool}")


def _hashed(stem: str, original: str) -> str:
    digest = hashlib.sha1(original.encode("utf-8")).hexdigest()[:_HASH_CHARS]
    return f"{stem[: MAX_NAME - _HASH_CHARS - 1]}_{digest}"


def hashed_name(name: str, server: str, tool: str) -> str:
    """``name`` made distinct: shortened if need be, then ``_`` and a hash of the original."""
    return _hashed(name, f"{PREFIX}{server}__{tool}")


def unique_wire_names(server: str, tools: list[str]) -> list[str]:
    """Wire names for one server's tools; names that collide after sanitising get a hash."""
    names = [wire_name(server, tool) for tool in tools]
    seen: set[str] = set()
    for i, (tool, name) in enumerate(zip(tools, names, strict=True)):
        if name in seen:
            names[i] = hashed_name(name, server, tool)
        seen.add(names[i])
    return names


class McpDispatcher(Protocol):
    """What an :class:`McpTool` calls; :class:`caliban.mcp.client.McpManager` implements it."""

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        timeout: float | None = None,  # noqa: ASYNC109 - the server's tool_timeout
    ) -> CallOutcome: ...


@dataclass(frozen=True, kw_only=True)
class McpTool:
    """One tool of one MCP server, as the agent loop sees it."""

    server: str
    tool_name: str
    """The name the server knows it by."""
    name: str
    """The wire name, ``mcp__<server>__<tool>``."""
    description: str
    input_schema: Mapping[str, Any]
    annotations: Mapping[str, Any] | None = None
    title: str | None = None
    timeout: float | None = None
    """Seconds a call may take (the server's ``tool_timeout``)."""
    always_load: bool = False
    """The server marked the tool ``_meta["anthropic/alwaysLoad"]``: it stays on the wire
    under lazy loading, as Claude Code keeps it loaded under tool search."""
    dispatcher: McpDispatcher | None = field(default=None, compare=False, repr=False)

    @property
    def read_only(self) -> bool:
        """From the server's ``readOnlyHint`` annotation; False when absent, or when the
        server also says it is destructive (the stricter word wins)."""
        return self._hint("readOnlyHint") and not self.destructive

    @property
    def destructive(self) -> bool:
        """From the server's ``destructiveHint`` annotation; False when absent, as in
        Claude Code (the protocol's default, true, would mark nearly every tool)."""
        return self._hint("destructiveHint")

    def _hint(self, name: str) -> bool:
        return (self.annotations or {}).get(name) is True

    @functools.cached_property
    def spec(self) -> ToolSpec:
        description = self.description
        if len(description) > MAX_WIRE_DESCRIPTION:
            cut = len(description) - MAX_WIRE_DESCRIPTION
            description = (
                f"{description[:MAX_WIRE_DESCRIPTION]}\n… [{cut:,} more characters cut by caliban]"
            )
        return ToolSpec(name=self.name, description=description, input_schema=self.input_schema)

    @functools.cached_property
    def marked_description(self) -> str:
        """The wire description marked as the server's data (:func:`mark_data`), for text
        where it is not a tool definition's own field: a ToolSearch answer, an error."""
        description = self.spec.description
        return mark_data(description, server=self.server) if description else ""

    @functools.cached_property
    def origin(self) -> McpOrigin:
        return McpOrigin(server=self.server, tool=self.tool_name)

    def bind(self, arguments: Mapping[str, Any]) -> McpInvocation:
        """MCP servers validate their own arguments: every call binds."""
        return McpInvocation(tool=self, arguments=arguments)

    async def call(self, arguments: Mapping[str, Any], ctx: CallContext) -> ToolOutput:
        """Run without a permission check (tests and internal callers)."""
        return await self.bind(arguments).run(ctx)


@dataclass(frozen=True, kw_only=True, slots=True)
class McpInvocation:
    tool: McpTool
    arguments: Mapping[str, Any]

    @property
    def subject(self) -> str | None:
        return None

    def effects(self, cwd: Path) -> Effects:
        return Effects(reaches=(McpServer(self.tool.server),), destructive=self.tool.destructive)

    def preview(self, env: ToolEnv) -> Preview:
        return json_preview(self.arguments)

    async def run(self, ctx: CallContext) -> ToolOutput:
        tool = self.tool
        if tool.dispatcher is None:
            return ToolOutput.error(f"{tool.name}: not connected to MCP server {tool.server!r}")
        outcome = await tool.dispatcher.call_tool(
            tool.server, tool.tool_name, self.arguments, timeout=tool.timeout
        )
        return call_output(outcome, server=tool.server, tool=tool.tool_name)


def tool_from_sdk(
    server: str,
    tool: mcp_types.Tool,
    *,
    wire: str | None = None,
    timeout: float | None = None,
    dispatcher: McpDispatcher | None = None,
) -> McpTool:
    """An :class:`McpTool` for an SDK ``Tool`` listed by ``server``."""
    annotations = (
        tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
    )
    return McpTool(
        server=server,
        tool_name=tool.name,
        name=wire or wire_name(server, tool.name),
        description=tool.description or "",
        input_schema=tool.input_schema,
        annotations=annotations,
        title=tool.title,
        timeout=timeout,
        always_load=(tool.meta or {}).get(ALWAYS_LOAD_META) is True,
        dispatcher=dispatcher,
    )


# ---------------------------------------------------------------------------- results


def _human_size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def _b64_size(data: str) -> int:
    stripped = data.rstrip("=")
    return len(stripped) * 3 // 4


def media_placeholder(kind: str, media_type: str, data: str, what: str = "") -> str:
    """``[image image/png, 12.3 KB]``: what stands in for binary content that cannot be sent."""
    label = f"{kind} {what}".strip()
    return f"[{label} {media_type}, {_human_size(_b64_size(data))}]"


def image_placeholder(part: ImagePart) -> str:
    """A text stand-in for an image, for providers that take no images in tool results."""
    return media_placeholder("image", part.media_type, part.data)


_TEXT_TYPES = ("application/json", "application/xml", "application/yaml", "application/x-yaml")


def _text_blob(mime: str, blob: str) -> str | None:
    """A binary resource that is text by its type (``text/*``, JSON, XML, YAML) and decodes
    as UTF-8, as text the model can read; None otherwise."""
    base = mime.split(";", 1)[0].strip().lower()
    if not (base.startswith("text/") or base in _TEXT_TYPES or base.endswith("+json")):
        return None
    try:
        return base64.b64decode(blob, validate=True).decode("utf-8")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return None


def _content_part(block: Any) -> ResultPart:
    kind = getattr(block, "type", None)
    if kind == "text":
        return TextPart(text=block.text)
    if kind == "image":
        return ImagePart(media_type=block.mime_type, data=block.data)
    if kind == "audio":
        return TextPart(text=media_placeholder("audio", block.mime_type, block.data))
    if kind == "resource":
        resource = block.resource
        uri = str(resource.uri)
        mime = resource.mime_type or "application/octet-stream"
        text = getattr(resource, "text", None)
        if text is not None:
            return TextPart(text=text)
        blob = getattr(resource, "blob", "")
        if mime.startswith("image/"):
            return ImagePart(media_type=mime, data=blob)
        if (text := _text_blob(mime, blob)) is not None:
            return TextPart(text=text)
        return TextPart(text=media_placeholder("resource", mime, blob, uri))
    if kind == "resource_link":
        described = f": {block.description}" if getattr(block, "description", None) else ""
        return TextPart(text=f"[resource link {block.name} {block.uri}{described}]")
    return TextPart(text=f"[unsupported content type {kind!r}]")


DATA_TAG = "mcp-data"
DEFAULT_MAX_OUTPUT_TOKENS = 25_000
MAX_OUTPUT_TOKENS_ENV = "MAX_MCP_OUTPUT_TOKENS"
MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""The largest MCP image sent to the model, decoded (the same limit as Read's)."""
MAX_RESULT_IMAGES = 20
"""The most images one MCP result sends to the model; the rest are counted in a line."""
MAX_RESULT_IMAGE_BYTES = 10 * 1024 * 1024
"""The most image data (decoded) one MCP result sends to the model."""
_CLOSING = re.compile(rf"<\s*/\s*{DATA_TAG}", re.IGNORECASE)


def mark_data(text: str, *, server: str, tool: str | None = None) -> str:
    """``text`` inside ``<mcp-data server="…" tool="…">`` tags: what an MCP server wrote,
    marked as data from that server. Deterministic (the same text gives the same bytes, so
    a prompt built from it stays cacheable); a closing tag inside ``text`` is defused so
    the server cannot end the block early."""
    return f"{_open_tag(server, tool)}\n{_defuse(text)}\n</{DATA_TAG}>"


_TAGS = re.compile(rf"^<{DATA_TAG}(?: [a-z]+=\"[^\"]*\")*>\n?|\n?</{DATA_TAG}>$", re.MULTILINE)


def marked_spec(tool: Tool) -> ToolSpec:
    """``tool``'s spec with an MCP tool's description marked as its server's data: for a
    definition quoted inside text, never for the wire's tool list."""
    if isinstance(tool, McpTool):
        return replace(tool.spec, description=tool.marked_description)
    return tool.spec


def unmark(text: str) -> str:
    """``text`` without :func:`mark_data`'s tag lines, for showing to the user."""
    return _TAGS.sub("", text)


def _open_tag(server: str, tool: str | None) -> str:
    attrs = f' server="{html.escape(server)}"'
    if tool is not None:
        attrs += f' tool="{html.escape(tool)}"'
    return f"<{DATA_TAG}{attrs}>"


def _defuse(text: str) -> str:
    return _CLOSING.sub(f"<\\/{DATA_TAG}", text)


def max_output_tokens(environ: Mapping[str, str] | None = None) -> int:
    """The token budget of one MCP result: ``$MAX_MCP_OUTPUT_TOKENS`` (Claude Code's
    variable), else 25,000. A value that is not a positive integer is ignored."""
    raw = (os.environ if environ is None else environ).get(MAX_OUTPUT_TOKENS_ENV, "")
    try:
        value = int(raw)
    except ValueError:
        return DEFAULT_MAX_OUTPUT_TOKENS
    return value if value > 0 else DEFAULT_MAX_OUTPUT_TOKENS


def convert_result(
    result: mcp_types.CallToolResult,
    *,
    server: str,
    tool: str,
    max_tokens: int | None = None,
) -> ToolOutput:
    """A tool result the model can read: text joined, images kept, other media as placeholders,
    all marked as ``server``'s data (:func:`mark_data`).

    Structured content is added as JSON text when the server sent no text of its own (servers
    usually send both, the text being the same data serialised). Text over ``max_tokens``
    (default :func:`max_output_tokens`) is cut with a note; oversized or malformed images are
    replaced by a line saying why.
    """
    parts: list[ResultPart] = []
    images, image_bytes, dropped = 0, 0, 0
    for block in result.content:
        part = _checked_image(_content_part(block))
        if isinstance(part, ImagePart):
            size = _b64_size(part.data)
            if images >= MAX_RESULT_IMAGES or image_bytes + size > MAX_RESULT_IMAGE_BYTES:
                dropped += 1
                continue
            images, image_bytes = images + 1, image_bytes + size
        if isinstance(part, TextPart) and parts and isinstance(parts[-1], TextPart):
            parts[-1] = TextPart(text=f"{parts[-1].text}\n{part.text}")
        else:
            parts.append(part)
    if dropped:
        parts.append(
            TextPart(
                text=f"[{dropped:,} more image{'s' if dropped != 1 else ''} not shown: one result "
                f"carries at most {MAX_RESULT_IMAGES} images and "
                f"{_human_size(MAX_RESULT_IMAGE_BYTES)} of them]"
            )
        )
    if result.structured_content is not None and not any(isinstance(p, TextPart) for p in parts):
        structured = json.dumps(result.structured_content, ensure_ascii=False, indent=2)
        parts.insert(0, TextPart(text=structured))
    if not parts:
        parts.append(TextPart(text="(no output)" if not result.is_error else "(error, no details)"))
    summary = _summary(parts)
    limit = max_output_tokens() if max_tokens is None else max_tokens
    parts, note = _cap_text(parts, limit, tool)
    marked = _marked(parts, server=server, tool=tool)
    if note:
        marked.append(TextPart(text=note))
    as_data: dict[str, Any] | None = None
    if result.structured_content is not None:
        # What Claude Code reports as the call's tool_use_result (caliban -p prints it).
        compact = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
        budget = int(limit * CHARS_PER_TOKEN_TEXT)
        if len(compact) <= budget:
            as_data = {"content": compact, "structuredContent": result.structured_content}
        else:  # bounded like the text: `-p` would print tens of megabytes, twice
            as_data = {"content": f"{compact[:budget]}…", "truncated": True}
    return ToolOutput(
        content=tuple(_joined(marked)), is_error=result.is_error, summary=summary, data=as_data
    )


MAX_ERROR_CHARS = 2_000
"""How much of a server's JSON-RPC error message (or of why a call failed) reaches the model."""


def call_output(outcome: CallOutcome, *, server: str, tool: str) -> ToolOutput:
    """The model's tool result for a call's outcome: the server's result converted
    (:func:`convert_result`), or an error saying why there is none (:func:`failure_text`)."""
    if isinstance(outcome, CALL_FAILURES):
        return ToolOutput.error(failure_text(outcome))
    return convert_result(outcome, server=server, tool=tool)


def failure_text(failure: CallFailure) -> str:
    """Why a call has no result, for the model: what happened and what happens next."""
    match failure:
        case UnknownServer(server=server):
            return f"Unknown MCP server {server!r}."
        case ServerDisabled(server=server):
            return f"MCP server {server!r} is disabled in its configuration."
        case ServerUnavailable(server=server, reason=reason, stderr_tail=tail):
            lines = [f"MCP server {server!r} is not available: {reason}."]
            if tail:
                lines.append("Its last stderr lines:")
                lines.extend(f"  {line}" for line in tail[-5:])
            return "\n".join(lines)
        case CallTimedOut(server=server, tool=tool, seconds=seconds):
            return (
                f"Tool {tool!r} on MCP server {server!r} timed out after {seconds:g}s; "
                "it may still be running on the server (the limit is tool_timeout in mcp.toml)."
            )
        case ConnectionLost(server=server, tool=tool, violation=None):
            return (
                f"MCP server {server!r} closed the connection during the call to {tool!r} "
                "(it may have crashed); caliban will restart it on the next call."
            )
        case ConnectionLost(server=server, tool=tool, violation=violation):
            how = (
                "stopped it and will restart it"
                if failure.restarts_process
                else "closed the connection and will open it again"
            )
            return (
                f"MCP server {server!r} {violation} during the call to {tool!r}; "
                f"caliban {how} on the next call."
            )
        case ServerError(server=server, tool=tool, code=code, message=message):
            # The message is the server's words: bounded, and marked as its data.
            return f"MCP server {server!r} rejected {tool!r} (error {code}):\n" + mark_data(
                clipped(message, MAX_ERROR_CHARS), server=server, tool=tool
            )
        case CallFailed(server=server, tool=tool, detail=detail):
            return f"Calling {tool!r} on MCP server {server!r} failed: " + clipped(
                detail, MAX_ERROR_CHARS
            )
        case _:
            assert_never(failure)


def _checked_image(part: ResultPart) -> ResultPart:
    if not isinstance(part, ImagePart):
        return part
    size = _b64_size(part.data)
    if size > MAX_IMAGE_BYTES:
        return TextPart(
            text=f"[image {part.media_type}, {_human_size(size)}: not shown, over the "
            f"{_human_size(MAX_IMAGE_BYTES)} limit for images]"
        )
    try:
        base64.b64decode(part.data, validate=True)
    except ValueError:
        return TextPart(text=f"[image {part.media_type}: not shown, its data is not base64]")
    return part


def _cap_text(parts: list[ResultPart], max_tokens: int, tool: str) -> tuple[list[ResultPart], str]:
    """The parts with their text cut at ``max_tokens`` (estimated), and the note saying so."""
    budget = max_tokens * CHARS_PER_TOKEN_TEXT
    total = sum(len(p.text) for p in parts if isinstance(p, TextPart))
    if total <= budget:
        return parts, ""
    kept: list[ResultPart] = []
    left = int(budget)
    for part in parts:
        if isinstance(part, TextPart):
            if left <= 0:
                continue
            part = TextPart(text=part.text[:left])
            left -= len(part.text)
        kept.append(part)
    note = (
        f"[MCP output cut: the result was about {math.ceil(total / CHARS_PER_TOKEN_TEXT):,} "
        f"tokens, over the {max_tokens:,}-token limit ({MAX_OUTPUT_TOKENS_ENV}). Ask {tool} "
        "for less: a narrower query, a smaller page, a limit.]"
    )
    return kept, note


def _marked(parts: list[ResultPart], *, server: str, tool: str) -> list[ResultPart]:
    """The parts between the opening and the closing tag of :func:`mark_data`."""
    inner = [TextPart(text=_defuse(p.text)) if isinstance(p, TextPart) else p for p in parts]
    return [
        TextPart(text=_open_tag(server, tool)),
        *inner,
        TextPart(text=f"</{DATA_TAG}>"),
    ]


def _joined(parts: list[ResultPart]) -> list[ResultPart]:
    """Adjacent text parts joined by a newline (one text block per run of text)."""
    joined: list[ResultPart] = []
    for part in parts:
        if isinstance(part, TextPart) and joined and isinstance(joined[-1], TextPart):
            joined[-1] = TextPart(text=f"{joined[-1].text}\n{part.text}")
        else:
            joined.append(part)
    return joined


def _summary(parts: list[ResultPart]) -> str | None:
    text = "\n".join(p.text for p in parts if isinstance(p, TextPart))
    images = sum(1 for p in parts if isinstance(p, ImagePart))
    bits = []
    if text:
        lines = text.count("\n") + 1
        bits.append(f"{lines} line{'s' if lines != 1 else ''}")
    if images:
        bits.append(f"{images} image{'s' if images != 1 else ''}")
    return ", ".join(bits) or None


__all__ = [
    "ALWAYS_LOAD_META",
    "MAX_ERROR_CHARS",
    "MAX_NAME",
    "McpDispatcher",
    "McpInvocation",
    "McpTool",
    "call_output",
    "convert_result",
    "failure_text",
    "hashed_name",
    "image_placeholder",
    "mark_data",
    "marked_spec",
    "max_output_tokens",
    "media_placeholder",
    "sanitize",
    "tool_from_sdk",
    "unique_wire_names",
    "unmark",
    "wire_name",
    "wire_prefix",
]
