"""A tool offered only in plan mode (ExitPlanMode): the tool list changes when the mode
does, not on every turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from caliban.toolsets.base import ChildScope, ToolsetView
from caliban.toolsets.tool_list import ToolList

if TYPE_CHECKING:
    from caliban.events import AgentEvent
    from caliban.tools.base import Tool


class PlanModeToolset:
    """Offers ``tool`` while ``planning()`` says the session is in plan mode; it stays
    callable otherwise (the permission policy explains why it does nothing then). A
    sub-agent gets none: only the main agent presents a plan to the user."""

    def __init__(self, tool: Tool, planning: Callable[[], bool]) -> None:
        self.tool = tool
        self.planning = planning
        self._offered = (tool,)  # the same tuples every turn: the combined list is cached

    def offered(self) -> tuple[Tool, ...]:
        return self._offered if self.planning() else ()

    def find(self, name: str) -> Tool | None:
        return self.tool if name == self.tool.name else None

    def names(self) -> tuple[str, ...]:
        return (self.tool.name,)

    def system_addendum(self) -> str:
        return ""

    def note_call(self, name: str) -> AgentEvent | None:
        return None

    def describe(self) -> ToolsetView:
        return ToolsetView(offered=self.offered(), addendum="")

    def for_child(self, scope: ChildScope) -> ToolList:
        return ToolList(())
