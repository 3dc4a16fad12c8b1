"""The toolset interface the agent loop talks to, and what a toolset says about itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from caliban.events import AgentEvent
    from caliban.tools.base import Tool


class ChildScope(Protocol):
    """What a sub-agent may use (a sub-agent definition)."""

    def allows(self, tool_name: str) -> bool:
        """Whether the child may be given ``tool_name``."""
        ...

    @property
    def inherit_active_mcp(self) -> bool:
        """Start from the parent's active MCP tools rather than none."""
        ...

    @property
    def exact_tools(self) -> tuple[str, ...]:
        """Tool names the definition lists exactly (active from the child's first turn)."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class LazyView:
    """The lazy-MCP state of a toolset."""

    cap: int
    active: tuple[str, ...]
    """Active lazily loaded tools, most recently used first."""
    deferred: tuple[Tool, ...]
    """Lazily loaded tools not on the wire now."""
    tool_search: Tool
    """The ToolSearch tool (on the wire while anything is deferred)."""
    preactivated: tuple[tuple[str, bool], ...] = ()
    """Tools loaded for a prompt before the model saw it, in order, each with whether the
    model has called it since (``tools.preactivate``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptTools:
    """Tools loaded for one prompt before it is sent: a note the prompt carries (never the
    system prompt, which stays byte-stable for prompt caches) and the change to announce."""

    note: str
    """The line added to the prompt; '' when tools were only dropped."""
    event: AgentEvent


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillsView:
    """Skills loaded lazily: listed in the system prompt, bodies loaded on use."""

    listed: int
    listing: str
    """The paragraph naming them (part of the system prompt)."""
    deferred_tokens: int
    """Their bodies, not in the context until the Skill tool loads one."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolsetView:
    """What a toolset puts in the next request, for ``/context`` and ``/tools``."""

    offered: tuple[Tool, ...]
    addendum: str
    mcp_tools: tuple[Tool, ...] = ()
    """Every MCP tool this toolset may use, on the wire or not."""
    lazy: LazyView | None = None
    """Set while MCP tools are loaded lazily."""
    skills: SkillsView | None = None
    """Set when skills are listed for the model."""


class Toolset(Protocol):
    """What the loop asks each turn; see :mod:`caliban.toolsets`."""

    def offered(self) -> tuple[Tool, ...]:
        """The tools to send with the next request, in a stable order."""
        ...

    def find(self, name: str) -> Tool | None:
        """The tool a call names, offered or not (deferred MCP tools stay callable)."""
        ...

    def names(self) -> tuple[str, ...]:
        """Every callable tool name, for error messages."""
        ...

    def system_addendum(self) -> str:
        """Text appended to the system prompt ('' for none)."""
        ...

    def note_call(self, name: str) -> AgentEvent | None:
        """Called before a tool runs; the lazy wrapper activates or refreshes MCP tools."""
        ...

    def describe(self) -> ToolsetView:
        """What the next request carries, and the lazy-loading state."""
        ...

    def for_child(self, scope: ChildScope) -> Toolset:
        """The toolset of a sub-agent limited to ``scope``, derived from this one."""
        ...
