"""Several toolsets offered as one, in order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from caliban.toolsets.base import ChildScope, Toolset, ToolsetView

if TYPE_CHECKING:
    from caliban.events import AgentEvent
    from caliban.tools.base import Tool


class CombinedToolset:
    """The parts' tools in part order; the first part that has a name owns it."""

    def __init__(self, parts: Iterable[Toolset]) -> None:
        self.parts = tuple(parts)
        self._sources: list[tuple[Tool, ...] | None] = [None] * len(self.parts)
        self._offered: tuple[Tool, ...] = ()

    def offered(self) -> tuple[Tool, ...]:
        # Called every turn: the joined tuple is rebuilt only when a part's tuple changed.
        changed = False
        sources = self._sources
        for i, part in enumerate(self.parts):
            source = part.offered()
            if source is not sources[i]:
                sources[i] = source
                changed = True
        if changed:
            self._offered = tuple(tool for source in sources if source for tool in source)
        return self._offered

    def find(self, name: str) -> Tool | None:
        for part in self.parts:
            if (tool := part.find(name)) is not None:
                return tool
        return None

    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name for part in self.parts for name in part.names()))

    def system_addendum(self) -> str:
        joined = ""
        for part in self.parts:
            if text := part.system_addendum():
                joined = f"{joined}\n\n{text}" if joined else text
        return joined

    def note_call(self, name: str) -> AgentEvent | None:
        for part in self.parts:
            if part.find(name) is not None:
                return part.note_call(name)
        return None

    def describe(self) -> ToolsetView:
        views = [part.describe() for part in self.parts]
        return ToolsetView(
            offered=tuple(tool for view in views for tool in view.offered),
            addendum="\n\n".join(view.addendum for view in views if view.addendum),
            mcp_tools=tuple(tool for view in views for tool in view.mcp_tools),
            lazy=next((view.lazy for view in views if view.lazy is not None), None),
            skills=next((view.skills for view in views if view.skills is not None), None),
        )

    def for_child(self, scope: ChildScope) -> CombinedToolset:
        return CombinedToolset(part.for_child(scope) for part in self.parts)
