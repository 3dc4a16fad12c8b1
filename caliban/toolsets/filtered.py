"""A toolset seen through an allowlist (a sub-agent's ``tools:``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from caliban.toolsets.base import ChildScope, Toolset, ToolsetView

if TYPE_CHECKING:
    from caliban.events import AgentEvent
    from caliban.tools.base import Tool


class FilteredToolset:
    """Only the tools of ``inner`` whose names ``allow`` accepts exist here."""

    def __init__(self, inner: Toolset, allow: Callable[[str], bool]) -> None:
        self.inner = inner
        self.allow = allow
        self._source: tuple[Tool, ...] | None = None
        self._offered: tuple[Tool, ...] = ()

    def offered(self) -> tuple[Tool, ...]:
        # The same tuple while the inner one is unchanged: wrappers key their caches on it.
        source = self.inner.offered()
        if source is not self._source:
            self._source = source
            self._offered = tuple(tool for tool in source if self.allow(tool.name))
        return self._offered

    def find(self, name: str) -> Tool | None:
        return self.inner.find(name) if self.allow(name) else None

    def names(self) -> tuple[str, ...]:
        return tuple(name for name in self.inner.names() if self.allow(name))

    def system_addendum(self) -> str:
        return self.inner.system_addendum()

    def note_call(self, name: str) -> AgentEvent | None:
        return self.inner.note_call(name) if self.allow(name) else None

    def describe(self) -> ToolsetView:
        view = self.inner.describe()
        return replace(
            view,
            offered=tuple(t for t in view.offered if self.allow(t.name)),
            mcp_tools=tuple(t for t in view.mcp_tools if self.allow(t.name)),
        )

    def for_child(self, scope: ChildScope) -> FilteredToolset:
        return FilteredToolset(self.inner.for_child(scope), self.allow)
