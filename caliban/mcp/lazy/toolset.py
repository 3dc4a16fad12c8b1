"""The lazy-loading wrapper: which MCP tools go on the wire each turn.

:class:`LazyMcpToolset` wraps the MCP tools of one agent (all of them, or a sub-agent's
allowed ones). While loading is lazy it offers, in this order:

1. ``ToolSearch``, when at least one MCP tool is deferred or a server is still starting
   (once offered, it stays for that catalog);
2. the tools of eager servers (``lazy = false`` in ``mcp.toml``), in catalog order;
3. the active MCP tools, in the order they were first activated.

(The built-in tools come before all of these: they are another part of the agent's
:class:`~caliban.toolsets.combined.CombinedToolset`.) So a turn that activates nothing sends
exactly the tool list of the turn before, and the provider's prompt cache stays valid. While
something is deferred, :meth:`LazyMcpToolset.system_addendum` is the deferred paragraph
(:mod:`caliban.mcp.lazy.manifest`), the same whatever is active, so activations never
change the system prompt. Deferred tools stay callable by their full name: the call runs
(after the normal permission check), activates the tool (:meth:`note_call`) and its result
says so.

The activation set lives in an :class:`~caliban.mcp.lazy.activation.ActivationCell` and
changes only through ``cell.update`` / ``cell.swap``, so parallel tool calls of one turn
never lose an update. The catalog split is redone when the MCP tool list, the servers still
starting or (for ``lazy_mcp = "auto"``) the model's context window change; the per-turn result
when the activation set's order changes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caliban.calls.effects import Effects
from caliban.events import ActivationChanged, AgentEvent
from caliban.mcp.lazy.activation import ActivationCell, McpActivationSet
from caliban.mcp.lazy.catalog import Catalog
from caliban.mcp.lazy.policy import LazyPolicy, decide
from caliban.mcp.lazy.tool_search import (
    MAX_RESULTS,
    Match,
    SearchOutcome,
    ServerProblem,
    ToolSearch,
    unmatched,
)
from caliban.mcp.tools import marked_spec
from caliban.mcp.toolset import McpServers
from caliban.messages import TextPart, ToolSpec
from caliban.tools.base import (
    CallContext,
    Invocation,
    Preview,
    Tool,
    ToolEnv,
    ToolOrigin,
    ToolOutput,
)
from caliban.tools.origin import McpOrigin
from caliban.toolsets.base import ChildScope, LazyView, PromptTools, Toolset, ToolsetView

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from caliban.search.history import SearchHistory

__all__ = ["DeferredTool", "LazyMcpToolset"]


class _WrappedTool:
    """Another tool, unchanged but for what :meth:`bind` returns."""

    def __init__(self, tool: Tool) -> None:
        self.tool = tool

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def origin(self) -> ToolOrigin:
        return self.tool.origin

    @property
    def read_only(self) -> bool:
        return self.tool.read_only

    @property
    def spec(self) -> ToolSpec:
        return self.tool.spec


@dataclass(frozen=True, slots=True)
class _WrappedInvocation:
    """Another tool's invocation whose output :meth:`amend` may add to."""

    tool: Tool
    inner: Invocation

    @property
    def subject(self) -> str | None:
        return self.inner.subject

    def effects(self, cwd: Path) -> Effects:
        return self.inner.effects(cwd)

    def preview(self, env: ToolEnv) -> Preview:
        return self.inner.preview(env)

    async def run(self, ctx: CallContext) -> ToolOutput:
        return self.amend(await self.inner.run(ctx))

    def amend(self, output: ToolOutput) -> ToolOutput:
        return output


class DeferredTool(_WrappedTool):
    """A deferred MCP tool called by name: its result says it is now loaded.

    The model never saw the schema of a tool it calls without searching first, so when the
    server rejects the arguments the result says what they should be. Never on the wire's
    tool list (an activated tool goes there itself), its spec is only quoted in text (the
    unknown-tool error's closest names), so its description comes marked as the server's.
    """

    @property
    def spec(self) -> ToolSpec:
        return marked_spec(self.tool)

    def bind(self, arguments: Mapping[str, Any]) -> Invocation | str:
        bound = self.tool.bind(arguments)
        return bound if isinstance(bound, str) else _SaysLoaded(self.tool, bound)


@dataclass(frozen=True, slots=True)
class _SaysLoaded(_WrappedInvocation):
    def amend(self, output: ToolOutput) -> ToolOutput:
        if not output.is_error:
            note = f"({self.tool.name} is now loaded: it is in your tool list.)"
        else:
            schema = json.dumps(
                self.tool.spec.input_schema, ensure_ascii=False, separators=(",", ":")
            )
            note = (
                f"{self.tool.name} is now loaded. Its input schema: {schema}\n"
                "If the arguments were wrong, call it again with arguments matching the schema."
            )
        return replace(output, content=(*output.content, TextPart(text=note)))


class GuessedTool(_WrappedTool):
    """An MCP tool the model called by a bare name (``get_current_time`` for
    ``mcp__time__get_current_time``): it runs, and the result says the full name."""

    def __init__(self, tool: Tool, called_as: str) -> None:
        super().__init__(tool)
        self.called_as = called_as

    def bind(self, arguments: Mapping[str, Any]) -> Invocation | str:
        bound = self.tool.bind(arguments)
        if isinstance(bound, str):
            return bound
        return _WithFullName(
            self.tool,
            bound,
            f"(There is no tool named {self.called_as}; "
            f"this ran {self.tool.name}. Call it by that full name.)",
        )


@dataclass(frozen=True, slots=True)
class _WithFullName(_WrappedInvocation):
    note: str

    def amend(self, output: ToolOutput) -> ToolOutput:
        return replace(output, content=(*output.content, TextPart(text=self.note)))


@dataclass(frozen=True, kw_only=True, slots=True)
class _Wire:
    """What one catalog and one activation order put on the wire."""

    catalog: Catalog
    order: tuple[str, ...]
    offered: tuple[Tool, ...]
    active: tuple[Tool, ...]
    addendum: str


class LazyMcpToolset:
    """MCP tools only once found (or pinned eager); see the module docstring.

    ``context_window`` returns the current model's window, which ``lazy_mcp = "auto"``
    weighs the catalog against. ``servers`` (the MCP manager) lets ToolSearch wait for
    servers still starting and name those that failed.
    """

    def __init__(
        self,
        inner: Toolset,
        *,
        activation: ActivationCell,
        policy: LazyPolicy,
        context_window: Callable[[], int],
        servers: McpServers | None = None,
    ) -> None:
        self.inner = inner
        self.activation = activation
        self.policy = policy
        self.context_window = context_window
        self.servers = servers
        self.tool_search = ToolSearch(self)
        self._catalog: Catalog | None = None
        self._source: Sequence[Tool] | None = None
        self._window = 0
        self._connecting: tuple[str, ...] = ()
        self._searching: Catalog | None = None
        """The catalog ToolSearch and the paragraph were last offered with."""
        self._auto = policy.mode == "auto"
        self._wire: _Wire | None = None
        self._preactivated: dict[str, bool] = {}
        """Tools pre-activated for a prompt (in order), each with whether it was called."""
        self._unclaimed: tuple[str, ...] = ()
        """Loaded for the latest prompt and neither called nor found by ToolSearch since:
        dropped at the next prompt unless it wants them too."""
        self._history: SearchHistory | None = None
        self._history_model: tuple[str, int] | None = None
        self._found: dict[str, npt.NDArray[np.float32]] = {}
        """Tools ToolSearch found, each with its query's embedding: the history remembers
        the pair when the tool is called."""

    # -- state

    def catalog(self) -> Catalog:
        """The current catalog, rebuilt only when the MCP tools, the model's window or the
        servers still starting without a known tool list change."""
        source = self.inner.offered()
        window = self.context_window() if self._auto else 0
        connecting = self.servers.unlisted() if self.servers is not None else ()
        catalog = self._catalog
        if (
            catalog is None
            or source is not self._source
            or window != self._window
            or connecting != self._connecting
        ):
            decision = decide(self.policy, source, context_window=window)
            catalog = self._catalog = Catalog(
                source, decision, connecting, search_model=self.policy.search_model
            )
            self._source, self._window, self._connecting = source, window, connecting
        return catalog

    def _current(self) -> _Wire:
        catalog = self.catalog()
        order = self.activation.get().activation_order
        wire = self._wire
        if wire is not None and wire.catalog is catalog and wire.order == order:
            return wire
        lazy = catalog.lazy_by_name
        active = tuple(lazy[name] for name in order if name in lazy)
        # Offered while something is deferred, or servers are starting; once offered they
        # stay for this catalog whatever gets active, so an activation only appends to the
        # tool list and never touches the system prompt.
        searching = catalog.searchable and (
            catalog is self._searching or len(active) < len(lazy) or bool(catalog.connecting)
        )
        if not searching:
            self._wire = _Wire(
                catalog=catalog,
                order=order,
                offered=(*catalog.eager, *active),
                active=active,
                addendum="",
            )
            return self._wire
        self._searching = catalog
        self._wire = _Wire(
            catalog=catalog,
            order=order,
            offered=(self.tool_search, *catalog.eager, *active),
            active=active,
            addendum=catalog.paragraph,
        )
        return self._wire

    @property
    def lazy(self) -> bool:
        """Whether MCP tools are loaded lazily now (``"auto"`` follows the catalog's size)."""
        return self.catalog().decision.lazy

    # -- the Toolset protocol

    def offered(self) -> tuple[Tool, ...]:
        """ToolSearch (if anything is deferred), eager servers' tools, active tools."""
        return self._current().offered

    def system_addendum(self) -> str:
        """The deferred paragraph, or '' when no MCP tool is deferred; while loading is not
        lazy, the servers' instructions as with eager loading (lazily, they come with a
        server's first activated tool, so the system prompt stays the same)."""
        if not self.lazy:
            return self.inner.system_addendum()
        return self._current().addendum

    def find(self, name: str) -> Tool | None:
        """Any callable tool; a deferred MCP tool comes wrapped in :class:`DeferredTool`."""
        catalog = self.catalog()
        if name == self.tool_search.name and self.tool_search in self.offered():
            return self.tool_search
        tool = catalog.by_name.get(name)
        if tool is None:
            guess = catalog.bare_name(name)
            return GuessedTool(self._callable(guess), name) if guess is not None else None
        return self._callable(tool)

    def _callable(self, tool: Tool) -> Tool:
        """A deferred tool wrapped so that an error result brings its schema."""
        deferred = tool.name in self.catalog().lazy_by_name
        return DeferredTool(tool) if deferred and tool.name not in self.activation.get() else tool

    def names(self) -> tuple[str, ...]:
        """Every callable name: ToolSearch (while offered), then every MCP tool."""
        search = (self.tool_search.name,) if self.tool_search in self.offered() else ()
        return (*search, *self.catalog().by_name)

    def note_call(self, name: str) -> AgentEvent | None:
        """Activate a deferred tool that is about to run, or refresh an active one's recency."""
        if name not in self.catalog().lazy_by_name:
            return None
        if name in self._preactivated:
            self._preactivated[name] = True
        self._unclaimed = tuple(n for n in self._unclaimed if n != name)
        query = self._found.pop(name, None)
        if query is not None and self._history is not None:
            self._history.remember(query, name)

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

    def describe(self) -> ToolsetView:
        wire = self._current()
        catalog = wire.catalog
        lazy = None
        if catalog.decision.lazy:
            active = self.activation.get()
            lazy = LazyView(
                cap=active.cap,
                active=active.names(),
                deferred=self.deferred(),
                tool_search=self.tool_search,
                preactivated=tuple(self._preactivated.items()),
            )
        return ToolsetView(
            offered=wire.offered,
            addendum=wire.addendum,
            mcp_tools=tuple(catalog.by_name.values()),
            lazy=lazy,
        )

    def for_child(self, scope: ChildScope) -> LazyMcpToolset:
        """The child's MCP tools with its own activation cell: the parent's current set (or
        an empty one), minus what the scope excludes, plus the lazy tools it names exactly."""
        current = self.activation.get()
        start = current if scope.inherit_active_mcp else McpActivationSet.empty(current.cap)
        start = start.without(name for name in start.names() if not scope.allows(name))
        lazy = self.catalog().lazy_by_name
        start, _evicted = start.activate(name for name in scope.exact_tools if name in lazy)
        return LazyMcpToolset(
            self.inner.for_child(scope),
            activation=ActivationCell(start),
            policy=self.policy,
            context_window=self.context_window,
            servers=self.servers,
        )

    # -- pre-activation

    def forget_preactivated(self) -> None:
        """A new conversation (``/clear``): no tool was loaded for its prompts yet."""
        self._preactivated.clear()
        self._unclaimed = ()

    def preactivate(self, request: str) -> PromptTools | None:
        """Activate the deferred tools ``request`` most likely needs (at most
        ``tools.preactivate``; :mod:`caliban.mcp.lazy.preactivate`), before the model sees
        it, and drop those loaded for the previous prompt that the model neither called nor
        searched for (so guesses do not pile up in the activation set). ``None`` when nothing
        changed. Servers still starting are not waited for: their tools are ToolSearch's to
        find; nor is the index of a large catalog seen for the first time
        (:meth:`~caliban.mcp.lazy.catalog.Catalog.index_now`)."""
        from caliban.mcp.lazy.preactivate import likely_tools

        catalog = self.catalog()
        limit = min(self.policy.preactivate, self.activation.get().cap)
        if limit <= 0 or not catalog.decision.lazy:
            return None
        index = catalog.index_now()
        wanted = [doc.name for doc in likely_tools(index, request, limit)] if index else []
        stale = tuple(name for name in self._unclaimed if name not in wanted)
        names = [name for name in wanted if name not in self.activation.get()]
        self._unclaimed = (*(n for n in self._unclaimed if n in wanted), *names)
        if not names and not stale:
            return None

        def step(
            current: McpActivationSet,
        ) -> tuple[McpActivationSet, tuple[McpActivationSet, tuple[str, ...]]]:
            new, evicted = current.without(stale).activate(names)
            return new, (new, evicted)

        after, evicted = self.activation.update(step)
        for name in names:
            self._preactivated.setdefault(name, False)
        listed = ", ".join(names)
        note = (
            f"(caliban loaded these MCP tools for this request: {listed}. They are in your "
            "tool list; ToolSearch finds others.)"
            if names
            else ""
        )
        return PromptTools(
            note=note,
            event=ActivationChanged(
                activated=tuple(names),
                evicted=(*stale, *evicted),
                active=after.names(),
                preactivated=True,
            ),
        )

    # -- ToolSearch

    def deferred(self) -> tuple[Tool, ...]:
        """The lazily loaded MCP tools not on the wire now, in catalog order."""
        catalog = self.catalog()
        active = self.activation.get()
        return tuple(tool for tool in catalog.lazy if tool.name not in active)

    def warm_index(self) -> Callable[[], object] | None:
        """What builds the current catalog's search index (and loads the embedding model),
        to run in a background thread before the first ToolSearch needs it; ``None`` when no
        tool is loaded lazily (nothing to index: the search modules are not even imported)."""
        catalog = self.catalog()
        return catalog.index if catalog.decision.lazy and catalog.lazy else None

    async def prepare_search(self, notify: Callable[[str], None]) -> None:
        """Wait for the servers still starting whose tools are not known yet (each bounded by
        its start-up timeout), saying so through ``notify`` first."""
        pending = self.servers.unlisted() if self.servers is not None else ()
        if self.servers is None or not pending:
            return
        notify(f"waiting for {', '.join(pending)}…")
        await self.servers.wait_listed(pending)

    def _unavailable(self) -> tuple[ServerProblem, ...]:
        if self.servers is None:
            return ()
        problems = []
        for status in self.servers.statuses():
            if status.state == "failed":
                reason = status.error or "failed"
                problems.append(
                    ServerProblem(server=status.name, reason=reason, searched=status.tool_count > 0)
                )
            elif status.state == "connecting" and not status.tool_count:
                problems.append(
                    ServerProblem(server=status.name, reason="still starting", searched=False)
                )
        return tuple(problems)

    @staticmethod
    def _eager_tool(catalog: Catalog, name: str) -> Tool | None:
        """The eager tool ``name`` (full or bare) names, for a ``select:`` the index missed."""
        tool = catalog.by_name.get(name) or catalog.bare_name(name)
        return tool if tool is not None and tool.name not in catalog.lazy_by_name else None

    def _first_instructions(
        self, catalog: Catalog, before: McpActivationSet, newly: Sequence[str]
    ) -> tuple[tuple[str, str], ...]:
        """The instructions of each server whose first tool was just activated."""
        if self.servers is None:
            return ()

        def server(name: str) -> str | None:
            tool = catalog.by_name.get(name)
            origin = tool.origin if tool is not None else None
            return origin.server if isinstance(origin, McpOrigin) else None

        had = {server(name) for name in before.names()}
        found = []
        for name in dict.fromkeys(s for s in map(server, newly) if s and s not in had):
            if text := self.servers.instructions(name):
                found.append((name, text))
        return tuple(found)

    def search_tools(self, query: str, max_results: int) -> SearchOutcome:
        """Rank the lazily loaded tools for ``query``, activate the hits, describe them."""
        catalog = self.catalog()
        index = catalog.index()
        unavailable = self._unavailable()
        cap = self.activation.get().cap
        limit = min(max_results, MAX_RESULTS, cap)
        from caliban.search.history import open_history, search_with_history

        if index.dense_model != self._history_model:  # MiniLM began to rank
            self._history, self._history_model = open_history(index), index.dense_model
        result, vector = search_with_history(index, query, limit, self._history)
        if vector is not None:
            self._found.update((hit.doc.name, vector) for hit in result.hits)
        # select: of an eager tool (full or bare name; the index holds only lazy tools):
        # nothing to load, it is always on the wire
        eager = {name: self._eager_tool(catalog, name) for name in result.missing_names}
        pinned = list({tool.name: tool for tool in eager.values() if tool is not None}.values())
        missing = tuple(
            (name, index.closest_names(name, 3)) for name, tool in eager.items() if tool is None
        )
        if not result.hits and not pinned:
            return unmatched(query, index, missing, unavailable)
        tools = [catalog.by_name[hit.doc.name] for hit in result.hits]
        names = [tool.name for tool in tools]

        def step(
            current: McpActivationSet,
        ) -> tuple[McpActivationSet, tuple[McpActivationSet, McpActivationSet, tuple[str, ...]]]:
            new, evicted = current.activate(names)
            return new, (current, new, evicted)

        before, after, evicted = self.activation.update(step)
        self._unclaimed = tuple(n for n in self._unclaimed if n not in names)  # asked for now
        newly = tuple(name for name in names if name not in before)
        event = (
            ActivationChanged(activated=newly, evicted=evicted, active=after.names())
            if newly or evicted
            else None
        )
        matches = tuple(
            Match(
                name=tool.name,
                description=marked_spec(tool).description,
                input_schema=tool.spec.input_schema,
                newly_activated=tool.name in newly,
            )
            for tool in [*tools, *pinned]
        )
        limited = limit if result.mode == "keywords" and max_results > limit else None
        return SearchOutcome(
            instructions=self._first_instructions(catalog, before, newly),
            query=query,
            matches=matches,
            evicted=evicted,
            missing=missing,
            limited_to=limited,
            event=event,
            unavailable=unavailable,
        )
