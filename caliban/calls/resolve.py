"""The resolve stage: what the model asked for — a tool that exists, arguments that are a
JSON object, not a read-only call it just made — or the error result that tells it why not."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field

from caliban.messages import ToolCall
from caliban.tools.base import McpOrigin
from caliban.toolsets.base import Toolset

REPEAT_LIMIT = 3
"""Turns in a row that repeat a read-only call before the run stops (small models loop)."""


@dataclass(kw_only=True)
class RepeatGuard:
    """Notices a read-only call repeated with the same arguments in consecutive turns.

    Its result is already in the history, so the repeat is answered with a note instead of
    running again; after :data:`REPEAT_LIMIT` such turns in a row the run stops. Calls that
    change something (Bash, Write, MCP tools not marked read-only) are never held back: their
    result may differ the second time.
    """

    limit: int = REPEAT_LIMIT
    turns: int = 0
    """Consecutive turns that repeated a call."""
    _previous: frozenset[str] = frozenset()
    _current: set[str] = field(default_factory=set)
    _repeated: bool = False

    def repeats(self, call: ToolCall) -> bool:
        """Whether ``call`` repeats one of the previous turn's read-only calls."""
        key = f"{call.name}\0{json.dumps(call.arguments, sort_keys=True, default=str)}"
        self._current.add(key)
        if key in self._previous:
            self._repeated = True
        return key in self._previous

    def end_turn(self) -> bool:
        """Close a turn; True when the run has repeated itself too often and must stop."""
        self.turns = self.turns + 1 if self._repeated else 0
        self._previous, self._current, self._repeated = frozenset(self._current), set(), False
        return self.turns >= self.limit


def invalid_arguments(call: ToolCall, raw: str) -> str:
    """The error for arguments that were not a JSON object."""
    return (
        f"{call.name} did not run: its arguments were not a valid JSON object "
        f"({raw[:500]!r}). Call it again with a JSON object matching its schema."
    )


def repeated(call: ToolCall) -> str:
    """The answer to a read-only call repeated from the previous turn."""
    return (
        f"{call.name} was not run again: you made this exact call (same arguments) in "
        "your previous turn and its result is above. Use that result, or call it with "
        "different arguments."
    )


_MAX_NAMED_TOOLS = 50
"""Past this many offered tools, an unknown-tool error names the built-ins and the closest
MCP names instead of every tool (5,000 MCP tools sent eagerly would make a 130 KB error)."""
_MAX_SCHEMA_CHARS = 2_000


def unknown_tool(name: str, toolset: Toolset) -> str:
    """The error for a tool name nobody offers: the tools that exist, or the closest ones."""
    tools = toolset.offered()
    offered = [tool.name for tool in tools]
    if len(offered) <= _MAX_NAMED_TOOLS:
        text = f"Unknown tool '{name}'. Available tools: {', '.join(sorted(offered))}"
    else:
        builtin = sorted(t.name for t in tools if not isinstance(t.origin, McpOrigin))
        mcp = [t.name for t in tools if isinstance(t.origin, McpOrigin)]
        text = (
            f"Unknown tool '{name}'. Available tools: {', '.join(builtin)}, "
            f"and {len(mcp):,} MCP tools"
        )
        if close := difflib.get_close_matches(name, mcp, n=5):
            text += f" (closest names: {', '.join(close)})"
    # Lazy MCP loading keeps most tools off the wire; naming them all could cost thousands
    # of tokens, so only the count and the closest names.
    if hidden := sorted(set(toolset.names()) - set(offered)):
        text += f". {len(hidden)} more tools are not loaded (ToolSearch finds them)"
        if close := difflib.get_close_matches(name, hidden, n=3):
            text += f"; closest names: {', '.join(close)}"
            # With their schemas, a model that guessed a name can call the right one next.
            for candidate in close:
                if (tool := toolset.find(candidate)) is not None:
                    schema = _ends(
                        json.dumps(tool.spec.input_schema, separators=(",", ":")),
                        head=_MAX_SCHEMA_CHARS,
                    )
                    text += f"\n{candidate}: {_ends(tool.spec.description.strip())}"
                    text += f" Input schema: {schema}"
    return text


def _ends(text: str, head: int = 160, tail: int = 60) -> str:
    """``text`` shortened to its start and its end, so a description wrapped in tags
    (an MCP server's, marked as its data) keeps its closing tag."""
    if len(text) <= head + tail + 3:
        return text
    return f"{text[:head]} … {text[-tail:]}"


__all__ = ["REPEAT_LIMIT", "RepeatGuard", "invalid_arguments", "repeated", "unknown_tool"]
