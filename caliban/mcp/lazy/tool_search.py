"""ToolSearch: the built-in tool that finds deferred MCP tools and loads them.

With lazy MCP loading (``tools.lazy_mcp``) most MCP tools are not in the tool list sent to the
model. ``ToolSearch`` takes Claude Code's input shape — ``{query, max_results}`` — searches the
deferred catalog (``caliban.search.index``), activates what it found and answers with each
match's full name, description and JSON Schema, so the model can call a match on its very next
turn whatever provider it runs on (the schemas are plain text here, and on the wire from the
next request on). Before searching it waits for servers still starting whose tools are not
known yet (each bounded by its start-up timeout), and its answer names the servers that are
not available, so a model never concludes that a tool does not exist when its server is
merely down. The searching and activating is done by the toolset it is bound to
(:class:`ToolSearcher`, implemented by :class:`caliban.mcp.lazy.toolset.LazyMcpToolset`); this
module validates the input and words the answers — ToolSearch's, and ``caliban mcp search``'s
(:func:`search_catalog`, :func:`format_search`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from caliban.events import ActivationChanged, Notice
from caliban.tools.base import BuiltinTool, CallContext, ToolOutput

if TYPE_CHECKING:
    from caliban.search.index import ToolIndex
    from caliban.tools.base import Tool

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "MAX_RESULTS",
    "TOOL_SEARCH_NAME",
    "Match",
    "SearchOutcome",
    "ServerProblem",
    "ToolSearch",
    "ToolSearchInput",
    "ToolSearcher",
    "format_outcome",
    "format_search",
    "search_catalog",
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
class ServerProblem:
    """A configured server that is not available as ToolSearch answers."""

    server: str
    reason: str
    """Why: its error (``exited with code 3 while starting``) or ``still starting``."""
    searched: bool
    """Its tools were searched all the same, from the list it gave in an earlier session."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchOutcome:
    """What a search found and what it changed in the activation set."""

    query: str
    matches: tuple[Match, ...] = ()
    evicted: tuple[str, ...] = ()
    """Names the cap pushed out of the activation set, oldest first."""
    missing: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``select:`` names that matched nothing, each with the closest real names."""
    closest: tuple[str, ...] = ()
    """When nothing matched: the tool names that look most like the query."""
    servers: tuple[tuple[str, int], ...] = ()
    """When nothing matched: every server that has deferred tools, with their counts."""
    limited_to: int | None = None
    """Set when ``max_results`` was lowered to the activation cap."""
    instructions: tuple[tuple[str, str], ...] = ()
    """``(server, instructions)`` of servers whose first tool this search activated."""
    event: ActivationChanged | None = None
    """The change to announce (``None`` when the set's membership did not change)."""
    unavailable: tuple[ServerProblem, ...] = ()
    """Servers that failed or are still starting: tools may exist there."""


class ToolSearcher(Protocol):
    """What ToolSearch is bound to: one agent's lazy toolset and its activation set."""

    async def prepare_search(self, notify: Callable[[str], None]) -> None:
        """Wait for servers still starting whose tools are not known (``notify`` says so)."""
        ...

    def search_tools(self, query: str, max_results: int) -> SearchOutcome:
        """Search this toolset's lazily loaded tools and activate the matches."""
        ...


class ToolSearch(BuiltinTool[ToolSearchInput]):
    """Searches one toolset's deferred MCP tools; read-only (allowed in every mode)."""

    name = TOOL_SEARCH_NAME
    description = DESCRIPTION
    input_model = ToolSearchInput
    read_only = True

    def __init__(self, searcher: ToolSearcher) -> None:
        self.searcher = searcher

    async def run(self, args: ToolSearchInput, ctx: CallContext) -> ToolOutput:
        await self.searcher.prepare_search(lambda text: ctx.emit(Notice(level="info", text=text)))
        outcome = self.searcher.search_tools(args.query, args.max_results)
        if outcome.event is not None:
            ctx.emit(outcome.event)
        found = len(outcome.matches)
        summary = f"{found} tool{'s' if found != 1 else ''}" if found else "no match"
        return ToolOutput.text(format_outcome(outcome), summary=summary)


MAX_REPEATED_CHARS = 4_000
"""A match's description or schema longer than this is not repeated in the answer: the loaded
tool's definition carries it (a server's 1 MB schema would otherwise be sent twice)."""


def _schema_text(schema: Mapping[str, Any]) -> str:
    text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return _bounded(text, "schema")


def _bounded(text: str, what: str) -> str:
    if len(text) <= MAX_REPEATED_CHARS:
        return text
    # The end is kept: a description ends with the closing tag of the server's data mark.
    return (
        f"{text[:MAX_REPEATED_CHARS]} … [{what} cut here: {len(text):,} characters in all, "
        f"in the tool's definition] … {text[-40:]}"
    )


def format_outcome(outcome: SearchOutcome) -> str:
    """The text ToolSearch answers with."""
    if not outcome.matches:
        return no_match_text(outcome)
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
            _bounded(match.description.strip(), "description") or "(no description)",
            f"Input schema: {_schema_text(match.input_schema)}",
        ]
    missing = _missing_lines(outcome)
    if missing:
        lines.append("")
        lines.extend(missing)
    if outcome.instructions:
        from caliban.mcp.toolset import instructions_text

        lines += ["", instructions_text(outcome.instructions)]
    if outcome.evicted:
        lines += ["", f"Evicted (least recently used): {', '.join(outcome.evicted)}"]
    if outcome.unavailable:
        lines += ["", *unavailable_lines(outcome.unavailable)]
    return "\n".join(lines)


def unavailable_lines(problems: Sequence[ServerProblem]) -> list[str]:
    """What the answer says about servers that are not available."""
    lines = []
    for problem in problems:
        if problem.searched:
            lines.append(
                f"MCP server '{problem.server}' is not running ({problem.reason}): its tools "
                "were searched from the list it gave earlier; calling one tries to start it "
                "again."
            )
        else:
            lines.append(
                f"MCP server '{problem.server}' is not available ({problem.reason}): its tools "
                "could not be searched, so the tool you need may be there. Tell the user."
            )
    return lines


def _missing_lines(outcome: SearchOutcome) -> list[str]:
    lines = []
    for name, closest in outcome.missing:
        hint = f" Closest: {', '.join(closest)}." if closest else ""
        lines.append(f"Not found: {name}.{hint}")
    return lines


def unmatched(
    query: str,
    index: ToolIndex[Any],
    missing: tuple[tuple[str, tuple[str, ...]], ...] = (),
    unavailable: tuple[ServerProblem, ...] = (),
) -> SearchOutcome:
    """The outcome of a search that found nothing: what looks close, and what servers exist."""
    return SearchOutcome(
        query=query,
        missing=missing,
        closest=index.closest_names(query, 5),
        servers=index.server_counts(),
        unavailable=unavailable,
    )


def no_match_text(outcome: SearchOutcome) -> str:
    """The answer when nothing matched: the closest names and what servers there are."""
    lines = [f"No MCP tools matched '{outcome.query}'."]
    if outcome.missing:
        lines.extend(_missing_lines(outcome))
    elif outcome.closest:
        lines.append("Closest tool names: " + ", ".join(outcome.closest))
    lines.append(servers_line(outcome.servers))
    lines.extend(unavailable_lines(outcome.unavailable))
    return "\n".join(lines)


def servers_line(servers: Sequence[tuple[str, int]]) -> str:
    if not servers:
        return "No MCP servers are connected."
    listing = ", ".join(f"{s} ({c} tool{'s' if c != 1 else ''})" for s, c in servers)
    return "Servers: " + listing


# ---------------------------------------------------------------------------- mcp search


def search_catalog(
    tools: Sequence[Tool],
    query: str,
    limit: int,
    *,
    search_model: str = "auto",
    semantic_wait_s: float = 2.0,
) -> dict[str, Any]:
    """Rank ``tools`` for ``query`` as ToolSearch would, activating nothing.

    With a transformer (``search_model``), waits up to ``semantic_wait_s`` for its tool
    embeddings (instant from the disk cache) and otherwise ranks with the static model.

    Returns JSON-ready data: ``results`` (best first, each with ``name``, ``server``,
    ``tool``, ``score`` and ``description``), ``missing`` (``select:`` names that matched
    nothing), ``searched`` (the catalog size) and, when nothing matched, ``no_match`` (the
    text ToolSearch would answer with).
    """
    from caliban.mcp.lazy.catalog import build_index
    from caliban.search.history import open_history, search_with_history

    index = build_index(tools, search_model)
    index.wait_semantic(semantic_wait_s)
    result, _ = search_with_history(index, query, limit, open_history(index))
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
        data["no_match"] = no_match_text(unmatched(query, index))
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
    searched = f"{data['searched']} tools searched"
    if cached := data.get("cached"):
        searched += f"; cached lists of {', '.join(cached)}: --connect lists them again"
    lines.append(f"({searched})")
    return "\n".join(lines)
