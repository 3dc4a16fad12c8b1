"""The "deferred MCP tools" paragraph: what ToolSearch is for and which tools it can load.

It is appended to the system prompt while MCP tools are loaded lazily. It describes the
whole lazy catalog — loaded tools included — so an activation never changes it: the system
prompt stays byte-identical from turn to turn (and from session to session with the same
cached catalog), and providers' prompt caches hold. Activations are announced where they
happen instead (ToolSearch's answer, a note in a deferred tool's result).

The manifest lists, per server, its tool count and short tool names (the model calls
``mcp__<server>__<short>``), kept within about :data:`MANIFEST_BUDGET_TOKENS`; over budget
each server lists its first names and "… and N more". Servers still starting whose tools
are not known yet are named on a last line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from caliban.util.tokens import CHARS_PER_TOKEN_TEXT

__all__ = ["MANIFEST_BUDGET_TOKENS", "ManifestGroup", "deferred_paragraph", "group_by_server"]

MANIFEST_BUDGET_TOKENS = 1_000
"""About how many tokens the list of deferred tool names may take."""

PARAGRAPH_HEADER = "# Deferred MCP tools"
COUNT = "{count} MCP {tools} from {servers} {server_word} {are} loaded on demand."
NO_COUNT = "MCP tools are loaded on demand."
PARAGRAPH = (
    " Loaded ones are in your tool list; to use another, call ToolSearch first (keywords for "
    'the task, "select:<name>" for exact names, "+word" to require a word): it returns the '
    "matching tools with their input schemas and loads them for the rest of the session. A "
    "tool can also be called directly by its full name, mcp__<server>__<tool>."
)
RESOURCES_GROUP = "resources of any server"
"""How the manifest lists ListMcpResourcesTool and ReadMcpResourceTool (called by those
names; not a server)."""
MANIFEST_INTRO = "MCP tools by server (server (count): tool names):"
CONNECTING = "Servers still starting (ToolSearch waits for them): {servers}"


@dataclass(frozen=True, slots=True)
class ManifestGroup:
    """One server's deferred tool names, with the sizes the budget needs."""

    server: str
    names: tuple[str, ...]
    header: str
    cumulative: tuple[int, ...]
    """``cumulative[k]``: characters of ``", ".join(names[:k])``."""

    @classmethod
    def of(cls, server: str, names: Sequence[str]) -> ManifestGroup:
        cumulative = [0]
        for i, name in enumerate(names):
            cumulative.append(cumulative[-1] + len(name) + (2 if i else 0))
        return cls(server, tuple(names), f"- {server} ({len(names)})", tuple(cumulative))

    def size(self, shown: int) -> int:
        """Characters of this group's line with at most ``shown`` names."""
        count = len(self.names)
        if shown <= 0:
            return len(self.header)
        if shown >= count:
            return len(self.header) + 2 + self.cumulative[count]
        more = len(f", … and {count - shown} more")
        return len(self.header) + 2 + self.cumulative[shown] + more

    def line(self, shown: int) -> str:
        count = len(self.names)
        if shown <= 0:
            return self.header
        if shown >= count:
            return f"{self.header}: {', '.join(self.names)}"
        return f"{self.header}: {', '.join(self.names[:shown])}, … and {count - shown} more"


def group_by_server(entries: Sequence[tuple[str, str]]) -> list[ManifestGroup]:
    """Groups of ``(server, short name)`` entries, servers in order of first appearance."""
    by_server: dict[str, list[str]] = {}
    for server, short in entries:
        by_server.setdefault(server, []).append(short)
    return [ManifestGroup.of(server, names) for server, names in by_server.items()]


def _chars(groups: Sequence[ManifestGroup], shown: int) -> int:
    return sum(g.size(shown) for g in groups) + max(len(groups) - 1, 0)


def _manifest(groups: Sequence[ManifestGroup], budget: int) -> list[str]:
    limit = budget * CHARS_PER_TOKEN_TEXT  # estimate_tokens(text) <= budget
    longest = max((len(g.names) for g in groups), default=0)
    low, high = 0, longest  # the most names per server that fit: binary search
    while low < high:
        mid = (low + high + 1) // 2
        if _chars(groups, mid) <= limit:
            low = mid
        else:
            high = mid - 1
    if low > 0 or _chars(groups, 0) <= limit:
        return [g.line(low) for g in groups]
    # Too many servers for even their counts: as many as fit, then a summary line.
    kept: list[str] = []
    used = 0
    for i, group in enumerate(groups):
        rest = groups[i:]
        tail = f"- … and {len(rest)} more servers ({sum(len(g.names) for g in rest)} tools)"
        if used + len(group.header) + 1 + len(tail) > limit:
            return [*kept, tail]
        kept.append(group.header)
        used += len(group.header) + 1
    return kept


def deferred_paragraph(
    groups: Sequence[ManifestGroup],
    *,
    connecting: Sequence[str] = (),
    budget: int = MANIFEST_BUDGET_TOKENS,
) -> str:
    """The paragraph announcing the lazily loaded tools in ``groups`` and the servers still
    ``connecting`` ('' when there are neither)."""
    groups = [g for g in groups if g.names]
    count = sum(len(g.names) for g in groups)
    if not count and not connecting:
        return ""
    lines = [PARAGRAPH_HEADER]
    if count:
        servers = len([g for g in groups if g.server != RESOURCES_GROUP])
        first = COUNT.format(
            count=count,
            tools="tool" if count == 1 else "tools",
            servers=servers,
            server_word="server" if servers == 1 else "servers",
            are="is" if count == 1 else "are",
        )
        lines += [first + PARAGRAPH, MANIFEST_INTRO, *_manifest(groups, budget)]
    else:
        lines.append(NO_COUNT + PARAGRAPH)
    if connecting:
        lines.append(CONNECTING.format(servers=", ".join(connecting)))
    return "\n".join(lines)
