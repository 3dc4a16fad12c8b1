"""One version of the MCP catalog as the lazy wrapper needs it: split, grouped, indexed.

A :class:`Catalog` is built when the MCP tool list (or the lazy decision, or the set of
servers still starting) changes and is immutable afterwards, except for the search index
(:func:`build_index`), built on the first search or prompt, or ahead of them in a background
thread (:meth:`Catalog.index`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from caliban.mcp.lazy.manifest import RESOURCES_GROUP, deferred_paragraph, group_by_server
from caliban.mcp.lazy.policy import LazyDecision
from caliban.mcp.resources import ResourceTool
from caliban.mcp.tools import McpTool, wire_prefix
from caliban.tools.base import McpOrigin, Tool

if TYPE_CHECKING:
    from caliban.search.index import SearchDoc, ToolIndex
    from caliban.search.models import SemanticModels
    from caliban.search.store import IndexStore

__all__ = ["BUILD_AT_ONCE", "LOAD_AT_ONCE", "Catalog", "build_index", "load_index", "search_doc"]


MAX_INDEXED_DESCRIPTION = 2_000
"""Characters of a tool's description the search index reads: enough to rank any sane
description, and a server's 20 KB descriptions on 2,000 tools no longer take the first
search 23 s (5 s now, 3 of them listing and start-up)."""


BUILD_AT_ONCE = 300
"""Lazy tools up to which pre-activation builds a new catalog's index before the first
request (about 0.1 s of one core for 300 real tools); a larger new catalog is indexed in the
background, its first prompt goes without pre-activation, and later sessions read the index
from the disk cache."""

LOAD_AT_ONCE = 2_000
"""Lazy tools up to which pre-activation reads a known catalog's index from the disk cache
before the first request (about 0.15 s of one core at 2,000; 0.8 s at 10,000, which made a
lazy first request slower than an eager one); a larger one is read in the background, and
its first prompt goes without pre-activation."""


def search_doc(tool: Tool) -> SearchDoc:
    """``tool`` as the search index sees it."""
    from caliban.search.index import SearchDoc

    server, short = _manifest_entry(tool)
    origin = tool.origin
    spec = tool.spec
    # Ranked on the server's own words, uncut.
    description = tool.description if isinstance(tool, McpTool) else spec.description
    return SearchDoc(
        name=tool.name,
        server=server,
        tool=origin.tool if isinstance(origin, McpOrigin) else short,
        description=description[:MAX_INDEXED_DESCRIPTION],
        input_schema=spec.input_schema,
    )


def _manifest_entry(tool: Tool) -> tuple[str, str]:
    """(server, short name): the model calls ``mcp__<server>__<short>``."""
    origin = tool.origin
    if isinstance(tool, ResourceTool):
        return RESOURCES_GROUP, tool.name
    if not isinstance(origin, McpOrigin):
        return "", tool.name
    return origin.server, tool.name.removeprefix(wire_prefix(origin.server))


class Catalog:
    """MCP tools split into eager (always on the wire) and lazy (deferred until found).

    Eager: every tool of a server the decision pins (``lazy = false``, ``.mcp.json``
    ``alwaysLoad``), and each tool its server marked ``_meta["anthropic/alwaysLoad"]``.

    ``connecting``: servers still starting whose tools are not known yet; ``search_model``:
    ``tools.search_model`` (:func:`caliban.search.models.semantic_models`).
    """

    def __init__(
        self,
        source: Sequence[Tool],
        decision: LazyDecision,
        connecting: tuple[str, ...] = (),
        *,
        search_model: str = "auto",
    ) -> None:
        self.decision = decision
        self.connecting = connecting
        self.search_model = search_model
        self.by_name: dict[str, Tool] = {}
        eager: list[Tool] = []
        lazy: list[Tool] = []
        for tool in source:
            if tool.name in self.by_name:
                continue
            self.by_name[tool.name] = tool
            origin = tool.origin
            deferred = decision.lazy and (
                isinstance(tool, ResourceTool)
                or (
                    isinstance(origin, McpOrigin)
                    and not decision.is_eager(origin.server)
                    and not (isinstance(tool, McpTool) and tool.always_load)
                )
            )
            (lazy if deferred else eager).append(tool)
        self.eager = tuple(eager)
        self.lazy = tuple(lazy)
        self.lazy_by_name = {tool.name: tool for tool in lazy}
        self.groups = group_by_server([_manifest_entry(tool) for tool in lazy])
        bare: dict[str, list[Tool]] = {}
        for tool in self.by_name.values():
            origin = tool.origin
            if isinstance(origin, McpOrigin):
                short = tool.name.removeprefix(wire_prefix(origin.server))
                for key in {origin.tool.lower(), short.lower()}:
                    bare.setdefault(key, []).append(tool)
        self._bare = bare
        self._index: ToolIndex[SearchDoc] | None = None
        self._index_lock = threading.Lock()
        self._building = False

    def bare_name(self, name: str) -> Tool | None:
        """The one tool whose own name (on its server) is ``name``, ignoring case; ``None``
        when no tool or several tools have it (the model guessed a name: run it only when
        the guess is unambiguous)."""
        found = self._bare.get(name.lower(), [])
        return found[0] if len(found) == 1 else None

    @property
    def searchable(self) -> bool:
        """Whether ToolSearch has something to do: lazy tools, or servers still starting."""
        return self.decision.lazy and bool(self.lazy or self.connecting)

    @cached_property
    def paragraph(self) -> str:
        """The deferred paragraph: the whole lazy catalog, whatever is active."""
        return deferred_paragraph(self.groups, connecting=self.connecting)

    def index(self) -> ToolIndex[SearchDoc]:
        """The search index over the lazy tools, built on first use (from any thread: a
        second caller waits for the build in progress), or read from the disk cache when
        these tools were indexed before. With a transformer, its tool embeddings are
        computed (or read from their cache) on its own thread; searches rank with the static
        model until they are ready."""
        with self._index_lock:
            if self._index is None:
                self._index = build_index(self.lazy, self.search_model)
            return self._index

    def index_now(self) -> ToolIndex[SearchDoc] | None:
        """The index if it costs this thread next to nothing: built already, a catalog of at
        most :data:`LOAD_AT_ONCE` tools read from the disk cache, or one of at most
        :data:`BUILD_AT_ONCE` tools (built now). Otherwise the index is read or built in a
        background thread, and this returns ``None`` until it is done: the first request
        does not wait for it."""
        if self._index is not None:
            return self._index
        if len(self.lazy) <= BUILD_AT_ONCE:
            return self.index()
        if not self._index_lock.acquire(blocking=False):
            return None  # a build is running
        try:
            if self._index is None and not self._building:
                if len(self.lazy) <= LOAD_AT_ONCE:
                    self._index = load_index(self.lazy, self.search_model)
                if self._index is None:
                    self._building = True
                    threading.Thread(target=self.index, name="caliban-index", daemon=True).start()
            return self._index
        finally:
            self._index_lock.release()


def build_index(tools: Sequence[Tool], search_model: str) -> ToolIndex[SearchDoc]:
    """A search index over ``tools`` with the models ``search_model`` names, read from the
    disk cache when these tools were indexed before (and written to it otherwise). The
    transformer's embeddings are cached per server, so keep each server's tools together."""
    from caliban.search.index import ToolIndex

    docs, models, store = _inputs(tools, search_model)
    return ToolIndex.build(docs, embedder=models.static, dense=models.dense, store=store)


def load_index(tools: Sequence[Tool], search_model: str) -> ToolIndex[SearchDoc] | None:
    """:func:`build_index`'s index if the disk cache has it, else ``None``."""
    from caliban.search.index import ToolIndex

    docs, models, store = _inputs(tools, search_model)
    return ToolIndex.load(docs, embedder=models.static, dense=models.dense, store=store)


def _inputs(
    tools: Sequence[Tool], search_model: str
) -> tuple[list[SearchDoc], SemanticModels, IndexStore]:
    from caliban.search.models import semantic_models

    return [search_doc(tool) for tool in tools], semantic_models(search_model), _store()


def _store() -> IndexStore:
    from caliban.config.paths import cache_dir
    from caliban.search.store import IndexStore

    return IndexStore(cache_dir() / "tool-index")
