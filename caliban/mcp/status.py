"""MCP servers' status as rows: ``caliban mcp list``, the REPL's ``/mcp`` and start-up notices."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from caliban.mcp.client import McpManager, ServerStatus

__all__ = [
    "StatusRow",
    "describe_failure",
    "describe_skipped",
    "format_rows",
    "manager_rows",
    "status_rows",
]


@dataclass(frozen=True, kw_only=True)
class StatusRow:
    """One line of ``caliban mcp list`` and of the REPL's ``/mcp``."""

    name: str
    transport: str
    state: str
    tools: int
    chars: int
    tokens: int
    detail: tuple[str, ...] = ()
    """Lines under the row: why it failed, its last stderr lines, where its log is."""


def status_rows(statuses: Iterable[ServerStatus]) -> list[StatusRow]:
    """Rows for a manager's statuses (``manager.statuses()``), failures explained."""
    rows = []
    for status in statuses:
        detail: list[str] = []
        if status.needs_login:
            detail.append(f"run `caliban mcp login {status.name}`")
        elif status.state == "failed":
            detail.append(f"error: {status.error or 'unknown'}")
            detail.extend(f"stderr: {line}" for line in status.stderr_tail[-5:])
            if status.log_path is not None:
                detail.append(f"log: {status.log_path}")
        detail.extend(f"skipped invalid tool {line}" for line in status.skipped[:5])
        if len(status.skipped) > 5:
            detail.append(f"skipped {len(status.skipped) - 5} more invalid tools")
        rows.append(
            StatusRow(
                name=status.name,
                transport=status.transport,
                state="needs login" if status.needs_login else status.state,
                tools=status.tool_count,
                chars=status.tool_chars,
                tokens=status.tool_tokens,
                detail=tuple(detail),
            )
        )
    return rows


def manager_rows(manager: McpManager) -> list[StatusRow]:
    """:func:`status_rows` of every server of a running manager (for ``/mcp``)."""
    return status_rows(manager.statuses())


def format_rows(rows: list[StatusRow]) -> list[str]:
    """A plain-text table: name, transport, status, tools, characters and ≈ tokens."""
    header = ("NAME", "TRANSPORT", "STATUS", "TOOLS", "CHARS", "≈TOKENS")
    cells = [header] + [
        (
            r.name,
            r.transport,
            r.state,
            str(r.tools) if r.state == "connected" else "-",
            f"{r.chars:,}" if r.state == "connected" else "-",
            f"{r.tokens:,}" if r.state == "connected" else "-",
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    right = {3, 4, 5}

    def line(cols: tuple[str, ...]) -> str:
        parts = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cols, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    out = [line(header)]
    for row, cols in zip(rows, cells[1:], strict=True):
        out.append(line(cols))
        out.extend(f"    {d}" for d in row.detail)
    connected = [r for r in rows if r.state == "connected"]
    if len(connected) > 1:
        chars, tokens = sum(r.chars for r in connected), sum(r.tokens for r in connected)
        tools = sum(r.tools for r in connected)
        out.append(f"total: {tools} tools, {chars:,} characters, ≈{tokens:,} tokens")
    return out


def describe_failure(status: ServerStatus) -> str:
    """One notice for a server that did not start: name, reason, its last stderr lines, log
    (one line for a server that wants a login)."""
    if status.needs_login:
        return f"MCP server '{status.name}' {status.error} (skipped)"
    [row] = status_rows([status])
    return f"MCP server '{status.name}' is unavailable\n  " + "\n  ".join(row.detail)


def describe_skipped(status: ServerStatus) -> str | None:
    """A notice for a server that started without some of its tools (invalid definitions)."""
    if not status.skipped:
        return None
    lines = [f"skipped invalid tool {line}" for line in status.skipped[:5]]
    if len(status.skipped) > 5:
        lines.append(f"skipped {len(status.skipped) - 5} more invalid tools")
    return f"MCP server '{status.name}' left out tools it defined badly\n  " + "\n  ".join(lines)
