"""Lazy MCP loading in the agent loop: which tools go on the wire each turn.

:class:`LazyToolbox` implements :class:`caliban.toolbox.Toolbox` for a session (or sub-agent)
with ``tools.lazy_mcp`` on. Every turn it offers, in this order:

1. the built-in tools, in their fixed order;
2. ``ToolSearch``, when at least one MCP tool is deferred;
3. the tools of eager servers (``lazy = false`` in ``mcp.toml``), in catalog order;
4. the active MCP tools, in the order they were first activated.

So a turn that activates nothing sends exactly the tool list of the turn before and the
provider's prompt cache stays valid. The filter only shapes the outgoing request; the history
is never touched. While something is deferred, :meth:`LazyToolbox.system_addendum` returns the
*deferred paragraph*: what ToolSearch is for and a compact, budgeted manifest of the deferred
tools. Deferred tools stay callable by their full name: the call runs (after the normal
permission check) and activates the tool (:meth:`LazyToolbox.note_call`).

The activation set lives in an :class:`~caliban.mcp.activation.ActivationCell` the toolbox is
given and changes only through ``cell.update`` / ``cell.swap``, so parallel tool calls of one
turn never lose an update. Everything derived from the catalog (the split into eager and lazy
tools, the search index) is computed once per catalog version; the per-turn result once per
activation change.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from caliban.events import ActivationChanged, AgentEvent
from caliban.mcp.activation import ActivationCell, McpActivationSet
from caliban.mcp.tools import split_wire_name
from caliban.messages import TextPart, ToolSpec
from caliban.tokens import CHARS_PER_TOKEN_TEXT
from caliban.tools.base import CallContext, Tool, ToolKind, ToolOutput
from caliban.tools.toolsearch import (
    MAX_RESULTS,
    TOOL_SEARCH_NAME,
    Match,
    SearchOutcome,
    ToolSearch,
)

if TYPE_CHECKING:
    from caliban.search.index import ToolIndex

__all__ = [
    "MANIFEST_BUDGET_TOKENS",
    "CatalogCache",
    "DeferredTool",
    "LazyToolbox",
    "McpDoc",
    "deferred_paragraph",
    "format_search",
    "index_tools",
    "search_catalog",
]

MANIFEST_BUDGET_TOKENS = 1_000
"""About how many tokens the list of deferred tool names in the system prompt may take."""

PARAGRAPH_HEADER = "# Deferred MCP tools"
PARAGRAPH = (
    "{count} more MCP {tools} from {servers} {server_word} {are} available but not loaded. To "
    'use one, call ToolSearch first (keywords for the task, "select:<name>" for exact names, '
    '"+word" to require a word): it returns the matching tools with their input schemas and '
    "loads them for the rest of the session. A deferred tool can also be called directly by "
    "its full name, mcp__<server>__<tool>."
)
MANIFEST_INTRO = "Deferred tools by server (server (count): tool names):"


# ---------------------------------------------------------------------------- search docs


@dataclass(frozen=True, kw_only=True)
class McpDoc:
    """An MCP tool as :class:`caliban.search.index.ToolIndex` sees it; ``target`` is the tool."""

    name: str
    server: str
    tool: str
    description: str
    input_schema: Mapping[str, Any] = field(compare=False)
    target: Tool = field(compare=False, repr=False)

    @classmethod
    def of(cls, tool: Tool) -> McpDoc:
        """Adapt any tool object (``McpTool`` or a test double) for the index."""
        server, bare = _server_and_tool(tool)
        spec = tool.spec
        return cls(
            name=tool.name,
            server=server,
            tool=getattr(tool, "tool_name", None) or bare,
            description=spec.description,
            input_schema=spec.input_schema,
            target=tool,
        )


def _server_and_tool(tool: Tool) -> tuple[str, str]:
    """The server's name and the tool's short name, as shown in the manifest."""
    parts = split_wire_name(tool.name)
    server = getattr(tool, "server", None) or (parts[0] if parts else "")
    return str(server), parts[1] if parts else tool.name


def index_tools(tools: Sequence[Tool]) -> ToolIndex[McpDoc]:
    """A search index over ``tools`` (what ToolSearch and ``caliban mcp search`` rank)."""
    from caliban.search.index import ToolIndex

    return ToolIndex.build(McpDoc.of(tool) for tool in tools)


# ---------------------------------------------------------------------------- the paragraph


class _Group:
    """One server's deferred tool names, with the sizes the manifest budget needs."""

    __slots__ = ("cumulative", "header", "names", "server")

    def __init__(self, server: str, names: Sequence[str]) -> None:
        self.server = server
        self.names = tuple(names)
        self.header = f"- {server} ({len(self.names)})"
        # cumulative[k]: characters of ", ".join(names[:k])
        cumulative = [0]
        for i, name in enumerate(self.names):
            cumulative.append(cumulative[-1] + len(name) + (2 if i else 0))
        self.cumulative = tuple(cumulative)

    def size(self, shown: int) -> int:
        """Characters of this group's manifest line with at most ``shown`` names."""
        count = len(self.names)
        if shown <= 0:
            return len(self.header)
        if shown >= count:
            return len(self.header) + 2 + self.cumulative[count]
        return len(self.header) + 2 + self.cumulative[shown] + len(f", … and {count - shown} more")

    def line(self, shown: int) -> str:
        count = len(self.names)
        if shown <= 0:
            return self.header
        if shown >= count:
            return f"{self.header}: {', '.join(self.names)}"
        return f"{self.header}: {', '.join(self.names[:shown])}, … and {count - shown} more"


def _groups(tools: Sequence[Tool]) -> list[_Group]:
    by_server: dict[str, list[str]] = {}
    for tool in tools:
        server, short = _manifest_key(tool)
        by_server.setdefault(server, []).append(short)
    return [_Group(server, names) for server, names in by_server.items()]


def _manifest_key(tool: Tool) -> tuple[str, str]:
    """(server, short name) as the model must combine them: ``mcp__<server>__<short>``."""
    parts = split_wire_name(tool.name)
    return parts if parts else (_server_and_tool(tool)[0] or "?", tool.name)


def _chars(groups: Sequence[_Group], shown: int) -> int:
    return sum(g.size(shown) for g in groups) + max(len(groups) - 1, 0)


def _manifest(groups: Sequence[_Group], budget: int) -> list[str]:
    """Per server its tool count and names; the first names only when over ``budget``."""
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


def _paragraph(groups: Sequence[_Group], budget: int) -> str:
    count = sum(len(g.names) for g in groups)
    if not count:
        return ""
    servers = len(groups)
    text = PARAGRAPH.format(
        count=count,
        tools="tool" if count == 1 else "tools",
        servers=servers,
        server_word="server" if servers == 1 else "servers",
        are="is" if count == 1 else "are",
    )
    return "\n".join([PARAGRAPH_HEADER, text, MANIFEST_INTRO, *_manifest(groups, budget)])


def deferred_paragraph(deferred: Sequence[Tool], *, budget: int = MANIFEST_BUDGET_TOKENS) -> str:
    """The system-prompt paragraph announcing ``deferred`` tools ('' when there are none).

    Deterministic: the same tools in the same order give the same text, so prompt caches hold.
    The manifest (per server: name, tool count, tool names) is kept within about ``budget``
    tokens; beyond it each server lists its first names and "… and N more".
    """
    return _paragraph(_groups(deferred), budget)


# ---------------------------------------------------------------------------- deferred calls


class DeferredTool:
    """A deferred MCP tool called by name: runs it, and on an error result adds its schema.

    The model never saw the schema of a tool it calls without searching first, so when the
    server rejects the arguments the result says what they should be.
    """

    def __init__(self, tool: Tool) -> None:
        self.tool = tool

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def kind(self) -> ToolKind:
        return self.tool.kind

    @property
    def read_only(self) -> bool:
        return self.tool.read_only

    @property
    def spec(self) -> ToolSpec:
        return self.tool.spec

    def permission_subject(self, arguments: Mapping[str, Any]) -> str | None:
        return self.tool.permission_subject(arguments)

    async def call(self, arguments: Mapping[str, Any], ctx: CallContext) -> ToolOutput:
        output = await self.tool.call(arguments, ctx)
        if not output.is_error:
            return output
        schema = json.dumps(self.spec.input_schema, ensure_ascii=False, separators=(",", ":"))
        hint = TextPart(
            text=f"{self.name} is now loaded. Its input schema: {schema}\n"
            "If the arguments were wrong, call it again with arguments matching the schema."
        )
        return ToolOutput(content=(*output.content, hint), is_error=True, summary=output.summary)


# ---------------------------------------------------------------------------- the catalog


class _Catalog:
    """One version of the MCP catalog, split for the wire filter; the index is built on demand."""

    def __init__(
        self,
        source: Sequence[Tool],
        version: Hashable,
        tools: Sequence[Tool],
        eager: frozenset[str],
    ) -> None:
        self.source = source
        self.version = version
        self.eager_servers = eager
        self.by_name: dict[str, Tool] = {}
        eager_tools: list[Tool] = []
        lazy: list[Tool] = []
        for tool in tools:
            if tool.name in self.by_name:
                continue
            self.by_name[tool.name] = tool
            server = getattr(tool, "server", None) or _server_and_tool(tool)[0]
            (eager_tools if server in eager else lazy).append(tool)
        self.eager = tuple(eager_tools)
        self.lazy = tuple(lazy)
        self.lazy_by_name = {tool.name: tool for tool in lazy}
        self._index: ToolIndex[McpDoc] | None = None
        # The manifest of the whole lazy catalog, per server; an activation only refilters
        # the groups of the few servers whose tools are active.
        self.groups = _groups(self.lazy)
        position = {server: i for i, server in enumerate(g.server for g in self.groups)}
        self.group_of = {tool.name: position[_manifest_key(tool)[0]] for tool in self.lazy}
        self.short_name = {tool.name: _manifest_key(tool)[1] for tool in self.lazy}
        self._filtered: dict[tuple[int, frozenset[str]], _Group] = {}

    def paragraph(self, active: Sequence[Tool]) -> str:
        """The deferred paragraph when ``active`` (lazy tools) are on the wire."""
        if not active:
            return _paragraph(self.groups, MANIFEST_BUDGET_TOKENS)
        hidden: dict[int, set[str]] = {}
        for tool in active:
            hidden.setdefault(self.group_of[tool.name], set()).add(self.short_name[tool.name])
        groups = []
        for i, group in enumerate(self.groups):
            if i in hidden:
                group = self._without(i, frozenset(hidden[i]))
            if group.names:
                groups.append(group)
        return _paragraph(groups, MANIFEST_BUDGET_TOKENS)

    def _without(self, i: int, hidden: frozenset[str]) -> _Group:
        key = (i, hidden)
        group = self._filtered.get(key)
        if group is None:
            if len(self._filtered) > 512:  # one activation changes one or two groups
                self._filtered.clear()
            source = self.groups[i]
            group = _Group(source.server, [n for n in source.names if n not in hidden])
            self._filtered[key] = group
        return group

    def index(self) -> ToolIndex[McpDoc]:
        if self._index is None:
            self._index = index_tools(self.lazy)
        return self._index


class CatalogCache:
    """Shares the catalog split and its search index between the toolboxes of one session.

    A session builds a new toolbox for every prompt; without this, each would rebuild the
    index on its first search. Only toolboxes without an ``allow`` filter may share one.
    """

    def __init__(self) -> None:
        self._catalog: _Catalog | None = None

    def get(
        self, source: Sequence[Tool], version: Hashable, eager: frozenset[str]
    ) -> _Catalog | None:
        catalog = self._catalog
        if catalog is None or catalog.eager_servers != eager:
            return None
        if catalog.source is source or (version is not None and version == catalog.version):
            return catalog
        return None

    def put(self, catalog: _Catalog) -> None:
        self._catalog = catalog


@dataclass(frozen=True, kw_only=True, slots=True)
class _Wire:
    """What one catalog version and one activation set put on the wire."""

    catalog: _Catalog
    order: tuple[str, ...]
    offered: tuple[Tool, ...]
    active: tuple[Tool, ...]
    addendum: str


# ---------------------------------------------------------------------------- the toolbox


class LazyToolbox:
    """Built-in tools always; MCP tools only once found (or pinned eager). See the module doc.

    ``mcp_tools`` returns the current MCP tools (``McpManager.tools``); ``version`` (optional)
    returns a value that changes whenever they do (``McpManager.version``) — without it the
    returned sequence's identity is the version. ``allow`` limits which MCP tools this toolbox
    may ever offer, find or search (a sub-agent's allowlist). ``cache`` shares catalog work
    across the toolboxes of a session (only without ``allow``).
    """

    def __init__(
        self,
        *,
        builtins: Sequence[Tool],
        mcp_tools: Callable[[], Sequence[Tool]],
        activation: ActivationCell,
        eager_servers: frozenset[str],
        allow: Callable[[str], bool] | None = None,
        version: Callable[[], Hashable] | None = None,
        cache: CatalogCache | None = None,
    ) -> None:
        self.builtins = tuple(builtins)
        self.activation = activation
        self.eager_servers = eager_servers
        self.tool_search = ToolSearch(self)
        self._by_builtin_name = {tool.name: tool for tool in self.builtins}
        self._mcp_tools = mcp_tools
        self._version = version
        self._allow = allow
        self._cache = cache if allow is None else None
        self._catalog: _Catalog | None = None
        self._wire: _Wire | None = None

    # -- state

    def catalog(self) -> _Catalog:
        """The current catalog, rebuilt only when the MCP tool list changed."""
        source = self._mcp_tools()
        version = self._version() if self._version is not None else None
        catalog = self._catalog
        if catalog is not None and (
            catalog.source is source or (version is not None and version == catalog.version)
        ):
            return catalog
        cached = self._cache.get(source, version, self.eager_servers) if self._cache else None
        if cached is None:
            allowed = source if self._allow is None else [t for t in source if self._allow(t.name)]
            cached = _Catalog(source, version, allowed, self.eager_servers)
            if self._cache is not None:
                self._cache.put(cached)
        self._catalog = cached
        return cached

    def _current(self) -> _Wire:
        catalog = self.catalog()
        order = self.activation.get().activation_order
        wire = self._wire
        if wire is not None and wire.catalog is catalog and wire.order == order:
            return wire
        lazy = catalog.lazy_by_name
        active = tuple(lazy[name] for name in order if name in lazy)
        search: tuple[Tool, ...] = (self.tool_search,) if len(active) < len(lazy) else ()
        self._wire = _Wire(
            catalog=catalog,
            order=order,
            offered=(*self.builtins, *search, *catalog.eager, *active),
            active=active,
            addendum=catalog.paragraph(active),
        )
        return self._wire

    # -- the Toolbox protocol

    def offered(self) -> tuple[Tool, ...]:
        """Built-ins, ToolSearch (if anything is deferred), eager servers' tools, active tools."""
        return self._current().offered

    def system_addendum(self) -> str:
        """The deferred paragraph, or '' when no MCP tool is deferred."""
        return self._current().addendum

    def find(self, name: str) -> Tool | None:
        """Any callable tool; a deferred MCP tool comes wrapped in :class:`DeferredTool`."""
        if (builtin := self._by_builtin_name.get(name)) is not None:
            return builtin
        if name == TOOL_SEARCH_NAME:
            return self.tool_search
        catalog = self.catalog()
        tool = catalog.by_name.get(name)
        if tool is not None and name in catalog.lazy_by_name and name not in self.activation.get():
            return DeferredTool(tool)
        return tool

    def note_call(self, name: str) -> AgentEvent | None:
        """Activate a deferred tool that is about to run, or refresh an active one's recency."""
        if name not in self.catalog().lazy_by_name:
            return None

        def step(
            current: McpActivationSet,
        ) -> tuple[McpActivationSet, tuple[tuple[str, ...], McpActivationSet] | None]:
            if name in current:
                return current.touch(name), None
            new, evicted = current.activate((name,))
            return new, (evicted, new)

        changed = self.activation.update(step)
        if changed is None:
            return None
        evicted, new = changed
        return ActivationChanged(activated=(name,), evicted=evicted, active=new.names())

    def names(self) -> list[str]:
        """Every callable name: built-ins, ToolSearch (while offered), every allowed MCP tool."""
        search = [TOOL_SEARCH_NAME] if self.tool_search in self.offered() else []
        return [*self._by_builtin_name, *search, *self.catalog().by_name]

    # -- ToolSearch

    def deferred(self) -> tuple[Tool, ...]:
        """The lazily loaded MCP tools not on the wire now, in catalog order."""
        catalog = self.catalog()
        active = self.activation.get()
        return tuple(tool for tool in catalog.lazy if tool.name not in active)

    def search_tools(self, query: str, max_results: int) -> SearchOutcome:
        """Rank the lazily loaded tools for ``query``, activate the hits, describe them."""
        catalog = self.catalog()
        index = catalog.index()
        cap = self.activation.get().cap
        limit = min(max_results, MAX_RESULTS, cap)
        result = index.search(query, limit)
        # select: of an eager server's tool: nothing to load, it is always on the wire
        pinned = [catalog.by_name[n] for n in result.missing_names if n in catalog.by_name]
        missing = tuple(
            (name, index.closest_names(name, 3))
            for name in result.missing_names
            if name not in catalog.by_name
        )
        if not result.hits and not pinned:
            return SearchOutcome(
                query=query, missing=missing, no_match=_no_match(query, index, missing)
            )
        tools = [hit.doc.target for hit in result.hits]
        names = [tool.name for tool in tools]

        def step(
            current: McpActivationSet,
        ) -> tuple[McpActivationSet, tuple[McpActivationSet, McpActivationSet, tuple[str, ...]]]:
            new, evicted = current.activate(names)
            return new, (current, new, evicted)

        before, after, evicted = self.activation.update(step)
        newly = tuple(name for name in names if name not in before)
        event = (
            ActivationChanged(activated=newly, evicted=evicted, active=after.names())
            if newly or evicted
            else None
        )
        matches = tuple(
            Match(
                name=tool.name,
                description=tool.spec.description,
                input_schema=tool.spec.input_schema,
                newly_activated=tool.name in newly,
            )
            for tool in [*tools, *pinned]
        )
        limited = limit if result.mode == "keywords" and max_results > limit else None
        return SearchOutcome(
            query=query,
            matches=matches,
            evicted=evicted,
            missing=missing,
            limited_to=limited,
            event=event,
        )


def _no_match(
    query: str, index: ToolIndex[McpDoc], missing: tuple[tuple[str, tuple[str, ...]], ...]
) -> str:
    from caliban.search.index import format_no_match

    text = format_no_match(query, index)
    if not missing:
        return text
    # select: name each missing name with its own suggestions instead of one blended line
    lines = text.splitlines()
    body = [
        f"Not found: {name}." + (f" Closest: {', '.join(close)}." if close else "")
        for name, close in missing
    ]
    return "\n".join([lines[0], *body, lines[-1]])


# ---------------------------------------------------------------------------- mcp search


def search_catalog(tools: Sequence[Tool], query: str, limit: int) -> dict[str, Any]:
    """Rank ``tools`` for ``query`` as ToolSearch would, activating nothing.

    Returns JSON-ready data: ``results`` (best first, each with ``name``, ``server``,
    ``tool``, ``score`` and ``description``), ``missing`` (``select:`` names that matched
    nothing), ``searched`` (the catalog size) and, when nothing matched, ``no_match`` (the
    text ToolSearch would answer with).
    """
    from caliban.search.index import format_no_match

    index = index_tools(tools)
    result = index.search(query, limit)
    data: dict[str, Any] = {
        "query": query,
        "mode": result.mode,
        "searched": len(index),
        "results": [
            {
                "name": hit.doc.name,
                "server": hit.doc.server,
                "tool": hit.doc.tool,
                "score": round(hit.score, 3),
                "description": hit.doc.description,
            }
            for hit in result.hits
        ],
        "missing": list(result.missing_names),
    }
    if not result.hits:
        data["no_match"] = format_no_match(query, index)
    return data


def format_search(data: Mapping[str, Any]) -> str:
    """:func:`search_catalog`'s data as text: one numbered hit a line, its description under."""
    if not data["results"]:
        return str(data.get("no_match") or f"No MCP tools matched '{data['query']}'.")
    lines = []
    width = max(len(hit["name"]) for hit in data["results"])
    for rank, hit in enumerate(data["results"], start=1):
        score = f"score {hit['score']:.2f}" if data["mode"] == "keywords" else "selected"
        lines.append(f"{rank:>2}. {hit['name'].ljust(width)}  {score}")
        summary = (hit["description"].strip().splitlines() or [""])[0]
        if summary:
            lines.append(f"    {summary[:200]}")
    for name in data["missing"]:
        lines.append(f"Not found: {name}")
    lines.append(f"({data['searched']} tools searched)")
    return "\n".join(lines)
