"""MCP tools as caliban :class:`~caliban.tools.base.Tool` values: naming and result conversion.

A server's tool ``search_issues`` on server ``github`` goes on the wire as
``mcp__github__search_issues``. Its description and input schema are passed through unchanged;
calls are dispatched to the server under the original name. This module does not import the
MCP SDK at run time (results are read duck-typed), so the wire filter and the session can use
it without paying for the SDK import.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from caliban.messages import ImagePart, ResultPart, TextPart, ToolSpec
from caliban.tools.base import (
    CallContext,
    McpOrigin,
    Preview,
    ToolEnv,
    ToolOutput,
    json_preview,
)

if TYPE_CHECKING:
    import mcp_types

PREFIX = "mcp__"
ALWAYS_LOAD_META = "anthropic/alwaysLoad"
"""The ``_meta`` key with which a server asks that a tool never be deferred."""
MAX_NAME = 64
_HASH_CHARS = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def sanitize(part: str) -> str:
    """``part`` with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``."""
    return _UNSAFE.sub("_", part) or "_"


def wire_prefix(server: str) -> str:
    """``mcp__<server>__``: how every wire name of ``server``'s tools begins."""
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
    ) -> ToolOutput: ...


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
        """From the server's ``readOnlyHint`` annotation; False when absent."""
        return bool((self.annotations or {}).get("readOnlyHint", False))

    @functools.cached_property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name, description=self.description, input_schema=self.input_schema
        )

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

    def preview(self, env: ToolEnv) -> Preview:
        return json_preview(self.arguments)

    async def run(self, ctx: CallContext) -> ToolOutput:
        tool = self.tool
        if tool.dispatcher is None:
            return ToolOutput.error(f"{tool.name}: not connected to MCP server {tool.server!r}")
        return await tool.dispatcher.call_tool(
            tool.server, tool.tool_name, self.arguments, timeout=tool.timeout
        )


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
        return TextPart(text=media_placeholder("resource", mime, blob, uri))
    if kind == "resource_link":
        described = f": {block.description}" if getattr(block, "description", None) else ""
        return TextPart(text=f"[resource link {block.name} {block.uri}{described}]")
    return TextPart(text=f"[unsupported content type {kind!r}]")


def convert_result(result: mcp_types.CallToolResult) -> ToolOutput:
    """A tool result the model can read: text joined, images kept, other media as placeholders.

    Structured content is added as JSON text when the server sent no text of its own (servers
    usually send both, the text being the same data serialised).
    """
    parts: list[ResultPart] = []
    for block in result.content:
        part = _content_part(block)
        if isinstance(part, TextPart) and parts and isinstance(parts[-1], TextPart):
            parts[-1] = TextPart(text=f"{parts[-1].text}\n{part.text}")
        else:
            parts.append(part)
    if result.structured_content is not None and not any(isinstance(p, TextPart) for p in parts):
        structured = json.dumps(result.structured_content, ensure_ascii=False, indent=2)
        parts.insert(0, TextPart(text=structured))
    if not parts:
        parts.append(TextPart(text="(no output)" if not result.is_error else "(error, no details)"))
    as_data: dict[str, Any] | None = None
    if result.structured_content is not None:
        # What Claude Code reports as the call's tool_use_result (caliban -p prints it).
        compact = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
        as_data = {"content": compact, "structuredContent": result.structured_content}
    return ToolOutput(
        content=tuple(parts),
        is_error=result.is_error,
        summary=_summary(parts),
        data=as_data,
    )


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
    "MAX_NAME",
    "McpDispatcher",
    "McpInvocation",
    "McpTool",
    "convert_result",
    "hashed_name",
    "image_placeholder",
    "media_placeholder",
    "sanitize",
    "tool_from_sdk",
    "unique_wire_names",
    "wire_name",
    "wire_prefix",
]
