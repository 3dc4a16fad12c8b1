"""ToolSearch: the built-in tool that finds deferred MCP tools and loads them.

With lazy MCP loading (``tools.lazy_mcp``) most MCP tools are not in the tool list sent to the
model. ``ToolSearch`` takes Claude Code's input shape — ``{query, max_results}`` — searches the
deferred catalog (``caliban.search``), activates what it found and answers with each
match's full name, description and JSON Schema, so the model can call a match on its very next
turn whatever provider it runs on (the schemas are plain text here, and on the wire from the
next request on). The searching and activating is done by the toolbox it is bound to
(:class:`ToolSearcher`, implemented by ``caliban.mcp.wire.LazyToolbox``); this module only
validates the input and formats the answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from caliban.events import ActivationChanged
from caliban.tools.base import BuiltinTool, CallContext, ToolOutput

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "MAX_RESULTS",
    "TOOL_SEARCH_NAME",
    "Match",
    "SearchOutcome",
    "ToolSearch",
    "ToolSearchInput",
    "ToolSearcher",
    "format_outcome",
]

TOOL_SEARCH_NAME = "ToolSearch"
DEFAULT_MAX_RESULTS = 5
MAX_RESULTS = 25

DESCRIPTION = """\
Loads deferred MCP tools (listed under "Deferred MCP tools" in the system prompt) so you can \
call them. Query: keywords for the task ("create pull request"); "select:name1,name2" for exact \
names (mcp__server__tool or the bare tool name); "+word" to require a word. Returns each \
match's name, description and input schema; matches stay loaded for the rest of the session."""


class ToolSearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        description='Keywords, "select:name1,name2" for exact names, or "+word" to require a word.',
    )
    max_results: int = Field(
        default=DEFAULT_MAX_RESULTS,
        ge=1,
        le=MAX_RESULTS,
        description=f"Maximum number of tools to return (default {DEFAULT_MAX_RESULTS}).",
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Match:
    """One tool found: what the model needs to call it."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    newly_activated: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchOutcome:
    """What a search found and what it changed in the activation set."""

    query: str
    matches: tuple[Match, ...] = ()
    evicted: tuple[str, ...] = ()
    """Names the cap pushed out of the activation set, oldest first."""
    missing: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``select:`` names that matched nothing, each with the closest real names."""
    no_match: str | None = None
    """The whole answer when nothing matched (closest names, servers)."""
    limited_to: int | None = None
    """Set when ``max_results`` was lowered to the activation cap."""
    event: ActivationChanged | None = None
    """The change to announce (``None`` when the set's membership did not change)."""


class ToolSearcher(Protocol):
    """What ToolSearch is bound to: one agent's lazy toolbox and its activation set."""

    def search_tools(self, query: str, max_results: int) -> SearchOutcome:
        """Search this toolbox's lazily loaded tools and activate the matches."""
        ...


class ToolSearch(BuiltinTool[ToolSearchInput]):
    """Searches one toolbox's deferred MCP tools; read-only (allowed in every mode)."""

    name = TOOL_SEARCH_NAME
    description = DESCRIPTION
    input_model = ToolSearchInput
    read_only = True

    def __init__(self, searcher: ToolSearcher) -> None:
        self.searcher = searcher

    async def run(self, args: ToolSearchInput, ctx: CallContext) -> ToolOutput:
        outcome = self.searcher.search_tools(args.query, args.max_results)
        if outcome.event is not None:
            ctx.emit(outcome.event)
        found = len(outcome.matches)
        summary = f"{found} tool{'s' if found != 1 else ''}" if found else "no match"
        return ToolOutput.text(format_outcome(outcome), summary=summary)


def _schema_text(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, ensure_ascii=False, separators=(",", ":"))


def format_outcome(outcome: SearchOutcome) -> str:
    """The text ToolSearch answers with."""
    if not outcome.matches:
        return outcome.no_match or f"No MCP tools matched '{outcome.query}'."
    count = len(outcome.matches)
    lines = [
        f"Found {count} MCP tool{'s' if count != 1 else ''} for '{outcome.query}'. "
        f"{'They are' if count != 1 else 'It is'} loaded: call by name."
    ]
    if outcome.limited_to is not None:
        lines.append(
            f"(At most {outcome.limited_to} results: that is how many MCP tools can be loaded "
            "at once.)"
        )
    for match in outcome.matches:
        state = "newly activated" if match.newly_activated else "already active"
        lines += [
            "",
            f"{match.name} ({state})",
            match.description.strip() or "(no description)",
            f"Input schema: {_schema_text(match.input_schema)}",
        ]
    missing = _missing_lines(outcome)
    if missing:
        lines.append("")
        lines.extend(missing)
    if outcome.evicted:
        lines += ["", f"Evicted (least recently used): {', '.join(outcome.evicted)}"]
    return "\n".join(lines)


def _missing_lines(outcome: SearchOutcome) -> list[str]:
    lines = []
    for name, closest in outcome.missing:
        hint = f" Closest: {', '.join(closest)}." if closest else ""
        lines.append(f"Not found: {name}.{hint}")
    return lines
